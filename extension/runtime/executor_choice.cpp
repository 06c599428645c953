#include "executor_choice.h"

#include <ATen/detail/CUDAHooksInterface.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <stdexcept>

#include "../aten_util/device_translation.h"
#include "blob_to_python.h"
#include "placement_plan.h"

namespace py = pybind11;

namespace et_tensorrt {
namespace {

constexpr const char* kFallbackEnv = "ET_TENSORRT_FALLBACK";

// Releases the section views handed to the executor: it copies what it keeps, so a view it kept anyway
// raises rather than reads freed memory after the handle is gone.
void release_views(const py::dict& parsed) {
  for (const auto& item : parsed) {
    if (PyMemoryView_Check(item.second.ptr())) {
      item.second.attr("release")();  // BufferError if the executor still exports it: a bug, reported
    }
  }
}

bool has_program(const DelegateBlob& blob) { return blob.graph.size > 0 || blob.program.size > 0; }

// Why TensorRT is not even tried, or "" when it may be (the blob has an engine, in its ENGINE section or in named
// data, or a recipe to build one, for a device this process has).
std::string why_not_tensorrt(const DelegateBlob& blob, const NamedData* named, int cuda_devices) {
  const size_t engine_size = named != nullptr && named->engine.present ? named->engine.size : blob.engine.size;
  if (engine_size == 0 && !blob.recipe_section.present) {
    return "the blob carries no engine (its build was left to PyTorch at lowering time)";
  }
  if (blob.execution_device.type() != EtDeviceType::CUDA) return "the partition's execution device is the host";
  if (cuda_devices == 0) return "no CUDA device is available";
  if (blob.execution_device.index() >= cuda_devices) {
    return "the engine's device " + device_str(blob.execution_device) + " is not present (this process has " +
           std::to_string(cuda_devices) + " CUDA device(s))";
  }
  return "";
}

}  // namespace

FallbackPolicy fallback_policy() {
  const char* raw = std::getenv(kFallbackEnv);
  std::string value = raw == nullptr ? "" : raw;
  std::string lowered;
  for (char c : value) {
    if (!std::isspace(static_cast<unsigned char>(c)))
      lowered += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (lowered.empty() || lowered == "pytorch") return FallbackPolicy::PyTorch;
  if (lowered == "error") return FallbackPolicy::Error;
  throw std::invalid_argument(std::string(kFallbackEnv) + "='" + value + "' is not one of pytorch, error");
}

const char* fallback_policy_name(FallbackPolicy policy) {
  return policy == FallbackPolicy::Error ? "error" : "pytorch";
}

int cuda_device_count() {
  return at::detail::getCUDAHooks().hasCUDA() ? static_cast<int>(at::detail::getCUDAHooks().deviceCount()) : 0;
}

py::object create_executor(const DelegateBlob& blob, const uint8_t* data, size_t size, int cuda_devices,
                           ExecutorChoice& choice, std::shared_ptr<const void> owner, const NamedData* named,
                           const ProgramScope& scope) {
  const FallbackPolicy policy = fallback_policy();  // a bad value is refused before anything is loaded
  py::module_ executors = py::module_::import("et_tensorrt.runtime.executors");
  choice.recorded_device = blob.execution_device;
  choice.device = blob.execution_device;
  choice.reason = why_not_tensorrt(blob, named, cuda_devices);
  // The executor gets the blob already parsed: its sections as views of `data`, released once it is built
  // (a view it kept anyway would then raise rather than read freed memory), and with an `owner` its WEIGHTS as
  // tensors viewing `data` in place (the PyTorch executor's weights: no copy), each holding `owner` alive.
  py::dict parsed = blob_to_python(blob, data, py::memoryview::from_memory(data, static_cast<py::ssize_t>(size)),
                                   std::move(owner), named);
  parsed["program_scope"] = scope.id;  // the executors' key for the states the program's methods share
  parsed["method"] = scope.method;
  py::object executor;
  try {
    if (choice.reason.empty()) {
      py::object result = executors.attr("tensorrt_executor")(parsed, executorch_to_torch_device(choice.device));
      if (py::isinstance<py::str>(result)) {
        choice.reason = result.cast<std::string>();
      } else {
        executor = result;
        choice.executor = "tensorrt";
        if (py::hasattr(executor, "origin")) choice.engine_origin = executor.attr("origin").cast<std::string>();
      }
    }
    if (!executor) {
      if (!has_program(blob)) {
        throw std::runtime_error("TensorRT cannot execute this partition here (" + choice.reason +
                                 ") and its blob carries no program to run instead (an engine-only blob): run it "
                                 "where its engine does");
      }
      if (policy == FallbackPolicy::Error) {
        throw std::runtime_error("TensorRT cannot execute this partition here: " + choice.reason + "; " + kFallbackEnv +
                                 "=error refuses the PyTorch fallback (unset it to allow)");
      }
      // The fallback runs on the recorded GPU when this process has it, else on the host, said in the reason.
      if (choice.device.type() == EtDeviceType::CUDA && choice.device.index() >= cuda_devices) {
        choice.device = EtDevice(EtDeviceType::CPU, 0);
        choice.reason += "; runs on cpu instead of " + device_str(choice.recorded_device);
      }
      executor = executors.attr("pytorch_executor")(parsed, executorch_to_torch_device(choice.device), choice.reason);
      choice.executor = "pytorch";
    }
  } catch (...) {
    release_views(parsed);
    throw;
  }
  release_views(parsed);
  return executor;
}

}  // namespace et_tensorrt
