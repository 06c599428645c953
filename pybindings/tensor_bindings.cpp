#include <torch/python.h>

#include <sstream>

#include "../extension/aten_util/device_translation.h"
#include "../extension/aten_util/dtype_translation.h"
#include "../extension/aten_util/tensor_descriptor.h"
#include "bindings.h"
#include "tensor_descriptor_object.h"

namespace py = pybind11;

namespace et_tensorrt::python {
namespace {

at::Tensor require_tensor(const py::handle& item, size_t index, const std::string& method) {
  if (!THPVariable_Check(item.ptr())) {
    throw py::type_error("input " + std::to_string(index) + " of method '" + method + "' is a " +
                         std::string(py::str(py::type::of(item).attr("__name__"))) +
                         ", not a torch.Tensor; pass tensors only");
  }
  return THPVariable_Unpack(item.ptr());
}

}  // namespace

void bind_tensor_descriptors(py::module_& m) {
  py::class_<EtDevice>(m, "Device", "An ExecuTorch runtime device (cpu, or cuda with an index).")
      .def_property_readonly("type", [](const EtDevice& d) { return d.type() == EtDeviceType::CPU ? "cpu" : "cuda"; })
      .def_property_readonly("index", [](const EtDevice& d) { return static_cast<int>(d.index()); })
      .def("__eq__", [](const EtDevice& a, const EtDevice& b) { return a == b; })
      .def("__hash__", [](const EtDevice& d) { return static_cast<int>(d.type()) * 256 + d.index(); })
      .def("__repr__", [](const EtDevice& d) {
        return d.type() == EtDeviceType::CPU ? std::string("Device(type='cpu')")
                                             : "Device(type='cuda', index=" + std::to_string(d.index()) + ")";
      });

  m.def("translate_device", &torch_to_executorch_device, py::arg("device"),
        "Translate a torch device to the ExecuTorch runtime's device. cpu -> cpu, cuda:N -> cuda N, bare "
        "'cuda' -> the current CUDA device (0 without a CUDA runtime). Any other device type raises "
        "UnsupportedDeviceError.");

  py::class_<TensorDescriptor>(m, "TensorDescriptor",
                               "An ExecuTorch runtime tensor describing a torch tensor's memory, device "
                               "included. Keeps the tensor alive; copies nothing.")
      .def_property_readonly("device", &TensorDescriptor::device)
      .def_property_readonly("dtype", &TensorDescriptor::dtype)
      .def_property_readonly("sizes", &TensorDescriptor::sizes)
      .def_property_readonly("strides", &TensorDescriptor::strides)
      .def_property_readonly("dim_order", &TensorDescriptor::dim_order)
      .def_property_readonly("numel", [](const TensorDescriptor& d) { return d.et().numel(); })
      .def_property_readonly("nbytes", [](const TensorDescriptor& d) { return d.et().nbytes(); })
      .def_property_readonly("data_ptr", &TensorDescriptor::data_ptr)
      .def("__repr__", &TensorDescriptor::repr);

  m.def(
      "describe", [](const at::Tensor& tensor) { return TensorDescriptor{make_descriptor(tensor)}; }, py::arg("tensor"),
      "Describe one tensor as an ExecuTorch runtime tensor (see TensorDescriptor).");

  m.def(
      "describe_inputs",
      [](const py::sequence& tensors, const std::string& method) {
        py::list out(py::len(tensors));
        size_t index = 0;
        for (const py::handle item : tensors) {
          out[index] = py::cast(TensorDescriptor{describe_input(require_tensor(item, index, method), index, method)});
          ++index;
        }
        return out;
      },
      py::arg("tensors"), py::arg("method") = "forward",
      "Describe every input of a method call; errors name the input index, the method and the problem.");
}

}  // namespace et_tensorrt::python
