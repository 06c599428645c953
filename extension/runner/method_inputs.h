// A method's inputs as its caller knows them, in the runner's and the delegate's errors: "input 1
// ('cache_position')". ExecuTorch keeps the exported program's input spec (ExecutionPlan.container_meta_type
// .encoded_inp_str, a pytree spec: keyword arguments by name); it is read from the file, and turned into names by
// et_tensorrt.runtime.input_names, only when an error needs them.
#pragma once

#include <executorch/runtime/executor/method.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "../runtime/argument_names.h"

namespace et_tensorrt {

// The method's encoded_inp_str in the program flatbuffer `data` (bounds-checked), or "" when it has none.
std::string method_input_spec(const uint8_t* data, size_t size, const std::string& method);

// One name per input from a spec ("" for a positional argument); empty when Python cannot read it.
std::vector<std::string> method_input_names(const std::string& spec);

// Names the delegate's arguments that are this method's inputs (installed by the runner around execute).
class MethodInputs final : public ArgumentNamer {
 public:
  using Label = std::function<std::string(size_t)>;  // input index -> "input 1 ('cache_position')"
  MethodInputs(const executorch::runtime::Method& method, Label label) : method_(method), label_(std::move(label)) {}
  std::string name(const executorch::runtime::EValue* value) const override;

 private:
  const executorch::runtime::Method& method_;
  Label label_;
};

}  // namespace et_tensorrt
