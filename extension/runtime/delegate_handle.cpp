#include "delegate_handle.h"

#include <executorch/runtime/core/exec_aten/util/tensor_util.h>
#include <executorch/runtime/platform/platform.h>

#include <c10/util/SmallVector.h>
#include <pybind11/stl.h>

#include <chrono>

#include "../aten_util/device_translation.h"
#include "../aten_util/dtype_translation.h"
#include "../aten_util/torch_view.h"
#include "argument_names.h"
#include "delegate_events.h"
#include "executor_choice.h"
#include "input_guards.h"
#include "plan_recorder.h"
#include "pointer_residence.h"
#include "program_scope.h"
#include "python_error.h"
#include "state_guard.h"

namespace py = pybind11;
using executorch::runtime::EValue;

namespace et_tensorrt {
namespace {

thread_local std::string t_last_error;

}  // namespace

ArgumentInfo checked_argument_info(const executorch::aten::Tensor& t, size_t arg, size_t n_in, const EValue* value) {
  ArgumentInfo v = argument_info(t);
  const PointerResidence where = pointer_residence(v.data);
  const bool labelled_cuda = v.device.type() == EtDeviceType::CUDA;
  if (where.kind == PointerResidence::Host && labelled_cuda) {
    const std::string what = arg < n_in ? argument_label(value, arg) : argument_label(value, arg - n_in, true);
    throw PlacementRejected(what + ": labelled " + device_str(v.device) +
                            " but its pointer is host memory (the CUDA driver says so); describe the tensor "
                            "where it really lives");
  }
  if (where.kind == PointerResidence::Device && (!labelled_cuda || v.device.index() != where.device_index)) {
    v.label_note =
        "labelled " + device_str(v.device) + ", pointer is cuda:" + std::to_string(where.device_index) + "; ";
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
}  // namespace

DelegateHandle::DelegateHandle(executorch::runtime::FreeableBuffer&& processed,
                               const executorch::runtime::NamedDataMap* named_data_map, const char* method_name)
    : buffer_(own(std::move(processed))),
      blob_data_(
          static_cast<const uint8_t*>(static_cast<const executorch::runtime::FreeableBuffer*>(buffer_.get())->data())),
      blob_size_(static_cast<const executorch::runtime::FreeableBuffer*>(buffer_.get())->size()),
      blob_(parse_delegate_blob(blob_data_, blob_size_)),
      named_(resolve_named_data(blob_, named_data_map)) {
  py::gil_scoped_acquire gil;
  try {
    executor_ = create_executor(blob_, blob_data_, blob_size_, cuda_device_count(), choice_, buffer_, &named_,
                                program_scope(named_data_map, method_name));
  } catch (const py::error_already_set& e) {
    throw python_error(e);  // ExecuTorch's init failure carries one line, not a traceback
  }
  execution_device_ = choice_.device;
  writes_in_place_ = executor_.attr("writes_in_place").cast<bool>();
  if (py::hasattr(executor_, "fixed_addresses")) {  // a replayed CUDA graph: reads and writes where it was captured
    fixed_addresses_ = executor_.attr("fixed_addresses").cast<std::string>();
    reads_in_place_ = fixed_addresses_.empty();
  }
  execution_device_torch_ = executorch_to_torch_device(execution_device_);
  run_ = executor_.attr("run");
  // Only a TensorRT executor loaded with layer profiling on has it (runtime/layer_profile.py).
  if (py::hasattr(executor_, "take_layer_times")) take_layer_times_ = executor_.attr("take_layer_times");
  if (py::hasattr(executor_, "path")) executor_detail_ = executor_.attr("path").cast<std::string>();
  // The state the executor keeps across calls, and how it updates each (its `state_updates`: name -> "in place",
  // "double-buffered" or "copied back"); a copied-back state costs its size on the execution device per call.
  const py::dict updates =
      py::hasattr(executor_, "state_updates") ? executor_.attr("state_updates").cast<py::dict>() : py::dict();
  for (const StateEntry& e : blob_.states) {
    const std::string update =
        updates.contains(e.name.c_str()) ? updates[e.name.c_str()].cast<std::string>() : std::string("in place");
    const size_t bytes = update == "copied back" ? static_cast<size_t>(e.nbytes) : 0;
    states_.push_back({e.name, execution_device_, update, bytes, e.dtype, e.methods});
  }
  // The PyTorch executor's C++ graph interpreter, when it has one: then calls need neither Python nor the GIL.
  if (py::hasattr(executor_, "native") && !executor_.attr("native").is_none()) {
    native_ = executor_.attr("native").cast<std::shared_ptr<GraphInterpreter>>();
  }
}

DelegateHandle::~DelegateHandle() {
  if (Py_IsInitialized()) {
    py::gil_scoped_acquire gil;
    // The executor lets go of the program's shared states now, not whenever Python collects it: the last
    // method's delegate to go frees them, so a program loaded again starts from their initial contents.
    if (executor_ && py::hasattr(executor_, "close")) {
      try {
        executor_.attr("close")();
      } catch (const py::error_already_set&) {
      }
    }
    run_ = py::object();
    take_layer_times_ = py::object();
    executor_ = py::object();
    input_staging_.clear();
    output_staging_.clear();
  } else {
    run_.release();  // the interpreter is gone: nothing left to decref into
    take_layer_times_.release();
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

namespace {
size_t copied_bytes(const std::vector<TensorPlacement>& entries) {
  size_t n = 0;
  for (const TensorPlacement& e : entries) n += e.bytes;
  return n;
}
}  // namespace

void DelegateHandle::execute(executorch::runtime::Span<EValue*> args, executorch::runtime::EventTracer* tracer) {
  const auto start = std::chrono::steady_clock::now();
  DelegatePhase phase(tracer);  // nothing timed or logged without a tracer
  // Never wait for the lock while holding the GIL: the thread that holds the lock may need the GIL. Given up on every
  // call, also uncontended: Python threads of the caller's (the generate commands' stdout pump) run meanwhile while
  // ExecuTorch's own runners hold the GIL through a whole generation.
  std::unique_lock<std::mutex> lock(mutex_, std::defer_lock);
  if (Py_IsInitialized() && PyGILState_Check()) {
    py::gil_scoped_release no_gil;
    lock.lock();
  } else {
    lock.lock();
  }
  const std::shared_ptr<PlacementPlan> plan = plan_call(args);
  check_input_guards(blob_, args);     // what the exported program requires of its inputs together
  check_write_positions(blob_, args);  // before anything writes into the state
  const std::vector<c10::IValue> inputs = bind_inputs(*plan, args);
  const std::vector<at::Tensor> targets = bind_outputs(*plan, args);
  if (phase.active()) phase.end(kEventInputs, "bytes=" + std::to_string(copied_bytes(plan->inputs)));
  const et_timestamp_t run_ticks = take_layer_times_ && phase.active() ? et_pal_current_ticks() : 0;
  const auto run_start = std::chrono::steady_clock::now();
  const std::vector<at::Tensor> results = native_ ? native_->run(inputs) : run_python(inputs, targets);
  const auto executor_time = std::chrono::steady_clock::now() - run_start;
  if (run_ticks) log_layer_events(tracer, run_ticks, layer_times());
  if (phase.active()) {  // the state an executor copies back is part of its run
    phase.end(executor_event_name(choice_.executor),
              "executor=" + choice_.executor + (executor_detail_.empty() ? "" : " (" + executor_detail_ + ")") +
                  "; state_bytes=" + std::to_string(plan->state_bytes()) +
                  (choice_.reason.empty() ? "" : "; reason=" + choice_.reason));
  }
  write_back(*plan, results, args);
  if (phase.active()) phase.end(kEventOutputs, "bytes=" + std::to_string(copied_bytes(plan->outputs)));
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
    if (i < n_in && args[i]->isInt()) {  // a size the partition reads (SymInt): checked by the plan
      in_args.push_back(size_argument_info(args[i]->toInt()));
      continue;
    }
    if (!args[i]->isTensor()) {
      throw PlacementCountError("delegate argument " + std::to_string(i) + " is neither a tensor nor a size");
    }
    (i < n_in ? in_args : out_args).push_back(checked_argument_info(args[i]->toTensor(), i, n_in, args[i]));
  }
  // A call with the same arguments in the same memory as the last one (every step of a steady loop) has the last
  // one's plan: reused where nobody holds it any more (a Runner lets its last call's plan go when the next starts),
  // so such a call builds none of its words; a plan someone kept is never changed.
  std::shared_ptr<PlacementPlan> plan;
  if (reusable_plan_ && reusable_plan_.use_count() == 1 && in_args == reusable_inputs_ &&
      out_args == reusable_outputs_) {
    plan = reusable_plan_;
    plan->executor_ns = plan->delegate_ns = 0;
  } else {
    plan = std::make_shared<PlacementPlan>(plan_placement(in_args, out_args, blob_, execution_device_, choice_.executor,
                                                          writes_in_place_, reads_in_place_, fixed_addresses_));
    plan->executor_detail = executor_detail_;
    plan->executor_reason = choice_.reason;
    plan->engine_origin = choice_.engine_origin;
    plan->states = states_;
    reusable_plan_ = plan;
    reusable_inputs_ = std::move(in_args);
    reusable_outputs_ = std::move(out_args);
  }
  record_plan(plan);  // to the Runner call (or record_plans() block) running on this thread, if any
  if (!plan->ok()) {
    throw PlacementRejected(plan->rejection_message([&](IoRole role, size_t index) {
      const bool output = role == IoRole::Output;
      return argument_label(args[output ? n_in + index : index], index, output);
    }));
  }
  return plan;
}

std::vector<c10::IValue> DelegateHandle::bind_inputs(const PlacementPlan& plan,
                                                     executorch::runtime::Span<EValue*> args) {
  std::vector<c10::IValue> inputs;
  inputs.reserve(plan.inputs.size());
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    if (plan.inputs[i].action == Placement::Value) {  // a size: the executor takes the int
      inputs.emplace_back(args[i]->toInt());
      continue;
    }
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

std::vector<at::Tensor> DelegateHandle::run_python(const std::vector<c10::IValue>& inputs,
                                                   const std::vector<at::Tensor>& targets) {
  py::gil_scoped_acquire gil;
  py::tuple py_inputs(inputs.size()), py_targets(targets.size());
  for (size_t i = 0; i < inputs.size(); ++i) {  // sizes go to the executor as Python ints
    py_inputs[i] = inputs[i].isInt() ? py::object(py::int_(inputs[i].toInt())) : py::cast(inputs[i].toTensor());
  }
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

LayerTimes DelegateHandle::layer_times() {
  py::gil_scoped_acquire gil;
  try {
    return take_layer_times_().cast<LayerTimes>();
  } catch (const py::error_already_set& e) {
    throw python_error(e);
  }
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
    const at::Tensor& result = results[i];
    executorch::aten::Tensor& out = args[n_in + i]->toTensor();
    c10::SmallVector<executorch::aten::SizesType, 8> sizes(result.sizes().begin(), result.sizes().end());
    // A dynamic output: ExecuTorch planned its upper bound; it takes the shape of this call's result.
    if (executorch::runtime::resize_tensor(out, {sizes.data(), sizes.size()}) != executorch::runtime::Error::Ok) {
      throw std::runtime_error("output " + std::to_string(i) + " cannot be resized to the executor's result shape");
    }
    if (plan.outputs[i].action == Placement::Share) {
      continue;  // the executor wrote into the caller's memory
    }
    copy_into(out, result);  // d2h / d2d / layout: torch picks the copy kind from the two devices
  }
}

std::string last_delegate_error() { return t_last_error; }
void set_last_delegate_error(std::string message) { t_last_error = std::move(message); }

}  // namespace et_tensorrt
