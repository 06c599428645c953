// Which executor runs a partition, on which device, and why: decided once, at delegate init, here.
//
// TensorRT where it can run; otherwise the partition's embedded program with PyTorch. TensorRT is tried when the
// blob has an engine or a RECIPE (a builder on this machine may build the engine for its GPU: the Python side,
// et_tensorrt.runtime.device_build, decides whether the ahead-of-time engine fits and builds or loads it). The steps
// that need no engine (the blob's execution device, the CUDA devices this process has, the ET_TENSORRT_FALLBACK policy,
// whether the blob carries a program to fall back to) are decided in C++; only the engine's deserialization
// is Python's (TensorRT's Python API, et_tensorrt.runtime.executors.tensorrt_executor). The choice is copied
// into every placement plan, so a partition that runs on the host instead of its recorded GPU says so.
#pragma once

#include <torch/python.h>

#include <string>

#include "../format/blob_reader.h"
#include "named_data.h"
#include "program_scope.h"

namespace et_tensorrt {

enum class FallbackPolicy { PyTorch, Error };

// ET_TENSORRT_FALLBACK: "pytorch" (unset or empty) or "error", case-insensitive; std::invalid_argument
// naming the value otherwise.
FallbackPolicy fallback_policy();
const char* fallback_policy_name(FallbackPolicy policy);

struct ExecutorChoice {
  std::string executor;                            // "tensorrt" or "pytorch"
  EtDevice device{EtDeviceType::CPU, 0};           // where it runs
  EtDevice recorded_device{EtDeviceType::CPU, 0};  // the blob's execution device (differs: no CUDA here)
  std::string reason;                              // why not TensorRT; empty when TensorRT runs
  // Where the TensorRT engine came from: "" for the blob's own (ahead-of-time) engine, else the executor's
  // `origin` ("built here for sm90 with TensorRT 11.4 in 14.2 s; cached", "from the engine cache: ...").
  std::string engine_origin;
};

// CUDA devices this process can use (0 with a CPU-only torch or no driver).
int cuda_device_count();

// The executor for `blob` (whose spans point into `data`, size `size`), built by
// et_tensorrt.runtime.executors, and the choice it embodies. Needs the GIL. Throws std::runtime_error when no
// executor may run: an engine-only blob whose engine cannot run here, or the policy refuses the fallback;
// the executors module's own errors propagate as Python errors (py::error_already_set).
// `cuda_devices`: the CUDA device count to decide with (cuda_device_count() unless a test fakes a GPU).
// `owner` (the delegate's, owning `data`): the executor's weights are views of `data` that keep it alive
// (blob_to_python's "weight_views"); without one, they are copied out of `data`. `named`: the blob's named data,
// resolved by the delegate (the engine and weights that are not in `data`).
// `scope`: the loaded program and method (program_scope.h) under which the executor binds the states shared by
// the program's methods.
pybind11::object create_executor(const DelegateBlob& blob, const uint8_t* data, size_t size, int cuda_devices,
                                 ExecutorChoice& choice, std::shared_ptr<const void> owner = nullptr,
                                 const NamedData* named = nullptr, const ProgramScope& scope = {});

}  // namespace et_tensorrt
