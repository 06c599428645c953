// One binder per concern; module.cpp calls each. Glue only: logic lives in extension/.
#pragma once

#include <pybind11/pybind11.h>

namespace et_tensorrt::python {

// Maps the C++ error types of extension/ onto et_tensorrt.errors (imported once at module init).
void register_error_translators(pybind11::module_& m);

void bind_tensor_descriptors(pybind11::module_& m);

// Placement plans, the delegate's executor choice, the program runner; registers the backend.
void bind_runtime(pybind11::module_& m);

// The PyTorch executor's C++ fast path (extension/runtime/graph_interpreter.h).
void bind_graph_interpreter(pybind11::module_& m);

}  // namespace et_tensorrt::python
