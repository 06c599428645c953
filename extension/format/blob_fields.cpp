#include "blob_fields.h"

#include <pybind11/stl.h>

namespace py = pybind11;

namespace et_tensorrt {
namespace {

// A device as the blob format codes it: (type, index), type 0 cpu, 1 cuda (docs/blob-format.md).
py::tuple device_tuple(EtDevice device) {
  return py::make_tuple(static_cast<int>(device.type()), static_cast<int>(device.index()));
}

py::dict io_entry_dict(const IoEntry& e) {
  py::list dims;
  for (const DimRange& d : e.dims) dims.append(py::make_tuple(d.min, d.opt, d.max));
  py::dict out;
  out["name"] = e.name;
  out["role"] = e.role == IoRole::Size ? "size" : e.role == IoRole::Input ? "input" : "output";
  out["dtype"] = static_cast<int>(e.dtype);
  out["device"] = device_tuple(e.recorded_device);
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
  out["dtype"] = static_cast<int>(w.dtype);
  out["persistent"] = w.persistent;
  out["sizes"] = py::tuple(py::cast(w.sizes));
  out["strides"] = py::tuple(py::cast(w.strides));
  out["offset"] = w.offset;
  out["nbytes"] = w.nbytes;
  out["named"] = w.named;
  return out;
}

py::dict refit_step_dict(const RefitStep& st) {
  py::dict out;
  out["op"] = static_cast<int>(st.op);
  switch (st.op) {
    case RefitOp::Source:
      out["weight"] = st.weight;
      break;
    case RefitOp::Raw:
      out["offset"] = st.offset;
      out["nbytes"] = st.nbytes;
      break;
    case RefitOp::Cast:
      out["dtype"] = static_cast<int>(st.dtype);
      break;
    case RefitOp::Permute:
    case RefitOp::Reshape:
      out["dims"] = py::tuple(py::cast(st.dims));
      break;
    case RefitOp::BnScale:
    case RefitOp::BnShift:
      out["params"] = py::tuple(py::cast(st.params));
      out["eps"] = st.eps;
      out["axis"] = st.axis;
      out["zero"] = st.zero;
      break;
  }
  return out;
}

py::dict refit_entry_dict(const RefitEntry& e) {
  py::dict out;
  out["name"] = e.name;
  out["dtype"] = static_cast<int>(e.dtype);
  out["sizes"] = py::tuple(py::cast(e.sizes));
  py::list steps;
  for (const RefitStep& st : e.steps) steps.append(refit_step_dict(st));
  out["steps"] = steps;
  return out;
}

py::dict named_entry_dict(const NamedDataEntry& e) {
  py::dict out;
  out["target"] = static_cast<int>(e.target);
  out["index"] = e.index;
  out["key"] = e.key;
  out["nbytes"] = e.nbytes;
  out["crc32"] = e.has_crc32 ? py::object(py::int_(e.crc32)) : py::none();
  return out;
}

}  // namespace

py::dict blob_fields(const DelegateBlob& blob, const uint8_t* base, const py::object& view) {
  auto slice = [&](const ByteSpan& s) -> py::object {
    if (!s.present) return py::none();
    const auto start = static_cast<py::ssize_t>(s.data - base);
    return view[py::slice(start, start + static_cast<py::ssize_t>(s.size), 1)];
  };
  py::dict out;
  out["version"] = blob.version;
  out["digests_verified"] = blob.digests_verified;
  out["execution_device"] = device_tuple(blob.execution_device);
  py::list inputs, outputs, weights;
  for (const IoEntry& e : blob.inputs) inputs.append(io_entry_dict(e));
  for (const IoEntry& e : blob.outputs) outputs.append(io_entry_dict(e));
  for (const WeightEntry& w : blob.weight_entries) weights.append(weight_dict(w));
  out["inputs"] = inputs;
  out["outputs"] = outputs;
  out["weights"] = weights;
  out["engine"] = slice(blob.engine);  // None for an engine that is named data (NAMED_DATA says where)
  py::list named_entries;
  for (const NamedDataEntry& e : blob.named_entries) named_entries.append(named_entry_dict(e));
  out["named_data"] = named_entries;
  out["program"] = slice(blob.program);
  out["graph"] = slice(blob.graph);
  out["weights_section"] = slice(blob.weights);
  out["refit_map"] = slice(blob.refit_map);
  out["metadata"] = slice(blob.metadata);
  out["data"] = view;  // the whole blob: WEIGHTS offsets are from its start
  py::list refit;
  for (const RefitEntry& e : blob.refit_entries) refit.append(refit_entry_dict(e));
  out["refit_entries"] = refit;
  py::list states;
  for (const StateEntry& e : blob.states) {
    py::dict d;
    d["name"] = e.name;
    d["input_name"] = e.input_name;
    d["output_name"] = e.output_name;
    d["dtype"] = static_cast<int>(e.dtype);
    d["shape"] = e.sizes;
    d["update"] = static_cast<int>(e.update);
    // Initial contents: a view of the blob, valid while `view` is (the executor copies them into its state).
    d["initial"] = e.initial == nullptr ? py::none() : slice(ByteSpan{e.initial, static_cast<size_t>(e.nbytes), true});
    d["position_input"] = e.position_input;
    d["position_kind"] = static_cast<int>(e.position_kind);
    d["length_input"] = e.length_input;
    d["length_dim"] = e.length_dim;
    d["length_value"] = e.length_value;
    d["methods"] = e.methods;
    states.append(d);
  }
  out["states"] = states;
  out["state"] = slice(blob.state);
  if (blob.recipe_section.present) {
    py::dict recipe;
    recipe["version"] = blob.recipe.version;
    recipe["header"] = slice(blob.recipe.header);
    recipe["graph"] = slice(blob.recipe.graph);
    recipe["map"] = slice(blob.recipe.map);
    py::list entries;
    for (const RefitEntry& e : blob.recipe.entries) entries.append(refit_entry_dict(e));
    recipe["entries"] = entries;
    out["recipe"] = recipe;
  } else {
    out["recipe"] = py::none();
  }
  if (blob.input_guards.present) {
    py::list dims, indices;
    for (const DimGuard& g : blob.dim_guards) {
      py::dict d;
      d["argument"] = g.argument;
      d["dim"] = g.dim;
      d["symbol"] = g.symbol;
      d["scale"] = g.scale;
      d["offset"] = g.offset;
      dims.append(d);
    }
    for (const IndexGuard& g : blob.index_guards) {
      py::dict d;
      d["argument"] = g.argument;
      d["bound"] = g.bound;
      indices.append(d);
    }
    py::dict guards;
    guards["dims"] = dims;
    guards["indices"] = indices;
    out["input_guards"] = guards;
  } else {
    out["input_guards"] = py::none();
  }
  out["weight_views"] = py::none();
  return out;
}

}  // namespace et_tensorrt
