// The delegate's events in ExecuTorch's ETDump (docs/profiling.md): one profiling event per phase of a call
// (input binding and copies, the executor's run, output copies) and one at init, logged through ExecuTorch's
// delegate hooks (event_tracer_hooks_delegate.h) into the tracer the runtime passes in its contexts. With no
// tracer attached nothing is read, timed or logged: every member is a null check first.
// Names are the delegate's debug identifiers (string ids: ExecuTorch takes a name or an int id, not both); the
// preprocess debug_handle_map is keyed by them (et_tensorrt/backend/debug_handles.py spells them too), mapping each
// to the partition's source nodes for Inspector with an ETRecord.
#pragma once

#include <executorch/runtime/core/event_tracer.h>
#include <executorch/runtime/platform/types.h>

#include <string>

namespace et_tensorrt {

// The phase identifiers (tests/runtime/test_etdump_events.py reads them back through Inspector).
inline constexpr const char* kEventInputs = "input copies";
inline constexpr const char* kEventOutputs = "output copies";
inline constexpr const char* kEventInit = "init";  // engine deserialization, device build, or the fallback's load

// Times one phase: begin() reads the clock only when a tracer is attached; end() logs [begin, now] with the
// metadata (a short "key=value; ..." string, shown by Inspector as the event's raw delegate debug metadata).
class DelegatePhase {
 public:
  explicit DelegatePhase(executorch::runtime::EventTracer* tracer);
  bool active() const { return tracer_ != nullptr; }
  void end(const char* name, const std::string& metadata);
  void end(const std::string& name, const std::string& metadata) { end(name.c_str(), metadata); }

 private:
  executorch::runtime::EventTracer* tracer_;
  et_timestamp_t start_ = 0;
};

// The executor's event name: what ran ("tensorrt", "pytorch fallback").
std::string executor_event_name(const std::string& executor);

// The init event's name: kEventInit, with "i/n" when the method has several partitions. ExecuTorch logs every
// delegate's init outside any instruction, so only the name tells the partitions' init events apart (Inspector
// keeps one event of a name per instruction).
std::string init_event_name(int partition, int partitions);

}  // namespace et_tensorrt
