#include "blob_to_python.h"

#include <pybind11/stl.h>

namespace py = pybind11;

namespace et_tensorrt {
namespace {

py::dict io_entry_dict(const IoEntry& e) {
  py::list dims;
  for (const DimRange& d : e.dims) dims.append(py::make_tuple(d.min, d.opt, d.max));
  py::dict out;
  out["name"] = e.name;
  out["role"] = e.role == IoRole::Size ? "size" : e.role == IoRole::Input ? "input" : "output";
  out["dtype_code"] = static_cast<int>(e.dtype);
  out["dtype"] = py::none();
  try {
    out["dtype"] = executorch_to_torch_dtype(e.dtype);
  } catch (const std::exception&) {
    // A code with no torch dtype (the reader accepts any ExecuTorch code): dtype_code still says which.
  }
  out["device"] = executorch_to_torch_device(e.recorded_device);
  out["dims"] = dims;
  return out;
}

const char* weight_kind_name(WeightKind kind) {
  switch (kind) {
    case WeightKind::Parameter:
      return "parameter";
    case WeightKind::Buffer:
      return "buffer";
    case WeightKind::Constant:
      return "constant";
  }
  return "?";
}

py::dict weight_dict(const WeightEntry& w) {
  py::dict out;
  out["name"] = w.name;
  out["kind"] = weight_kind_name(w.kind);
  out["dtype_code"] = static_cast<int>(w.dtype);
  out["dtype"] = executorch_to_torch_dtype(w.dtype);  // every WEIGHTS dtype has one (the reader checks)
  out["persistent"] = w.persistent;
  out["sizes"] = py::tuple(py::cast(w.sizes));
  out["strides"] = py::tuple(py::cast(w.strides));
  out["offset"] = w.offset;
  out["nbytes"] = w.nbytes;
  return out;
}

}  // namespace

py::dict blob_to_python(const DelegateBlob& blob, const uint8_t* base, const py::object& view) {
  auto slice = [&](const ByteSpan& s) -> py::object {
    if (!s.present) return py::none();
    const auto start = static_cast<py::ssize_t>(s.data - base);
    return view[py::slice(start, start + static_cast<py::ssize_t>(s.size), 1)];
  };
  py::dict out;
  out["version"] = blob.version;
  out["execution_device"] = executorch_to_torch_device(blob.execution_device);
  py::list inputs, outputs, weights;
  for (const IoEntry& e : blob.inputs) inputs.append(io_entry_dict(e));
  for (const IoEntry& e : blob.outputs) outputs.append(io_entry_dict(e));
  for (const WeightEntry& w : blob.weight_entries) weights.append(weight_dict(w));
  out["inputs"] = inputs;
  out["outputs"] = outputs;
  out["weights"] = weights;
  out["engine"] = slice(blob.engine);
  out["program"] = slice(blob.program);
  out["graph"] = slice(blob.graph);
  out["weights_section"] = slice(blob.weights);
  out["refit_map"] = slice(blob.refit_map);
  out["metadata"] = slice(blob.metadata);
  out["data"] = view;  // the whole blob: WEIGHTS offsets are from its start
  return out;
}

}  // namespace et_tensorrt
