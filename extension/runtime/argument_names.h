// How a delegate names its arguments in an error. ExecuTorch hands `execute` the method's values (EValue
// pointers), numbered in the delegate's own order, which is not the method's: decode's delegate may read the
// method's input 1 first. A runner that knows the method installs an ArgumentNames on the calling thread while
// it executes (like PlanRecorder), and the delegate's errors then name the method's input as the caller knows it
// ("input 1 ('cache_position')"); without one (executorch.runtime) they say "input k" in the delegate's order.
// Nothing is computed unless an error asks.
#pragma once

#include <executorch/runtime/core/evalue.h>

#include <string>

namespace et_tensorrt {

class ArgumentNamer {
 public:
  virtual ~ArgumentNamer() = default;
  // The method input `value` is, as the caller knows it ("input 1 ('cache_position')"), or "" when it is none
  // (an intermediate value the method computed).
  virtual std::string name(const executorch::runtime::EValue* value) const = 0;
};

class ArgumentNames {
 public:
  explicit ArgumentNames(const ArgumentNamer& namer);  // installs itself on this thread (nesting restores)
  ~ArgumentNames();
  ArgumentNames(const ArgumentNames&) = delete;
  ArgumentNames& operator=(const ArgumentNames&) = delete;

 private:
  friend std::string argument_label(const executorch::runtime::EValue*, size_t, bool);
  const ArgumentNamer& namer_;
  const ArgumentNames* previous_;
};

// The name of delegate argument `index` (an input, or with `output` an output) whose value is `value`.
std::string argument_label(const executorch::runtime::EValue* value, size_t index, bool output = false);

}  // namespace et_tensorrt
