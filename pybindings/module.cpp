#include <torch/python.h>

#include "bindings.h"

PYBIND11_MODULE(_C, m) {
  m.doc() = "et_tensorrt native binding: ExecuTorch tensor descriptors and the TensorRT delegate runtime";
  et_tensorrt::python::register_error_translators(m);
  et_tensorrt::python::bind_tensor_descriptors(m);
  et_tensorrt::python::bind_runtime(m);
  et_tensorrt::python::bind_graph_interpreter(m);
}
