// Per-call binding for one delegate (one partition): reads the ExecuTorch descriptors of its
// arguments, computes the placement plan, moves data where the plan says, and runs the executor.
//
// The executor is chosen at init (executor_choice.h, recorded in every plan) and built by
// et_tensorrt.runtime.executors: TensorRT through its Python API where it can run (each call then takes the
// GIL), otherwise the partition's exported program with PyTorch — through a C++ GraphInterpreter (no Python,
// no GIL per call) where the graph allows. This class owns the blob bytes (ExecuTorch's processed buffer
// itself, never a copy), the executor and the staging buffers (reused across calls while shapes stay the same).
#pragma once

#include <torch/python.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/event_tracer.h>
#include <executorch/runtime/core/freeable_buffer.h>
#include <executorch/runtime/core/span.h>

#include "../format/blob_reader.h"
#include "executor_choice.h"
#include "graph_interpreter.h"
#include "layer_events.h"
#include "named_data.h"
#include "placement_plan.h"

namespace et_tensorrt {

class DelegateHandle {
 public:
  // Takes ExecuTorch's processed buffer (no copy: it may be a mapped file region, and is freed when the handle
  // and every weight view made from it are gone). Needs the GIL; throws on a damaged blob or when no executor
  // is allowed to run here.
  // `named_data_map`: the program's named data (BackendInitContext's), where a blob with NAMED_DATA finds its
  // engine and weights (views of ExecuTorch's buffers, held for the handle's life).
  // `method_name`: the method this delegate belongs to; with `named_data_map` it names the loaded program whose
  // methods share the states the blob marks shared (program_scope.h).
  explicit DelegateHandle(executorch::runtime::FreeableBuffer&& processed,
                          const executorch::runtime::NamedDataMap* named_data_map = nullptr,
                          const char* method_name = nullptr);
  ~DelegateHandle();  // closes the Python executor (its hold on shared states) under the GIL, then the buffer

  // Inputs then outputs, as ExecuTorch passes them to BackendInterface::execute: plan, bind, run the
  // executor, write back. Throws PlacementRejected on a rejected argument, or whatever the executor raised.
  // `tracer`: ExecuTorch's event tracer for this call (BackendExecutionContext's), or nullptr: one ETDump event per
  // phase (delegate_events.h) when set, nothing otherwise.
  void execute(executorch::runtime::Span<executorch::runtime::EValue*> args,
               executorch::runtime::EventTracer* tracer = nullptr);

  const DelegateBlob& blob() const { return blob_; }
  const ExecutorChoice& choice() const { return choice_; }  // which executor init chose, and why

 private:
  // Reads every argument's descriptor and decides share/copy/reject; hands the plan to this thread's recorder.
  std::shared_ptr<PlacementPlan> plan_call(executorch::runtime::Span<executorch::runtime::EValue*> args);
  // The executor's inputs: the caller's memory where shared, else reused staging copies on the execution device;
  // a size argument (action Value) is its int.
  std::vector<c10::IValue> bind_inputs(const PlacementPlan& plan,
                                       executorch::runtime::Span<executorch::runtime::EValue*> args);
  // Where the executor may write each output in place (the caller's memory), undefined where it allocates.
  std::vector<at::Tensor> bind_outputs(const PlacementPlan& plan,
                                       executorch::runtime::Span<executorch::runtime::EValue*> args);
  // The Python executor's run, under the GIL (TensorRT's Python API, or a graph the interpreter cannot run).
  std::vector<at::Tensor> run_python(const std::vector<c10::IValue>& inputs, const std::vector<at::Tensor>& targets);
  // The layer times the executor's profiler collected in its last run (layer_events.h), under the GIL.
  LayerTimes layer_times();
  // Copies every result the executor did not write in place into ExecuTorch's output.
  void write_back(const PlacementPlan& plan, const std::vector<at::Tensor>& results,
                  executorch::runtime::Span<executorch::runtime::EValue*> args);
  at::Tensor staging(std::vector<at::Tensor>& pool, size_t i, const at::Tensor& like, c10::Device device);

  // Owns ExecuTorch's processed buffer (a FreeableBuffer moved in): blob_ and the weight views point into it.
  // Declared first so it is released last; weight views hold it too, so it outlives every tensor made from it.
  std::shared_ptr<const void> buffer_;
  const uint8_t* blob_data_ = nullptr;
  size_t blob_size_ = 0;
  DelegateBlob blob_;
  NamedData named_;  // the blob's named data as read from the program's NamedDataMap (held, not copied)
  pybind11::object executor_;
  pybind11::object run_;               // executor_.run, looked up once
  pybind11::object take_layer_times_;  // a TensorRT executor's per-layer times (layer profiling on), else none
  std::shared_ptr<const GraphInterpreter> native_;  // the PyTorch executor's C++ path, if it has one
  c10::Device execution_device_torch_{c10::kCPU};
  EtDevice execution_device_{EtDeviceType::CPU, 0};
  ExecutorChoice choice_;  // which executor, where, why (copied into every plan)
  std::string executor_detail_;
  bool writes_in_place_ = false;
  bool reads_in_place_ = true;          // false: the executor reads fixed addresses (a CUDA graph); inputs are staged
  std::string fixed_addresses_;         // why it does (the executor's `fixed_addresses`), said in the plan
  std::vector<StatePlacement> states_;  // the state the executor owns (blob STATE), copied into every plan
  std::vector<at::Tensor> input_staging_, output_staging_;
  mutable std::mutex mutex_;  // one call at a time per delegate: staging buffers are shared state
  // The last call's plan and the arguments it was made for (see plan_call).
  std::shared_ptr<PlacementPlan> reusable_plan_;
  std::vector<ArgumentInfo> reusable_inputs_, reusable_outputs_;
};

// A plan rejected an argument; what() lists every rejection.
struct PlacementRejected : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One delegate argument's ArgumentInfo, its device label cross-checked against the CUDA driver where CUDA
// is usable (pointer_residence.h): a host pointer labelled cuda throws PlacementRejected (reading it on the
// device would fault); a device pointer labelled cpu is taken at the driver's word, with a note in the plan.
// `arg` counts inputs then outputs, as execute() receives them; `n_in` is the number of inputs.
// `value`: the argument's EValue, which names it in errors (argument_names.h); nullptr: "input 0".
ArgumentInfo checked_argument_info(const executorch::aten::Tensor& t, size_t arg, size_t n_in,
                                   const executorch::runtime::EValue* value = nullptr);

// The last error message a delegate reported on this thread (ExecuTorch only passes error codes upwards).
std::string last_delegate_error();
void set_last_delegate_error(std::string message);

}  // namespace et_tensorrt
