#include "delegate_events.h"

#include <executorch/runtime/core/event_tracer_hooks_delegate.h>
#include <executorch/runtime/platform/platform.h>

namespace et_tensorrt {

DelegatePhase::DelegatePhase(executorch::runtime::EventTracer* tracer) : tracer_(tracer) {
  if (tracer_) start_ = et_pal_current_ticks();
}

void DelegatePhase::end(const char* name, const std::string& metadata) {
  if (!tracer_) return;
  const et_timestamp_t now = et_pal_current_ticks();
  // A named event: its debug id is unset (ExecuTorch takes a name or an int, not both).
  executorch::runtime::event_tracer_log_profiling_delegate(
      tracer_, name, static_cast<executorch::runtime::DebugHandle>(executorch::runtime::kUnsetDelegateDebugIntId),
      start_, now, metadata.data(), metadata.size());
  start_ = now;
}

std::string executor_event_name(const std::string& executor) {
  return executor == "tensorrt" ? executor : executor + " fallback";
}

std::string init_event_name(int partition, int partitions) {
  if (partitions <= 1) return kEventInit;
  return std::string(kEventInit) + " " + std::to_string(partition) + "/" + std::to_string(partitions);
}

}  // namespace et_tensorrt
