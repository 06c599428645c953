// Per-call binding for one delegate (one partition): reads the ExecuTorch descriptors of its
// arguments, computes the placement plan, moves data where the plan says, and runs the executor.
//
// The executor itself is a Python object (et_tensorrt.runtime.executors): TensorRT through its Python
// API where it can run, otherwise the partition's exported program with PyTorch. This class owns the
// blob bytes, the executor and the staging buffers (reused across calls while shapes stay the same).
#pragma once

#include <torch/python.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/span.h>

#include "blob_reader.h"
#include "placement_plan.h"

namespace et_tensorrt {

class DelegateHandle {
 public:
  // Copies `blob` (ExecuTorch may free the processed buffer after init). Needs the GIL; throws on a
  // damaged blob or when no executor is allowed to run here.
  DelegateHandle(const void* blob, size_t size);
  ~DelegateHandle();  // releases the Python executor under the GIL

  // Inputs then outputs, as ExecuTorch passes them to BackendInterface::execute. Throws PlacementError
  // (via PlacementRejected) on a rejected argument, or whatever the executor raised.
  void execute(executorch::runtime::Span<executorch::runtime::EValue*> args);

  std::shared_ptr<const PlacementPlan> last_plan() const;
  const DelegateBlob& blob() const { return blob_; }

 private:
  at::Tensor staging(std::vector<at::Tensor>& pool, size_t i, const at::Tensor& like, c10::Device device);

  std::vector<uint8_t> bytes_;  // owns the memory blob_ points into
  DelegateBlob blob_;
  pybind11::object executor_;
  EtDevice execution_device_{EtDeviceType::CPU, 0};
  std::string executor_kind_;
  bool writes_in_place_ = false;
  std::vector<at::Tensor> input_staging_, output_staging_;
  mutable std::mutex mutex_;  // one call at a time per delegate: staging buffers are shared state
  std::shared_ptr<const PlacementPlan> last_plan_;
};

// A plan rejected an argument; what() lists every rejection.
struct PlacementRejected : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One delegate argument's ArgumentInfo, its device label cross-checked against the CUDA driver where CUDA
// is usable (pointer_residence.h): a host pointer labelled cuda throws PlacementRejected (reading it on the
// device would fault); a device pointer labelled cpu is taken at the driver's word, with a note in the plan.
// `arg` counts inputs then outputs, as execute() receives them; `n_in` is the number of inputs.
ArgumentInfo checked_argument_info(const executorch::aten::Tensor& t, size_t arg, size_t n_in);

// The last plan any delegate in this process computed (for Runner.last_plan and the CLI), and the
// last error message a delegate reported (ExecuTorch only passes error codes upwards).
std::shared_ptr<const PlacementPlan> last_placement_plan();
std::string last_delegate_error();
void set_last_delegate_error(std::string message);

} // namespace et_tensorrt
