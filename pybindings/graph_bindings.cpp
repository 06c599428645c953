// GraphInterpreter from the encoding et_tensorrt/runtime/graph_program.py writes (glue only).
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/python.h>

#include <pybind11/stl.h>

#include <variant>

#include "../extension/runtime/graph_interpreter.h"
#include "bindings.h"

namespace py = pybind11;

namespace et_tensorrt::python {
namespace {

// Real sizes at run time: a SymInt in a schema is an int here.
c10::TypePtr concrete(const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::SymIntType) return c10::IntType::get();
  if (auto opt = type->cast<c10::OptionalType>()) {
    if (opt->getElementType()->kind() == c10::TypeKind::SymIntType)
      return c10::OptionalType::create(c10::IntType::get());
  }
  return type;
}

GraphArg convert_arg(const py::handle& enc, const c10::TypePtr& type) {
  const auto t = enc.cast<py::tuple>();
  const auto tag = t[0].cast<std::string>();
  GraphArg arg;
  if (tag == "slot") {
    arg.kind = GraphArg::Kind::Slot;
    arg.slot = t[1].cast<size_t>();
  } else if (tag == "const") {
    arg.constant = torch::jit::toIValue(t[1], concrete(type));
  } else if (tag == "none") {
    arg.constant = c10::IValue();
  } else if (tag == "slot_number") {
    arg.kind = GraphArg::Kind::SlotNumber;
    arg.slot = t[1].cast<size_t>();
  } else if (tag == "number") {  // a Python number where the schema takes a Tensor: a wrapped number, as eager
    arg.constant = wrapped_number(torch::jit::toIValue(t[1], c10::NumberType::get()).toScalar());
  } else if (tag == "list") {
    c10::TypePtr list_type = type;
    if (auto opt = list_type->cast<c10::OptionalType>()) list_type = opt->getElementType();
    auto list = list_type->cast<c10::ListType>();
    if (!list) throw std::invalid_argument("graph program: a list where the schema takes " + type->str());
    arg.kind = GraphArg::Kind::List;
    arg.element_type = concrete(list->getElementType());
    for (const py::handle item : t[1].cast<py::list>()) arg.items.push_back(convert_arg(item, arg.element_type));
  } else {
    throw std::invalid_argument("graph program: unknown argument encoding '" + tag + "'");
  }
  return arg;
}

IntOp int_op(const std::string& name) {
  static const std::pair<const char*, IntOp> ops[] = {
      {"add", IntOp::Add}, {"sub", IntOp::Sub}, {"mul", IntOp::Mul}, {"floordiv", IntOp::FloorDiv},
      {"mod", IntOp::Mod}, {"neg", IntOp::Neg}, {"max", IntOp::Max}, {"min", IntOp::Min},
      {"eq", IntOp::Eq},   {"ne", IntOp::Ne},   {"lt", IntOp::Lt},   {"le", IntOp::Le},
      {"gt", IntOp::Gt},   {"ge", IntOp::Ge}};
  for (const auto& [n, op] : ops) {
    if (name == n) return op;
  }
  throw std::invalid_argument("graph program: unknown int operation '" + name + "'");
}

GraphStep convert_step(const py::handle& enc) {
  const auto t = enc.cast<py::tuple>();
  const auto tag = t[0].cast<std::string>();
  GraphStep step;
  if (tag == "op") {
    step.kind = GraphStep::Kind::Op;
    const auto name = t[1].cast<std::string>();
    const auto overload = t[2].cast<std::string>();
    step.op = c10::Dispatcher::singleton().findSchemaOrThrow(name.c_str(), overload.c_str());
    const c10::FunctionSchema& schema = step.op->schema();
    const auto encs = t[3].cast<py::list>();
    if (encs.size() != schema.arguments().size()) {
      throw std::invalid_argument("graph program: " + name + "." + overload + " takes " +
                                  std::to_string(schema.arguments().size()) + " arguments, the step gives " +
                                  std::to_string(encs.size()));
    }
    for (size_t i = 0; i < encs.size(); ++i) {
      const c10::Argument& a = schema.arguments()[i];
      if (encs[i].cast<py::tuple>()[0].cast<std::string>() == "default") {
        if (!a.default_value()) throw std::invalid_argument("graph program: " + a.name() + " has no default");
        GraphArg d;
        d.constant = *a.default_value();
        step.args.push_back(std::move(d));
      } else {
        step.args.push_back(convert_arg(encs[i], a.type()));
      }
    }
    step.n_returns = schema.returns().size();
    step.out = t[4].cast<size_t>();
    step.release = t[5].cast<std::vector<size_t>>();
  } else if (tag == "getitem") {
    step.kind = GraphStep::Kind::GetItem;
    GraphArg from;
    from.kind = GraphArg::Kind::Slot;
    from.slot = t[1].cast<size_t>();
    step.args.push_back(from);
    step.item = t[2].cast<size_t>();
    step.out = t[3].cast<size_t>();
    step.release = t[4].cast<std::vector<size_t>>();
  } else if (tag == "int") {
    step.kind = GraphStep::Kind::Int;
    step.int_op = int_op(t[1].cast<std::string>());
    for (const py::handle operand : t[2].cast<py::list>())
      step.args.push_back(convert_arg(operand, c10::IntType::get()));
    step.out = t[3].cast<size_t>();
    step.release = t[4].cast<std::vector<size_t>>();
  } else {
    throw std::invalid_argument("graph program: unknown step '" + tag + "'");
  }
  return step;
}

}  // namespace

void bind_graph_interpreter(py::module_& m) {
  py::class_<GraphInterpreter, std::shared_ptr<GraphInterpreter>>(
      m, "GraphInterpreter", "A partition's aten graph run through the dispatcher from C++ (no Python per call).")
      .def(
          py::init([](std::vector<at::Tensor> lifted, std::vector<size_t> lifted_slots, std::vector<size_t> input_slots,
                      const py::list& steps, std::vector<size_t> output_slots, size_t n_slots) {
            std::vector<GraphStep> converted;
            converted.reserve(steps.size());
            for (const py::handle s : steps) converted.push_back(convert_step(s));
            return std::make_shared<GraphInterpreter>(std::move(lifted), std::move(lifted_slots),
                                                      std::move(input_slots), std::move(converted),
                                                      std::move(output_slots), n_slots);
          }),
          py::arg("lifted"), py::arg("lifted_slots"), py::arg("input_slots"), py::arg("steps"), py::arg("output_slots"),
          py::arg("n_slots"))
      .def("run",
           [](const GraphInterpreter& g, const std::vector<std::variant<at::Tensor, int64_t>>& inputs) {
             std::vector<c10::IValue> values;  // tensors, and ints for size arguments
             values.reserve(inputs.size());
             for (const auto& v : inputs) {
               values.push_back(std::holds_alternative<int64_t>(v) ? c10::IValue(std::get<int64_t>(v))
                                                                   : c10::IValue(std::get<at::Tensor>(v)));
             }
             py::gil_scoped_release no_gil;
             return g.run(values);
           })
      .def_property_readonly("num_steps", &GraphInterpreter::num_steps);
}

}  // namespace et_tensorrt::python
