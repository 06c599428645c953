#include "delegate_handle.h"

#include <executorch/runtime/core/exec_aten/util/tensor_util.h>

#include <c10/util/SmallVector.h>

#include <chrono>

#include "../aten_util/device_translation.h"
#include "../aten_util/dtype_translation.h"
#include "../aten_util/torch_view.h"
#include "blob_to_python.h"
#include "plan_recorder.h"
#include "pointer_residence.h"

namespace py = pybind11;
using executorch::runtime::EValue;

namespace et_tensorrt {
namespace {

thread_local std::string t_last_error;

// "Type: message" of a Python exception, without pybind11's traceback: the one line a user reads.
std::runtime_error python_error(const py::error_already_set& e) {
  std::string type = "Exception", what;
  try {
    type = py::str(e.type().attr("__name__")).cast<std::string>();
    what = py::str(e.value()).cast<std::string>();
  } catch (...) {
    what = e.what();
  }
  return std::runtime_error(type + ": " + what);
}

// Releases the section views handed to the executor (see the constructor).
void release_views(const py::dict& parsed) {
  for (const auto& item : parsed) {
    if (PyMemoryView_Check(item.second.ptr())) {
      item.second.attr("release")();  // BufferError if the executor still exports it: a bug, reported
    }
  }
}

} // namespace

ArgumentInfo checked_argument_info(const executorch::aten::Tensor& t, size_t arg, size_t n_in) {
  ArgumentInfo v = argument_info(t);
  const PointerResidence where = pointer_residence(v.data);
  const std::string what = arg < n_in ? "input " + std::to_string(arg) : "output " + std::to_string(arg - n_in);
  const bool labelled_cuda = v.device.type() == EtDeviceType::CUDA;
  if (where.kind == PointerResidence::Host && labelled_cuda) {
    throw PlacementRejected(what + ": labelled " + device_str(v.device) +
                            " but its pointer is host memory (the CUDA driver says so); describe the tensor "
                            "where it really lives");
  }
  if (where.kind == PointerResidence::Device && (!labelled_cuda || v.device.index() != where.device_index)) {
    v.label_note = "labelled " + device_str(v.device) + ", pointer is cuda:" + std::to_string(where.device_index) + "; ";
    v.device = EtDevice(EtDeviceType::CUDA, static_cast<executorch::runtime::etensor::DeviceIndex>(where.device_index));
  }
  return v;
}

namespace {
// The processed buffer, moved out of ExecuTorch's BackendDelegate (its own segment_ is then empty, and freeing
// it there is a no-op): munmap/free happens when the last owner lets go.
std::shared_ptr<const void> own(executorch::runtime::FreeableBuffer&& processed) {
  return std::make_shared<executorch::runtime::FreeableBuffer>(std::move(processed));
}
} // namespace

DelegateHandle::DelegateHandle(executorch::runtime::FreeableBuffer&& processed)
    : buffer_(own(std::move(processed))),
      blob_data_(static_cast<const uint8_t*>(static_cast<const executorch::runtime::FreeableBuffer*>(buffer_.get())->data())),
      blob_size_(static_cast<const executorch::runtime::FreeableBuffer*>(buffer_.get())->size()),
      blob_(parse_delegate_blob(blob_data_, blob_size_)) {
  py::gil_scoped_acquire gil;
  py::object create = py::module_::import("et_tensorrt.runtime.executors").attr("create_executor");
  // The executor gets the blob already parsed: its sections as memoryviews of the buffer, released once it is
  // built (a view it kept anyway would then raise rather than read freed memory), and its WEIGHTS as tensors
  // viewing the buffer in place (the PyTorch executor's weights: no copy), each holding buffer_ alive.
  py::dict parsed = blob_to_python(
      blob_, blob_data_,
      py::memoryview::from_memory(blob_data_, static_cast<py::ssize_t>(blob_size_)), buffer_);
  try {
    executor_ = create(parsed);
  } catch (const py::error_already_set& e) {
    release_views(parsed);
    throw python_error(e);
  } catch (...) {
    release_views(parsed);
    throw;
  }
  release_views(parsed);
  execution_device_ = torch_to_executorch_device(executor_.attr("device").cast<c10::Device>());
  executor_kind_ = executor_.attr("kind").cast<std::string>();
  writes_in_place_ = executor_.attr("writes_in_place").cast<bool>();
  execution_device_torch_ = executorch_to_torch_device(execution_device_);
  run_ = executor_.attr("run");
  if (py::hasattr(executor_, "path")) executor_detail_ = executor_.attr("path").cast<std::string>();
  // The PyTorch executor's C++ graph interpreter, when it has one: then calls need neither Python nor the GIL.
  if (py::hasattr(executor_, "native") && !executor_.attr("native").is_none()) {
    native_ = executor_.attr("native").cast<std::shared_ptr<GraphInterpreter>>();
  }
}

DelegateHandle::~DelegateHandle() {
  if (Py_IsInitialized()) {
    py::gil_scoped_acquire gil;
    run_ = py::object();
    executor_ = py::object();
    input_staging_.clear();
    output_staging_.clear();
  } else {
    run_.release();  // the interpreter is gone: nothing left to decref into
    executor_.release();
  }
}

at::Tensor DelegateHandle::staging(std::vector<at::Tensor>& pool, size_t i, const at::Tensor& like,
                                     c10::Device device) {
  if (pool.size() <= i) pool.resize(i + 1);
  at::Tensor& buf = pool[i];
  if (!buf.defined() || buf.sizes() != like.sizes() || buf.scalar_type() != like.scalar_type() ||
      buf.device() != device) {
    buf = at::empty(like.sizes(), like.options().device(device).memory_format(at::MemoryFormat::Contiguous));
  }
  return buf;
}

void DelegateHandle::execute(executorch::runtime::Span<EValue*> args) {
  const auto start = std::chrono::steady_clock::now();
  // Never wait for the lock while holding the GIL: the thread that holds the lock may need the GIL.
  std::unique_lock<std::mutex> lock(mutex_, std::defer_lock);
  if (Py_IsInitialized() && PyGILState_Check()) {
    py::gil_scoped_release no_gil;
    lock.lock();
  } else {
    lock.lock();
  }
  const std::shared_ptr<PlacementPlan> plan = plan_call(args);
  const std::vector<at::Tensor> inputs = bind_inputs(*plan, args);
  const std::vector<at::Tensor> targets = bind_outputs(*plan, args);
  const auto run_start = std::chrono::steady_clock::now();
  const std::vector<at::Tensor> results = native_ ? native_->run(inputs) : run_python(inputs, targets);
  const auto executor_time = std::chrono::steady_clock::now() - run_start;
  write_back(*plan, results, args);
  // The plan was handed to the caller's recorder before the run; timings complete it (same object).
  plan->executor_ns = static_cast<uint64_t>(std::chrono::nanoseconds(executor_time).count());
  plan->delegate_ns =
      static_cast<uint64_t>(std::chrono::nanoseconds(std::chrono::steady_clock::now() - start - executor_time).count());
}

std::shared_ptr<PlacementPlan> DelegateHandle::plan_call(executorch::runtime::Span<EValue*> args) {
  const size_t n_in = blob_.inputs.size();
  const size_t n_out = blob_.outputs.size();
  if (args.size() != n_in + n_out) {
    throw PlacementCountError("the delegate received " + std::to_string(args.size()) + " arguments; its engine has " +
                              std::to_string(n_in) + " inputs and " + std::to_string(n_out) + " outputs");
  }
  std::vector<ArgumentInfo> in_args, out_args;
  in_args.reserve(n_in);
  out_args.reserve(n_out);
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i]->isTensor()) {
      throw PlacementCountError("delegate argument " + std::to_string(i) + " is not a tensor");
    }
    (i < n_in ? in_args : out_args).push_back(checked_argument_info(args[i]->toTensor(), i, n_in));
  }
  auto plan = std::make_shared<PlacementPlan>(
      plan_placement(in_args, out_args, blob_, execution_device_, executor_kind_, writes_in_place_));
  plan->executor_detail = executor_detail_;
  record_plan(plan);  // to the Runner call (or record_plans() block) running on this thread, if any
  if (!plan->ok()) {
    throw PlacementRejected(plan->rejection_message());
  }
  return plan;
}

std::vector<at::Tensor> DelegateHandle::bind_inputs(const PlacementPlan& plan,
                                                    executorch::runtime::Span<EValue*> args) {
  std::vector<at::Tensor> inputs;
  inputs.reserve(plan.inputs.size());
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    at::Tensor caller = torch_view(args[i]->toTensor());
    if (plan.inputs[i].action == Placement::Share) {
      inputs.push_back(std::move(caller));
    } else {  // every copy kind: into a reused, contiguous staging buffer on the execution device
      inputs.push_back(staging(input_staging_, i, caller, execution_device_torch_).copy_(caller));
    }
  }
  return inputs;
}

std::vector<at::Tensor> DelegateHandle::bind_outputs(const PlacementPlan& plan,
                                                     executorch::runtime::Span<EValue*> args) {
  // Shared outputs: the executor writes straight into the caller's memory; the others (undefined) it allocates.
  const size_t n_in = plan.inputs.size();
  std::vector<at::Tensor> targets(plan.outputs.size());
  for (size_t i = 0; i < plan.outputs.size(); ++i) {
    if (plan.outputs[i].action == Placement::Share) targets[i] = torch_view(args[n_in + i]->toTensor());
  }
  return targets;
}

std::vector<at::Tensor> DelegateHandle::run_python(const std::vector<at::Tensor>& inputs,
                                                   const std::vector<at::Tensor>& targets) {
  py::gil_scoped_acquire gil;
  py::tuple py_inputs(inputs.size()), py_targets(targets.size());
  for (size_t i = 0; i < inputs.size(); ++i) py_inputs[i] = py::cast(inputs[i]);
  for (size_t i = 0; i < targets.size(); ++i) py_targets[i] = targets[i].defined() ? py::cast(targets[i]) : py::none();
  py::sequence results;
  try {
    results = run_(py_inputs, py_targets).cast<py::sequence>();
  } catch (const py::error_already_set& e) {
    throw python_error(e);
  }
  std::vector<at::Tensor> out;
  out.reserve(results.size());
  for (const py::handle r : results) out.push_back(r.cast<at::Tensor>());
  return out;
}

void DelegateHandle::write_back(const PlacementPlan& plan, const std::vector<at::Tensor>& results,
                                executorch::runtime::Span<EValue*> args) {
  const size_t n_in = plan.inputs.size();
  const size_t n_out = plan.outputs.size();
  if (results.size() != n_out) {
    throw std::runtime_error("executor returned " + std::to_string(results.size()) + " results for " +
                             std::to_string(n_out) + " outputs");
  }
  for (size_t i = 0; i < n_out; ++i) {
    if (plan.outputs[i].action == Placement::Share) {
      continue;  // the executor wrote into the caller's memory
    }
    const at::Tensor& result = results[i];
    executorch::aten::Tensor& out = args[n_in + i]->toTensor();
    c10::SmallVector<executorch::aten::SizesType, 8> sizes(result.sizes().begin(), result.sizes().end());
    if (executorch::runtime::resize_tensor(out, {sizes.data(), sizes.size()}) != executorch::runtime::Error::Ok) {
      throw std::runtime_error("output " + std::to_string(i) + " cannot be resized to the executor's result shape");
    }
    torch_view(out).copy_(result);  // d2h / d2d / layout: torch picks the copy kind from the two devices
  }
}

std::string last_delegate_error() { return t_last_error; }
void set_last_delegate_error(std::string message) { t_last_error = std::move(message); }

} // namespace et_tensorrt
