#include <torch/python.h>

#include <pybind11/stl.h>

#include <variant>

#include "../extension/runner/program_runner.h"
#include "../extension/runtime/blob_reader.h"
#include "../extension/runtime/delegate_handle.h"
#include "../extension/runtime/placement_plan.h"
#include "../extension/runtime/backend_interface.h"
#include "bindings.h"
#include "tensor_descriptor_object.h"

namespace py = pybind11;

namespace et_tensorrt::python {
namespace {

py::dict io_entry_dict(const IoEntry& e) {
  py::list dims;
  for (const DimRange& d : e.dims) dims.append(py::make_tuple(d.min, d.opt, d.max));
  py::dict out;
  out["name"] = e.name;
  out["role"] = e.role == IoRole::Size ? "size" : role_name(e.role);
  out["dtype"] = executorch_to_torch_dtype(e.dtype);
  out["device"] = executorch_to_torch_device(e.recorded_device);
  out["dims"] = dims;
  return out;
}

std::string_view bytes_view(const py::buffer& data, py::buffer_info& info) {
  info = data.request();
  if (!PyBuffer_IsContiguous(info.view(), 'C')) {
    throw py::buffer_error("a blob must be a C-contiguous buffer (bytes, bytearray or a contiguous memoryview)");
  }
  return {static_cast<const char*>(info.ptr), static_cast<size_t>(info.size * info.itemsize)};
}

std::vector<ArgumentInfo> argument_infos(const std::vector<TensorDescriptor>& descriptors) {
  std::vector<ArgumentInfo> out;
  for (const TensorDescriptor& d : descriptors) out.push_back(argument_info(*d.tensor));
  return out;
}

// Delegate arguments as ExecuTorch passes them: tensors (descriptors) and sizes (ints).
std::vector<ArgumentInfo> argument_infos(const std::vector<std::variant<TensorDescriptor, int64_t>>& arguments) {
  std::vector<ArgumentInfo> out;
  for (const auto& a : arguments) {
    out.push_back(std::holds_alternative<int64_t>(a) ? size_argument_info(std::get<int64_t>(a))
                                                      : argument_info(*std::get<TensorDescriptor>(a).tensor));
  }
  return out;
}

} // namespace

void bind_runtime(py::module_& m) {
  py::class_<TensorPlacement>(m, "TensorPlacement", "One input's or output's placement decision.")
      .def_property_readonly("role", [](const TensorPlacement& p) { return role_name(p.role); })
      .def_readonly("index", &TensorPlacement::index)
      .def_property_readonly("action", [](const TensorPlacement& p) { return placement_name(p.action); })
      .def_property_readonly("source", [](const TensorPlacement& p) { return executorch_to_torch_device(p.from); })
      .def_property_readonly("destination", [](const TensorPlacement& p) { return executorch_to_torch_device(p.to); })
      .def_readonly("bytes", &TensorPlacement::bytes)
      .def_readonly("data_ptr", &TensorPlacement::address)
      .def_readonly("reason", &TensorPlacement::reason)
      .def("__repr__", [](const TensorPlacement& p) {
        return std::string("<") + role_name(p.role) + " " + std::to_string(p.index) + ": " +
               placement_name(p.action) + " " + device_str(p.from) + " -> " + device_str(p.to) + ">";
      });

  py::class_<PlacementPlan, std::shared_ptr<PlacementPlan>>(m, "PlacementPlan",
                                                            "Per call: share, copy or reject each input and output.")
      .def_readonly("executor", &PlacementPlan::executor)
      .def_property_readonly("execution_device",
                             [](const PlacementPlan& p) { return executorch_to_torch_device(p.execution_device); })
      .def_readonly("inputs", &PlacementPlan::inputs)
      .def_readonly("outputs", &PlacementPlan::outputs)
      .def_property_readonly("bytes_copied", &PlacementPlan::bytes_copied)
      .def_property_readonly("ok", &PlacementPlan::ok)
      .def("__repr__", &PlacementPlan::repr);

  m.def(
      "parse_blob",
      [](const py::buffer& data) {
        py::buffer_info info;
        const std::string_view bytes = bytes_view(data, info);
        const DelegateBlob blob = parse_delegate_blob(bytes.data(), bytes.size());
        py::dict out;
        out["version"] = blob.version;
        out["execution_device"] = executorch_to_torch_device(blob.execution_device);
        py::list inputs, outputs;
        for (const IoEntry& e : blob.inputs) inputs.append(io_entry_dict(e));
        for (const IoEntry& e : blob.outputs) outputs.append(io_entry_dict(e));
        out["inputs"] = inputs;
        out["outputs"] = outputs;
        out["engine_size"] = blob.engine.size;
        out["program_size"] = blob.program.size;
        out["metadata"] = py::bytes(reinterpret_cast<const char*>(blob.metadata.data), blob.metadata.size);
        return out;
      },
      py::arg("blob"), "Parse a delegate blob with the C++ reader the runtime uses (raises BlobFormatError).");

  m.def(
      "plan_placement",
      [](const py::buffer& blob_bytes, const std::vector<std::variant<TensorDescriptor, int64_t>>& inputs,
         const std::vector<TensorDescriptor>& outputs, const c10::Device& execution_device,
         const std::string& executor, bool writes_in_place) {
        py::buffer_info info;
        const std::string_view bytes = bytes_view(blob_bytes, info);
        const DelegateBlob blob = parse_delegate_blob(bytes.data(), bytes.size());
        return std::make_shared<PlacementPlan>(plan_placement(argument_infos(inputs), argument_infos(outputs), blob,
                                                              torch_to_executorch_device(execution_device),
                                                              executor, writes_in_place));
      },
      py::arg("blob"), py::arg("inputs"), py::arg("outputs"), py::arg("execution_device"),
      py::arg("executor") = "tensorrt", py::arg("writes_in_place") = true,
      "The plan the delegate would compute for these arguments: descriptors, and ints for size arguments "
      "(moves no data).");

  m.def(
      "_relabel",
      [](const TensorDescriptor& d, const c10::Device& device) {
        // Tests only: a descriptor over the same memory under another device label.
        const auto& t = *d.tensor;
        TensorPtr keep = d.tensor;
        return TensorDescriptor{executorch::extension::make_tensor_ptr(
            std::vector<executorch::aten::SizesType>(t.sizes().begin(), t.sizes().end()), t.mutable_data_ptr(),
            std::vector<executorch::aten::DimOrderType>(t.dim_order().begin(), t.dim_order().end()),
            std::vector<executorch::aten::StridesType>(t.strides().begin(), t.strides().end()), t.scalar_type(),
            torch_to_executorch_device(device), executorch::aten::TensorShapeDynamism::STATIC,
            [keep](void*) {})};
      },
      py::arg("descriptor"), py::arg("device"));

  m.def("last_plan", [] { return std::const_pointer_cast<PlacementPlan>(last_placement_plan()); },
        "The placement plan of the most recent delegate call in this process (None before any).");
  m.def("last_delegate_error", &last_delegate_error, "This thread's last delegate error message.");
  m.def("register_backend", &register_tensorrt_backend,
        "Register EtTensorRTBackend into libexecutorch.so's registry (idempotent).");

  py::class_<ProgramRunner>(m, "ProgramRunner")
      .def_static("from_file", &ProgramRunner::from_file, py::arg("path"))
      .def_static(
          "from_bytes", [](const py::bytes& b) { return ProgramRunner::from_bytes(std::string(b)); }, py::arg("data"))
      .def("method_names", &ProgramRunner::method_names)
      .def("num_inputs", &ProgramRunner::num_inputs, py::arg("method"))
      .def(
          "run",
          [](ProgramRunner& r, const std::vector<at::Tensor>& inputs, const std::string& method,
             const std::optional<std::vector<at::Tensor>>& outputs) {
            std::vector<bool> in_place;
            std::vector<at::Tensor> result;
            {
              // Native work without the GIL; the delegate takes it back to call its executor.
              py::gil_scoped_release no_gil;
              result = r.run(inputs, method, outputs, &in_place);
            }
            return py::make_tuple(result, in_place);
          },
          py::arg("inputs"), py::arg("method"), py::arg("outputs") = py::none());
}

} // namespace et_tensorrt::python
