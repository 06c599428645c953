#include "layer_events.h"

#include <executorch/runtime/core/event_tracer_hooks_delegate.h>
#include <executorch/runtime/platform/platform.h>

namespace et_tensorrt {

void log_layer_events(executorch::runtime::EventTracer* tracer, et_timestamp_t run_start, const LayerTimes& layers) {
  if (!tracer || layers.empty()) return;
  // Ticks per nanosecond from ExecuTorch's own ratio (ticks_to_ns multiplies by numerator / denominator).
  const et_tick_ratio_t ratio = et_pal_ticks_to_ns_multiplier();
  et_timestamp_t start = run_start;
  for (size_t i = 0; i < layers.size(); ++i) {
    const double ns = layers[i].second * 1e6;
    const auto ticks = static_cast<et_timestamp_t>(ns * ratio.denominator / ratio.numerator);
    const std::string metadata = "layer=" + std::to_string(i + 1) + "/" + std::to_string(layers.size());
    executorch::runtime::event_tracer_log_profiling_delegate(
        tracer, layers[i].first.c_str(),
        static_cast<executorch::runtime::DebugHandle>(executorch::runtime::kUnsetDelegateDebugIntId), start,
        start + ticks, metadata.data(), metadata.size());
    start += ticks;
  }
}

}  // namespace et_tensorrt
