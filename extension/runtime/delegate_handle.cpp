#include "delegate_handle.h"

#include <executorch/runtime/core/exec_aten/util/tensor_util.h>

#include "../aten_util/device_translation.h"
#include "../aten_util/dtype_translation.h"
#include "../aten_util/torch_view.h"
#include "pointer_residence.h"

namespace py = pybind11;
using executorch::runtime::EValue;

namespace et_tensorrt {
namespace {

std::mutex g_last_mutex;
std::shared_ptr<const PlacementPlan> g_last_plan;
thread_local std::string t_last_error;

// The descriptor's label, cross-checked against the CUDA driver where CUDA is usable: a host pointer
// labelled cuda is an error (reading it on the device would fault); a device pointer labelled cpu is
// taken at the driver's word, with a note in the plan.
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

} // namespace

DelegateHandle::DelegateHandle(const void* blob, size_t size)
    : bytes_(static_cast<const uint8_t*>(blob), static_cast<const uint8_t*>(blob) + size),
      blob_(parse_delegate_blob(bytes_.data(), bytes_.size())) {
  py::gil_scoped_acquire gil;
  py::object create = py::module_::import("et_tensorrt.runtime.executors").attr("create_executor");
  executor_ = create(py::memoryview::from_memory(bytes_.data(), static_cast<py::ssize_t>(bytes_.size())));
  execution_device_ = torch_to_executorch_device(executor_.attr("device").cast<c10::Device>());
  executor_kind_ = executor_.attr("kind").cast<std::string>();
  writes_in_place_ = executor_.attr("writes_in_place").cast<bool>();
}

DelegateHandle::~DelegateHandle() {
  if (Py_IsInitialized()) {
    py::gil_scoped_acquire gil;
    executor_ = py::object();
    input_staging_.clear();
    output_staging_.clear();
  } else {
    executor_.release();  // the interpreter is gone: nothing left to decref into
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
  // Never wait for the lock while holding the GIL: the thread that holds the lock may need the GIL.
  std::unique_lock<std::mutex> lock(mutex_, std::defer_lock);
  if (Py_IsInitialized() && PyGILState_Check()) {
    py::gil_scoped_release no_gil;
    lock.lock();
  } else {
    lock.lock();
  }
  const size_t n_in = blob_.inputs.size();
  const size_t n_out = blob_.outputs.size();
  if (args.size() != n_in + n_out) {
    throw PlacementCountError("the delegate received " + std::to_string(args.size()) + " arguments; its engine has " +
                              std::to_string(n_in) + " inputs and " + std::to_string(n_out) + " outputs");
  }
  std::vector<ArgumentInfo> in_args, out_args;
  for (size_t i = 0; i < args.size(); ++i) {
    if (i < n_in && args[i]->isInt()) {  // a size the partition reads (SymInt): checked by the plan
      in_args.push_back(size_argument_info(args[i]->toInt()));
      continue;
    }
    if (!args[i]->isTensor()) {
      throw PlacementCountError("delegate argument " + std::to_string(i) + " is neither a tensor nor a size");
    }
    (i < n_in ? in_args : out_args).push_back(checked_argument_info(args[i]->toTensor(), i, n_in));
  }
  auto plan = std::make_shared<PlacementPlan>(
      plan_placement(in_args, out_args, blob_, execution_device_, executor_kind_, writes_in_place_));
  {
    std::lock_guard<std::mutex> last(g_last_mutex);
    g_last_plan = plan;
  }
  last_plan_ = plan;
  if (!plan->ok()) {
    throw PlacementRejected(plan->rejection_message());
  }

  const c10::Device exec = executorch_to_torch_device(execution_device_);
  py::gil_scoped_acquire gil;
  py::list inputs(n_in), outputs(n_out);
  for (size_t i = 0; i < n_in; ++i) {
    if (plan->inputs[i].action == Placement::Value) {  // sizes go to the executor as Python ints
      inputs[i] = py::int_(args[i]->toInt());
      continue;
    }
    at::Tensor caller = torch_view(args[i]->toTensor());
    if (plan->inputs[i].action == Placement::Share) {
      inputs[i] = py::cast(caller);
    } else {  // every copy kind: into a reused, contiguous staging buffer on the execution device
      inputs[i] = py::cast(staging(input_staging_, i, caller, exec).copy_(caller));
    }
  }
  for (size_t i = 0; i < n_out; ++i) {
    outputs[i] = plan->outputs[i].action == Placement::Share ? py::cast(torch_view(args[n_in + i]->toTensor()))
                                                             : py::none();
  }
  py::list results = executor_.attr("run")(inputs, outputs);
  if (results.size() != n_out) {
    throw std::runtime_error("executor returned " + std::to_string(results.size()) + " results for " +
                             std::to_string(n_out) + " outputs");
  }
  for (size_t i = 0; i < n_out; ++i) {
    at::Tensor result = results[i].cast<at::Tensor>();
    executorch::aten::Tensor& out = args[n_in + i]->toTensor();
    std::vector<executorch::aten::SizesType> sizes(result.sizes().begin(), result.sizes().end());
    // A dynamic output: ExecuTorch planned its upper bound; it takes the shape of this call's result.
    if (executorch::runtime::resize_tensor(out, {sizes.data(), sizes.size()}) != executorch::runtime::Error::Ok) {
      throw std::runtime_error("output " + std::to_string(i) + " cannot be resized to the executor's result shape");
    }
    if (plan->outputs[i].action == Placement::Share) {
      continue;  // the executor wrote into the caller's memory
    }
    torch_view(out).copy_(result);  // d2h / d2d / layout: torch picks the copy kind from the two devices
  }
}

std::shared_ptr<const PlacementPlan> DelegateHandle::last_plan() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return last_plan_;
}

std::shared_ptr<const PlacementPlan> last_placement_plan() {
  std::lock_guard<std::mutex> last(g_last_mutex);
  return g_last_plan;
}

std::string last_delegate_error() { return t_last_error; }
void set_last_delegate_error(std::string message) { t_last_error = std::move(message); }

} // namespace et_tensorrt
