#include "graph_interpreter.h"

#include <ATen/ScalarOps.h>

#include <stdexcept>

namespace et_tensorrt {
namespace {

c10::IValue value_of(const GraphArg& arg, const std::vector<c10::IValue>& slots) {
  switch (arg.kind) {
    case GraphArg::Kind::Slot:
      return slots[arg.slot];
    case GraphArg::Kind::SlotNumber:
      return wrapped_number(slots[arg.slot].toScalar());
    case GraphArg::Kind::Constant:
      return arg.constant;
    case GraphArg::Kind::List: {
      c10::impl::GenericList list(arg.element_type);
      list.reserve(arg.items.size());
      for (const GraphArg& item : arg.items) list.push_back(value_of(item, slots));
      return list;
    }
  }
  return {};
}

int64_t floor_div(int64_t a, int64_t b) {
  if (b == 0) throw std::domain_error("size arithmetic divides by zero");
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;  // Python's floor division
}

c10::IValue int_op(IntOp op, const c10::IValue& a, const c10::IValue& b) {
  const int64_t x = a.toInt();
  const int64_t y = op == IntOp::Neg ? 0 : b.toInt();
  switch (op) {
    case IntOp::Add:
      return x + y;
    case IntOp::Sub:
      return x - y;
    case IntOp::Mul:
      return x * y;
    case IntOp::FloorDiv:
      return floor_div(x, y);
    case IntOp::Mod:
      return x - floor_div(x, y) * y;  // Python's modulo: the sign of the divisor
    case IntOp::Neg:
      return -x;
    case IntOp::Max:
      return std::max(x, y);
    case IntOp::Min:
      return std::min(x, y);
    case IntOp::Eq:
      return x == y;
    case IntOp::Ne:
      return x != y;
    case IntOp::Lt:
      return x < y;
    case IntOp::Le:
      return x <= y;
    case IntOp::Gt:
      return x > y;
    case IntOp::Ge:
      return x >= y;
  }
  return {};
}

void check_slots(const GraphArg& arg, size_t n_slots) {
  if ((arg.kind == GraphArg::Kind::Slot || arg.kind == GraphArg::Kind::SlotNumber) && arg.slot >= n_slots) {
    throw std::invalid_argument("graph program: slot " + std::to_string(arg.slot) + " out of range");
  }
  for (const GraphArg& item : arg.items) check_slots(item, n_slots);
}

}  // namespace

at::Tensor wrapped_number(const c10::Scalar& value) {
  at::Tensor n = at::scalar_to_tensor(value);
  n.unsafeGetTensorImpl()->set_wrapped_number(true);
  return n;
}

GraphInterpreter::GraphInterpreter(std::vector<at::Tensor> lifted, std::vector<size_t> lifted_slots,
                                   std::vector<size_t> input_slots, std::vector<GraphStep> steps,
                                   std::vector<size_t> output_slots, size_t n_slots)
    : lifted_(std::move(lifted)),
      lifted_slots_(std::move(lifted_slots)),
      input_slots_(std::move(input_slots)),
      steps_(std::move(steps)),
      output_slots_(std::move(output_slots)),
      n_slots_(n_slots) {
  if (lifted_.size() != lifted_slots_.size())
    throw std::invalid_argument("graph program: lifted tensors and slots differ");
  auto check = [&](size_t slot) {
    if (slot >= n_slots_) throw std::invalid_argument("graph program: slot " + std::to_string(slot) + " out of range");
  };
  for (size_t s : lifted_slots_) check(s);
  for (size_t s : input_slots_) check(s);
  for (size_t s : output_slots_) check(s);
  for (const GraphStep& step : steps_) {
    check(step.out);
    for (size_t s : step.release) check(s);
    for (const GraphArg& a : step.args) check_slots(a, n_slots_);
  }
}

std::vector<at::Tensor> GraphInterpreter::run(const std::vector<c10::IValue>& inputs) const {
  if (inputs.size() != input_slots_.size()) {
    throw std::invalid_argument("graph program takes " + std::to_string(input_slots_.size()) + " inputs, got " +
                                std::to_string(inputs.size()));
  }
  std::vector<c10::IValue> slots(n_slots_);
  for (size_t i = 0; i < lifted_.size(); ++i) slots[lifted_slots_[i]] = lifted_[i];
  for (size_t i = 0; i < inputs.size(); ++i) slots[input_slots_[i]] = inputs[i];
  torch::jit::Stack stack;
  for (const GraphStep& step : steps_) {
    switch (step.kind) {
      case GraphStep::Kind::Op: {
        stack.clear();
        stack.reserve(step.args.size());
        for (const GraphArg& arg : step.args) stack.push_back(value_of(arg, slots));
        try {
          step.op->callBoxed(&stack);
        } catch (const c10::Error& e) {  // the op and torch's reason, without its C++ backtrace
          throw std::runtime_error(c10::toString(step.op->operator_name()) + ": " + e.what_without_backtrace());
        }
        if (step.n_returns == 1) {
          slots[step.out] = std::move(stack.at(0));
        } else {
          slots[step.out] = c10::ivalue::Tuple::create(std::vector<c10::IValue>(stack.begin(), stack.end()));
        }
        break;
      }
      case GraphStep::Kind::GetItem: {
        const c10::IValue& from = slots[step.args.at(0).slot];
        if (from.isTuple()) {
          slots[step.out] = from.toTupleRef().elements().at(step.item);
        } else {
          slots[step.out] = from.toListRef().at(step.item);
        }
        break;
      }
      case GraphStep::Kind::Int: {
        const c10::IValue a = value_of(step.args.at(0), slots);
        const c10::IValue b = step.args.size() > 1 ? value_of(step.args[1], slots) : c10::IValue();
        slots[step.out] = int_op(step.int_op, a, b);
        break;
      }
    }
    for (size_t s : step.release) slots[s] = c10::IValue();
  }
  std::vector<at::Tensor> out;
  out.reserve(output_slots_.size());
  for (size_t s : output_slots_) out.push_back(slots[s].toTensor());
  return out;
}

}  // namespace et_tensorrt
