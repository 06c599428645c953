// The placement plan: for every delegate input and output, share the caller's memory, copy it, or
// reject it — decided from the ExecuTorch tensor descriptor (device label, dtype, sizes, dim order)
// against the partition's I/O table and the device the executor runs on. Pure: computing a plan moves
// no data, so every (descriptor device, execution device) pair can be tested without a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <executorch/runtime/core/exec_aten/exec_aten.h>

#include "../format/blob_reader.h"

namespace et_tensorrt {

enum class Placement : uint8_t {
  Share,               // bind the caller's pointer: zero copy
  CopyHostToDevice,    // into a delegate-owned staging buffer on the execution device
  CopyDeviceToDevice,  // across GPU indices
  CopyDeviceToHost,    // results written on the device, returned into host memory ExecuTorch planned
  CopyLayout,          // same device, but a layout (dim order) the engine cannot read in place
  CopyResult,          // the executor allocates its own results (PyTorch executor); copied into place
  CopyFixed,           // into a reused buffer: the executor reads fixed addresses (a replayed CUDA graph)
  Value,               // a size argument: an integer handed to the executor by value (no memory)
  Reject,
  // At the method boundary, made by ExecuTorch or the runner, not by a delegate (see runner/method_plan.h):
  CopyIntoPlanned,  // ExecuTorch copied a method input into the memory it planned for it
  CopyOut,          // a method output in memory ExecuTorch reuses, copied out for the caller
};

const char* placement_name(Placement p);

// What the plan needs to know about one ExecuTorch argument: a tensor (read from its descriptor, never
// guessed) or a size (an Int EValue: `is_size`, `value`).
struct ArgumentInfo {
  EtDevice device{EtDeviceType::CPU, 0};
  EtScalarType dtype = EtScalarType::Float;
  std::vector<int64_t> sizes;
  bool contiguous = true;  // dim order is the identity
  size_t nbytes = 0;
  const void* data = nullptr;
  std::string label_note;  // set when the pointer check corrected the label (see pointer_residence.h)
  bool is_size = false;
  int64_t value = 0;  // the size, when is_size
};

// Every field: the same argument in the same memory (a delegate reuses its last plan for such a call).
bool operator==(const ArgumentInfo& a, const ArgumentInfo& b);

// Reads an ArgumentInfo from an ExecuTorch tensor's own descriptor.
ArgumentInfo argument_info(const executorch::aten::Tensor& t);
// A size argument (ExecuTorch passes a SymInt as an Int EValue).
ArgumentInfo size_argument_info(int64_t value);

// "input" for tensor and size arguments, "output" for results.
const char* role_name(IoRole role);

struct TensorPlacement {
  IoRole role = IoRole::Input;
  size_t index = 0;
  Placement action = Placement::Share;
  EtDevice from{EtDeviceType::CPU, 0};
  EtDevice to{EtDeviceType::CPU, 0};
  size_t bytes = 0;       // bytes this entry copies per call (0 when shared)
  uintptr_t address = 0;  // the caller's pointer the delegate saw (proves zero copy when shared)
  std::string reason;     // why it is copied or rejected; empty for share
};

// A state tensor the delegate owns (blob STATE): where it lives and what this call did to it. It never crosses
// the delegate boundary; `bytes` is what the delegate copied on the state's own device (0 when updated in place).
struct StatePlacement {
  std::string name;
  EtDevice device{EtDeviceType::CPU, 0};
  // What a call does to it, in the executor's words (its state_updates): "in place", "double-buffered" (the
  // engine writes the other of two buffers, which then is the state) or "copied back" (bytes: its size per call).
  std::string update = "in place";
  size_t bytes = 0;
  EtScalarType dtype = EtScalarType::Float;  // as stored (blob STATE): the engine's precision for a float state
  std::vector<std::string> methods;          // the program's methods that bind this same buffer; empty: this one only
};

struct PlacementPlan {
  EtDevice execution_device{EtDeviceType::CPU, 0};
  std::string executor;         // "tensorrt" or "pytorch"
  std::string executor_detail;  // how it runs: "C++ graph interpreter", "Python graph code (why)", ...
  std::string executor_reason;  // why not TensorRT (and why not the recorded GPU); empty when TensorRT runs
  std::string engine_origin;    // "" the blob's own engine; else "built here for sm90 with ... in 14.2 s; cached"
  std::vector<TensorPlacement> inputs;
  std::vector<TensorPlacement> outputs;
  std::vector<StatePlacement> states;
  // Filled in after the call: time inside the executor, and the delegate's own time around it (plan,
  // bind, write back, locks and GIL); 0 for a call that was rejected.
  uint64_t executor_ns = 0;
  uint64_t delegate_ns = 0;

  size_t bytes_copied() const;  // inputs and outputs: what crossed the delegate boundary
  size_t state_bytes() const;   // state copied back on its device (not part of bytes_copied)
  bool ok() const;              // nothing rejected
  // Every rejection, one per line, each argument named by `label` (role, index) or as "input 0".
  std::string rejection_message(const std::function<std::string(IoRole, size_t)>& label = {}) const;
  std::string repr() const;
};

// `executor_writes_in_place`: the executor can write into caller-provided output memory (TensorRT).
// `executor_reads_in_place` false: it reads its inputs only at fixed addresses (a replayed CUDA graph), so each
// is copied into a reused buffer; `fixed_addresses` says why, for inputs and for results it copies.
// Throws PlacementCountError when the argument counts do not match the I/O table.
PlacementPlan plan_placement(const std::vector<ArgumentInfo>& inputs, const std::vector<ArgumentInfo>& outputs,
                             const DelegateBlob& blob, EtDevice execution_device, const std::string& executor,
                             bool executor_writes_in_place, bool executor_reads_in_place = true,
                             const std::string& fixed_addresses = "");

struct PlacementCountError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

std::string device_str(EtDevice device);

}  // namespace et_tensorrt
