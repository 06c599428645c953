// The Python TensorDescriptor object: shared by the descriptor and runtime bindings.
#pragma once

#include <torch/python.h>

#include <sstream>
#include <string>
#include <vector>

#include "../extension/aten_util/device_translation.h"
#include "../extension/aten_util/dtype_translation.h"
#include "../extension/aten_util/tensor_descriptor.h"

namespace et_tensorrt::python {

namespace py = pybind11;

// Python view of a descriptor: every field is read back from the ExecuTorch tensor itself, so what
// Python sees is what the runtime will see.
struct TensorDescriptor {
  TensorPtr tensor;

  const executorch::aten::Tensor& et() const { return *tensor; }

  c10::Device device() const { return executorch_to_torch_device(et().device()); }
  c10::ScalarType dtype() const { return executorch_to_torch_dtype(et().scalar_type()); }
  py::tuple sizes() const { return py::cast(std::vector<int64_t>(et().sizes().begin(), et().sizes().end())); }
  py::tuple strides() const { return py::cast(std::vector<int64_t>(et().strides().begin(), et().strides().end())); }
  py::tuple dim_order() const {
    return py::cast(std::vector<int64_t>(et().dim_order().begin(), et().dim_order().end()));
  }
  uintptr_t data_ptr() const { return reinterpret_cast<uintptr_t>(et().const_data_ptr()); }

  std::string repr() const {
    std::ostringstream out;
    out << "TensorDescriptor(device=" << device().str() << ", dtype=" << c10::toString(dtype()) << ", sizes=(";
    for (size_t i = 0; i < et().sizes().size(); ++i) out << (i ? ", " : "") << et().sizes()[i];
    out << "), dim_order=(";
    for (size_t i = 0; i < et().dim_order().size(); ++i) out << (i ? ", " : "") << int(et().dim_order()[i]);
    out << "), nbytes=" << et().nbytes() << ", data_ptr=0x" << std::hex << data_ptr() << ")";
    return out.str();
  }
};

}  // namespace et_tensorrt::python
