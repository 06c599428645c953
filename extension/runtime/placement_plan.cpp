#include "placement_plan.h"

#include <executorch/runtime/core/exec_aten/util/dim_order_util.h>

#include <sstream>

namespace et_tensorrt {
namespace {

std::string shape_str(const std::vector<int64_t>& sizes) {
  std::string s = "(";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s + (sizes.size() == 1 ? ",)" : ")");
}

std::string range_str(const std::vector<DimRange>& dims) {
  std::string s = "(";
  for (size_t i = 0; i < dims.size(); ++i) {
    s += i ? ", " : "";
    const DimRange& d = dims[i];
    s += d.is_static() ? std::to_string(d.min)
                       : std::to_string(d.min) + ".." + (d.max == -1 ? std::string("inf") : std::to_string(d.max));
  }
  return s + (dims.size() == 1 ? ",)" : ")");
}

// Why a tensor cannot be bound to this I/O entry at all (empty: it can).
std::string mismatch(const ArgumentInfo& t, const IoEntry& e) {
  if (t.dtype != e.dtype) {
    return "dtype " + dtype_text(t.dtype) + " where the engine takes " + dtype_text(e.dtype);
  }
  bool fits = t.sizes.size() == e.dims.size();
  for (size_t d = 0; fits && d < t.sizes.size(); ++d) {
    const DimRange& r = e.dims[d];
    if (e.role == IoRole::Output && !r.is_static()) {
      continue;  // ExecuTorch planned its upper bound, which may exceed the engine's; resized after the call
    }
    fits = t.sizes[d] >= r.min && (r.max == -1 || t.sizes[d] <= r.max);
  }
  if (!fits) {
    return "shape " + shape_str(t.sizes) + " outside the engine's range " + range_str(e.dims);
  }
  return "";
}

// Whether an output's planned memory holds the engine's largest result (its dims' maxima).
bool holds_largest(const ArgumentInfo& t, const IoEntry& e) {
  size_t planned = 1, largest = 1;
  for (int64_t s : t.sizes) planned *= static_cast<size_t>(s);
  for (const DimRange& d : e.dims) {
    if (d.max == -1) return false;
    largest *= static_cast<size_t>(d.max);
  }
  if (planned == 0) return largest == 0;
  return t.nbytes / planned * largest <= t.nbytes;  // element size x largest element count
}

// A size argument: checked against its value range, handed over by value.
TensorPlacement place_size(const ArgumentInfo& t, const IoEntry& e, size_t index) {
  TensorPlacement p;
  p.role = e.role;
  p.index = index;
  p.action = Placement::Value;
  if (!t.is_size) {
    p.action = Placement::Reject;
    p.reason = "a tensor where the partition takes a size (an integer)";
    return p;
  }
  const DimRange& r = e.dims.at(0);
  if (t.value < r.min || (r.max != -1 && t.value > r.max)) {
    p.action = Placement::Reject;
    p.reason = "size " + std::to_string(t.value) + " outside the engine's range " + range_str(e.dims);
    return p;
  }
  p.reason = e.name.empty() ? "size " + std::to_string(t.value) + ", computed inside the engine from its inputs' shapes"
                            : "size " + std::to_string(t.value) + ", an engine shape input";
  return p;
}

TensorPlacement place(const ArgumentInfo& t, const IoEntry& e, size_t index, EtDevice exec, bool in_place_ok,
                      const std::string& fixed_addresses) {
  if (e.is_size()) {
    return place_size(t, e, index);
  }
  TensorPlacement p;
  p.role = e.role;
  p.index = index;
  if (t.is_size) {
    p.action = Placement::Reject;
    p.reason = "a size (the integer " + std::to_string(t.value) + ") where the engine takes a tensor";
    return p;
  }
  p.address = reinterpret_cast<uintptr_t>(t.data);
  p.reason = t.label_note;
  const bool input = e.role == IoRole::Input;
  // Data flows caller -> executor for inputs, executor -> caller for outputs.
  p.from = input ? t.device : exec;
  p.to = input ? exec : t.device;
  if (std::string why = mismatch(t, e); !why.empty()) {
    p.action = Placement::Reject;
    p.reason = why;
    return p;
  }
  const bool t_cuda = t.device.type() == EtDeviceType::CUDA;
  const bool exec_cuda = exec.type() == EtDeviceType::CUDA;
  if (t_cuda && !exec_cuda) {
    if (input) {
      // Only reachable when no CUDA runtime is usable here (otherwise the executor runs on the GPU).
      p.action = Placement::Reject;
      p.reason = "labelled " + device_str(t.device) +
                 " but the partition executes on the host here (no usable "
                 "CUDA runtime): its memory cannot be read";
      return p;
    }
  }
  if (t.device != exec) {
    if (!t_cuda && exec_cuda) {
      p.action = input ? Placement::CopyHostToDevice : Placement::CopyDeviceToHost;
      p.reason +=
          input ? "host memory, engine on " + device_str(exec) : "ExecuTorch planned this output in host memory";
    } else if (t_cuda && exec_cuda) {
      p.action = Placement::CopyDeviceToDevice;
      p.reason += "on " + device_str(t.device) + ", engine on " + device_str(exec);
    } else {
      p.action = Placement::Reject;
      p.reason = "output planned on " + device_str(t.device) + " but the partition executes on the host here";
      return p;
    }
    p.bytes = t.nbytes;
    return p;
  }
  if (!t.contiguous) {
    p.action = Placement::CopyLayout;
    p.reason += "dim order is not contiguous; the engine reads row-major";
    p.bytes = t.nbytes;
    return p;
  }
  if (input && !in_place_ok) {
    p.action = Placement::CopyFixed;
    p.reason += fixed_addresses;
    p.bytes = t.nbytes;
    return p;
  }
  if (!input && !in_place_ok) {
    p.action = Placement::CopyResult;
    p.reason += fixed_addresses.empty() ? "the PyTorch executor allocates its results" : fixed_addresses;
    p.bytes = t.nbytes;
    return p;
  }
  if (!input && !holds_largest(t, e)) {
    p.action = Placement::CopyResult;
    p.reason += "the planned output memory (" + std::to_string(t.nbytes) +
                " B) may not hold the engine's largest "
                "result " +
                range_str(e.dims);
    p.bytes = t.nbytes;
    return p;
  }
  p.action = Placement::Share;
  return p;
}

}  // namespace

bool operator==(const ArgumentInfo& a, const ArgumentInfo& b) {
  return a.device == b.device && a.dtype == b.dtype && a.sizes == b.sizes && a.contiguous == b.contiguous &&
         a.nbytes == b.nbytes && a.data == b.data && a.label_note == b.label_note && a.is_size == b.is_size &&
         a.value == b.value;
}

ArgumentInfo argument_info(const executorch::aten::Tensor& t) {
  ArgumentInfo v;
  v.device = t.device();
  v.dtype = t.scalar_type();
  v.sizes.assign(t.sizes().begin(), t.sizes().end());
  v.contiguous = executorch::runtime::is_contiguous_dim_order(t.dim_order().data(), t.dim_order().size());
  v.nbytes = t.nbytes();
  v.data = t.const_data_ptr();
  return v;
}

ArgumentInfo size_argument_info(int64_t value) {
  ArgumentInfo v;
  v.is_size = true;
  v.value = value;
  v.dtype = EtScalarType::Long;
  return v;
}

const char* role_name(IoRole role) { return role == IoRole::Output ? "output" : "input"; }

const char* placement_name(Placement p) {
  switch (p) {
    case Placement::Share:
      return "share";
    case Placement::CopyHostToDevice:
      return "copy h2d";
    case Placement::CopyDeviceToDevice:
      return "copy d2d";
    case Placement::CopyDeviceToHost:
      return "copy d2h";
    case Placement::CopyLayout:
      return "copy layout";
    case Placement::CopyResult:
      return "copy result";
    case Placement::CopyFixed:
      return "copy fixed";
    case Placement::Value:
      return "value";
    case Placement::Reject:
      return "reject";
    case Placement::CopyIntoPlanned:
      return "copy planned";
    case Placement::CopyOut:
      return "copy out";
  }
  return "?";
}

std::string device_str(EtDevice device) {
  return device.type() == EtDeviceType::CPU ? "cpu" : "cuda:" + std::to_string(device.index());
}

size_t PlacementPlan::bytes_copied() const {
  size_t total = 0;
  for (const auto* list : {&inputs, &outputs}) {
    for (const TensorPlacement& p : *list) total += p.action == Placement::Reject ? 0 : p.bytes;
  }
  return total;
}

size_t PlacementPlan::state_bytes() const {
  size_t total = 0;
  for (const StatePlacement& s : states) total += s.bytes;
  return total;
}

bool PlacementPlan::ok() const {
  for (const auto* list : {&inputs, &outputs}) {
    for (const TensorPlacement& p : *list) {
      if (p.action == Placement::Reject) return false;
    }
  }
  return true;
}

std::string PlacementPlan::rejection_message(const std::function<std::string(IoRole, size_t)>& label) const {
  std::ostringstream out;
  const char* sep = "";
  for (const auto* list : {&inputs, &outputs}) {
    for (const TensorPlacement& p : *list) {
      if (p.action == Placement::Reject) {
        out << sep << (label ? label(p.role, p.index) : role_name(p.role) + std::string(" ") + std::to_string(p.index))
            << ": " << p.reason;
        sep = "\n";
      }
    }
  }
  return out.str();
}

std::string PlacementPlan::repr() const {
  std::ostringstream out;
  out << "PlacementPlan(executor=" << executor;
  if (!engine_origin.empty()) out << " (" << engine_origin << ")";
  out << ", device=" << device_str(execution_device) << ", bytes_copied=" << bytes_copied() << ")";
  if (!executor_reason.empty()) out << "\n  executor: " << executor_reason;
  for (const auto* list : {&inputs, &outputs}) {
    for (const TensorPlacement& p : *list) {
      out << "\n  " << (p.role == IoRole::Output ? "output " : "input  ") << p.index << ": " << placement_name(p.action)
          << " " << device_str(p.from) << " -> " << device_str(p.to);
      if (p.bytes) out << ", " << p.bytes << " B";
      if (!p.reason.empty()) out << "  (" << p.reason << ")";
    }
  }
  for (const StatePlacement& s : states) {
    out << "\n  state " << s.name << ": owned on " << device_str(s.device) << ", "
        << (s.update == "copied back" ? "copied back on the device" : "updated " + s.update) << ", " << s.bytes << " B";
    if (!s.methods.empty()) {
      out << ", shared by";
      for (size_t m = 0; m < s.methods.size(); ++m) out << (m ? ", " : " ") << s.methods[m];
    }
  }
  return out.str();
}

PlacementPlan plan_placement(const std::vector<ArgumentInfo>& inputs, const std::vector<ArgumentInfo>& outputs,
                             const DelegateBlob& blob, EtDevice execution_device, const std::string& executor,
                             bool executor_writes_in_place, bool executor_reads_in_place,
                             const std::string& fixed_addresses) {
  if (inputs.size() != blob.inputs.size() || outputs.size() != blob.outputs.size()) {
    throw PlacementCountError("the delegate was called with " + std::to_string(inputs.size()) + " inputs and " +
                              std::to_string(outputs.size()) + " outputs, but its engine has " +
                              std::to_string(blob.inputs.size()) + " and " + std::to_string(blob.outputs.size()));
  }
  PlacementPlan plan;
  plan.execution_device = execution_device;
  plan.executor = executor;
  for (size_t i = 0; i < inputs.size(); ++i) {
    plan.inputs.push_back(
        place(inputs[i], blob.inputs[i], i, execution_device, executor_reads_in_place, fixed_addresses));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    plan.outputs.push_back(
        place(outputs[i], blob.outputs[i], i, execution_device, executor_writes_in_place, fixed_addresses));
  }
  return plan;
}

}  // namespace et_tensorrt
