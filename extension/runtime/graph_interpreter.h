// Runs a partition's aten graph through PyTorch's dispatcher from C++: the PyTorch executor's fast path.
// No Python and no GIL per call: each step is a boxed call of a c10::OperatorHandle resolved once at init,
// its arguments either slots (graph inputs, lifted weights, earlier results) or constants converted once.
// Graphs it cannot express (higher-order ops, Python callables other than int arithmetic) stay on the
// Python path (et_tensorrt/runtime/graph_program.py decides, and says why).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>

#include <optional>
#include <string>
#include <vector>

namespace et_tensorrt {

// One argument of a step, as the step's schema expects it.
struct GraphArg {
  // SlotNumber: a size or other number computed in the graph, where the schema takes a Tensor (eager wraps it).
  enum class Kind : uint8_t { Slot, SlotNumber, Constant, List };
  Kind kind = Kind::Constant;
  size_t slot = 0;              // Slot, SlotNumber
  c10::IValue constant;         // Constant (converted once, with the schema's type)
  c10::TypePtr element_type;    // List: the list's element type
  std::vector<GraphArg> items;  // List: elements (slots or constants)
};

enum class IntOp : uint8_t { Add, Sub, Mul, FloorDiv, Mod, Neg, Max, Min, Eq, Ne, Lt, Le, Gt, Ge };

struct GraphStep {
  enum class Kind : uint8_t { Op, GetItem, Int };
  Kind kind = Kind::Op;
  std::optional<c10::OperatorHandle> op;  // Op
  size_t n_returns = 1;                   // Op: >1 stores a tuple in the slot
  std::vector<GraphArg> args;             // Op: one per schema argument; Int: one or two operands
  size_t item = 0;                        // GetItem: index into the tuple/list in args[0]
  IntOp int_op = IntOp::Add;              // Int: SymInt arithmetic on sizes
  size_t out = 0;                         // slot written
  std::vector<size_t> release;            // slots whose last use this step was (keeps peak memory as eager)
};

// A Python number where a Tensor is taken, as eager does it: a 0-dim "wrapped number", which never promotes
// a tensor operand's dtype within its category.
at::Tensor wrapped_number(const c10::Scalar& value);

class GraphInterpreter {
 public:
  GraphInterpreter(std::vector<at::Tensor> lifted, std::vector<size_t> lifted_slots, std::vector<size_t> input_slots,
                   std::vector<GraphStep> steps, std::vector<size_t> output_slots, size_t n_slots);

  // Thread-compatible: concurrent calls need separate interpreters (the delegate handle serializes its own).
  // inputs: tensors, and ints for the partition's size arguments (its SymInt placeholders).
  std::vector<at::Tensor> run(const std::vector<c10::IValue>& inputs) const;

  size_t num_inputs() const { return input_slots_.size(); }
  size_t num_steps() const { return steps_.size(); }

 private:
  std::vector<at::Tensor> lifted_;
  std::vector<size_t> lifted_slots_, input_slots_;
  std::vector<GraphStep> steps_;
  std::vector<size_t> output_slots_;
  size_t n_slots_;
};

}  // namespace et_tensorrt
