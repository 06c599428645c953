#include "method_plan.h"

#include <sstream>

namespace et_tensorrt {
namespace {

// The delegate entry (input or output) that saw exactly this memory, if any: how a method input reaches the
// delegate that reads it (the first in call order), or a method output the delegate that wrote it last
// (ExecuTorch's memory plan reuses an output's memory for earlier intermediates, which other delegates wrote).
const TensorPlacement* find_by_address(const std::vector<std::shared_ptr<const PlacementPlan>>& delegates, IoRole role,
                                       const void* data) {
  if (data == nullptr) return nullptr;
  const auto address = reinterpret_cast<uintptr_t>(data);
  const size_t n = delegates.size();
  for (size_t k = 0; k < n; ++k) {
    const PlacementPlan& plan = *delegates[role == IoRole::Input ? k : n - 1 - k];
    for (const TensorPlacement& p : role == IoRole::Input ? plan.inputs : plan.outputs) {
      if (p.address == address) return &p;
    }
  }
  return nullptr;
}

// One step of a tensor's journey between the caller and the engine.
struct Hop {
  Placement action;
  size_t bytes;
  std::string reason;
};

// The composed entry: the first copy names the action (a rejection wins), bytes add up, reasons read in order.
// With more than one copy the reason starts with what each copied ("copy result 160 B + copy out 160 B: ..."),
// so the entry's bytes are never an unlabeled sum.
void apply_hops(TensorPlacement& entry, const std::vector<Hop>& hops) {
  std::string copies;
  size_t count = 0;
  for (const Hop& h : hops) {
    if (entry.action == Placement::Share || h.action == Placement::Reject) entry.action = h.action;
    if (h.action == Placement::Reject) continue;
    entry.bytes += h.bytes;
    if (h.action != Placement::Share) {
      copies += (count++ ? " + " : "") + std::string(placement_name(h.action)) + " " + std::to_string(h.bytes) + " B";
    }
  }
  for (const Hop& h : hops) {
    if (!h.reason.empty()) entry.reason += (entry.reason.empty() ? "" : "; then ") + h.reason;
  }
  if (count > 1) entry.reason = copies + (entry.reason.empty() ? "" : ": " + entry.reason);
}

TensorPlacement compose_input(size_t i, const MethodInput& in,
                              const std::vector<std::shared_ptr<const PlacementPlan>>& delegates) {
  TensorPlacement entry;
  entry.role = IoRole::Input;
  entry.index = i;
  entry.from = entry.to = in.caller.device;
  entry.address = reinterpret_cast<uintptr_t>(in.method_data);
  if (!in.value.empty()) {
    entry.action = Placement::Value;
    entry.reason = "the value " + in.value + " the program was exported with, passed by value";
    return entry;
  }
  std::vector<Hop> hops;
  if (in.copied_into_planned) {
    hops.push_back({Placement::CopyIntoPlanned, in.caller.nbytes,
                    "ExecuTorch copies this method input into the memory it planned for it (lower with "
                    "zero_copy_inputs=True to share the caller's memory)"});
    entry.to = EtDevice(EtDeviceType::CPU, 0);  // ExecuTorch plans host memory
  }
  if (const TensorPlacement* d = find_by_address(delegates, IoRole::Input, in.method_data)) {
    hops.push_back({d->action, d->bytes, d->reason});
    entry.to = d->to;
  } else if (!in.copied_into_planned) {
    entry.reason = "not a delegate input: ExecuTorch's kernels read it in place";
  }
  apply_hops(entry, hops);
  return entry;
}

TensorPlacement compose_output(size_t i, const MethodOutput& out,
                               const std::vector<std::shared_ptr<const PlacementPlan>>& delegates) {
  TensorPlacement entry;
  entry.role = IoRole::Output;
  entry.index = i;
  entry.from = entry.to = out.result.device;
  entry.address = reinterpret_cast<uintptr_t>(out.result.data);
  std::vector<Hop> hops;
  if (const TensorPlacement* d = find_by_address(delegates, IoRole::Output, out.result.data)) {
    hops.push_back({d->action, d->bytes, d->reason});
    entry.from = d->from;
  }
  if (!out.written_in_place) {
    hops.push_back({Placement::CopyOut, out.result.nbytes,
                    out.caller_given ? "ExecuTorch planned this output's memory: copied into the caller's tensor"
                                     : "ExecuTorch reuses this output's planned memory on every call: the caller "
                                       "gets a copy"});
  }
  apply_hops(entry, hops);
  return entry;
}

}  // namespace

MethodPlan compose_method_plan(std::string method, const std::vector<MethodInput>& inputs,
                               const std::vector<MethodOutput>& outputs,
                               std::vector<std::shared_ptr<const PlacementPlan>> delegates) {
  MethodPlan plan;
  plan.method = std::move(method);
  for (const MethodInput& in : inputs) plan.boundary_bytes += in.copied_into_planned ? in.caller.nbytes : 0;
  for (const MethodOutput& out : outputs) plan.boundary_bytes += out.written_in_place ? 0 : out.result.nbytes;
  for (size_t i = 0; i < inputs.size(); ++i) plan.inputs.push_back(compose_input(i, inputs[i], delegates));
  for (size_t i = 0; i < outputs.size(); ++i) plan.outputs.push_back(compose_output(i, outputs[i], delegates));
  plan.delegates = std::move(delegates);
  return plan;
}

std::string MethodPlan::executor() const {
  if (delegates.empty()) return "none";
  for (const auto& d : delegates) {
    if (d->executor != delegates.front()->executor) return "mixed";
  }
  return delegates.front()->executor;
}

EtDevice MethodPlan::execution_device() const {
  return delegates.empty() ? EtDevice(EtDeviceType::CPU, 0) : delegates.front()->execution_device;
}

size_t MethodPlan::bytes_copied() const {
  size_t total = boundary_bytes;
  for (const auto& d : delegates) total += d->bytes_copied();
  return total;
}

bool MethodPlan::ok() const {
  for (const auto& d : delegates) {
    if (!d->ok()) return false;
  }
  return true;
}

std::string MethodPlan::repr() const {
  std::ostringstream out;
  out << "MethodPlan(method=" << method << ", executor=" << executor() << ", delegates=" << delegates.size()
      << ", bytes_copied=" << bytes_copied() << ")";
  for (const auto* list : {&inputs, &outputs}) {
    for (const TensorPlacement& p : *list) {
      out << "\n  " << (p.role == IoRole::Input ? "input  " : "output ") << p.index << ": " << placement_name(p.action)
          << " " << device_str(p.from) << " -> " << device_str(p.to);
      if (p.bytes) out << ", " << p.bytes << " B";
      if (!p.reason.empty()) out << "  (" << p.reason << ")";
    }
  }
  return out.str();
}

}  // namespace et_tensorrt
