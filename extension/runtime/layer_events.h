// Per-layer engine time in the ETDump (issue 52 item 3): a TensorRT executor loaded with layer profiling on
// (et_tensorrt/runtime/layer_profile.py: TensorRT's IProfiler) hands over each layer's time after its run, and the
// delegate logs one event per layer, named by the layer, inside its executor event. TensorRT reports durations, not
// start times: the layers are laid out one after another from the run's start.
#pragma once

#include <executorch/runtime/core/event_tracer.h>
#include <executorch/runtime/platform/types.h>

#include <string>
#include <utility>
#include <vector>

namespace et_tensorrt {

// (layer name, milliseconds), in the order the engine ran them.
using LayerTimes = std::vector<std::pair<std::string, double>>;

// Logs each layer as a delegate event starting at `run_start` (ticks), the next starting where the last ended;
// metadata "layer=I/N". Nothing without a tracer.
void log_layer_events(executorch::runtime::EventTracer* tracer, et_timestamp_t run_start, const LayerTimes& layers);

}  // namespace et_tensorrt
