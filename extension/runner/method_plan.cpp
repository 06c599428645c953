#include "method_plan.h"

#include <sstream>

namespace et_tensorrt {
namespace {

// The delegate entry (input or output) that saw exactly this memory, if any: how a method input reaches the
// delegate that reads it, or a method output the delegate that wrote it. The first delegate in call order wins.
const TensorPlacement* find_by_address(const std::vector<std::shared_ptr<const PlacementPlan>>& delegates, IoRole role,
                                       const void* data) {
  if (data == nullptr) return nullptr;
  const auto address = reinterpret_cast<uintptr_t>(data);
  for (const auto& plan : delegates) {
    for (const TensorPlacement& p : role == IoRole::Input ? plan->inputs : plan->outputs) {
      if (p.address == address) return &p;
    }
  }
  return nullptr;
}

// Appends one hop of a tensor's journey to the composed entry: the first copy names the action, bytes add up,
// reasons read in order.
void add_hop(TensorPlacement& entry, Placement action, size_t bytes, const std::string& reason) {
  if (entry.action == Placement::Share || action == Placement::Reject) entry.action = action;
  entry.bytes += action == Placement::Reject ? 0 : bytes;
  if (!reason.empty()) entry.reason += (entry.reason.empty() ? "" : "; then ") + reason;
}

TensorPlacement compose_input(size_t i, const MethodInput& in,
                              const std::vector<std::shared_ptr<const PlacementPlan>>& delegates) {
  TensorPlacement entry;
  entry.role = IoRole::Input;
  entry.index = i;
  entry.from = entry.to = in.caller.device;
  entry.address = reinterpret_cast<uintptr_t>(in.method_data);
  if (in.copied_into_planned) {
    add_hop(entry, Placement::CopyIntoPlanned, in.caller.nbytes,
            "ExecuTorch copies this method input into the memory it planned for it (lower with "
            "zero_copy_inputs=True to share the caller's memory)");
    entry.to = EtDevice(EtDeviceType::CPU, 0);  // ExecuTorch plans host memory
  }
  if (const TensorPlacement* d = find_by_address(delegates, IoRole::Input, in.method_data)) {
    add_hop(entry, d->action, d->bytes, d->reason);
    entry.to = d->to;
  } else if (!in.copied_into_planned) {
    entry.reason = "not a delegate input: ExecuTorch's kernels read it in place";
  }
  return entry;
}

TensorPlacement compose_output(size_t i, const MethodOutput& out,
                               const std::vector<std::shared_ptr<const PlacementPlan>>& delegates) {
  TensorPlacement entry;
  entry.role = IoRole::Output;
  entry.index = i;
  entry.from = entry.to = out.result.device;
  entry.address = reinterpret_cast<uintptr_t>(out.result.data);
  if (const TensorPlacement* d = find_by_address(delegates, IoRole::Output, out.result.data)) {
    add_hop(entry, d->action, d->bytes, d->reason);
    entry.from = d->from;
  }
  if (!out.written_in_place) {
    add_hop(entry, Placement::CopyOut, out.result.nbytes,
            out.caller_given ? "ExecuTorch planned this output's memory: copied into the caller's tensor"
                             : "ExecuTorch reuses this output's planned memory on every call: the caller gets a copy");
  }
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
