// The whole truth about one method call: for every method input and output, what happened to the
// caller's memory end to end — ExecuTorch's own copies at the method boundary (into the memory it planned
// for inputs, out of the memory it reuses for outputs) composed with the copies of the delegate that read
// or wrote it — plus every delegate's own plan, in call order. Pure: composing moves no data.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "../runtime/placement_plan.h"

namespace et_tensorrt {

// One method input as the runner handed it over.
struct MethodInput {
  ArgumentInfo caller;                // the caller's tensor
  bool copied_into_planned = false;   // ExecuTorch copied it into memory it planned (zero_copy_inputs=False)
  const void* method_data = nullptr;  // where the method's own input tensor points after set_input
  std::string value;                  // a value input (bool, int, float): its text; empty for a tensor
};

// One method output as the runner returned it.
struct MethodOutput {
  ArgumentInfo result;            // the method's output tensor (its memory, its device)
  bool written_in_place = false;  // the method wrote straight into the caller's tensor
  bool caller_given = false;      // the caller passed a tensor for it (copied into when not in place)
};

struct MethodPlan {
  std::string method;
  std::vector<TensorPlacement> inputs;                          // one per method input
  std::vector<TensorPlacement> outputs;                         // one per method output
  std::vector<std::shared_ptr<const PlacementPlan>> delegates;  // every delegate call, in order
  size_t boundary_bytes = 0;  // what ExecuTorch and the runner copied at the method's inputs and outputs

  // The delegates' executor and execution device ("none" / cpu without a delegate; "mixed" when they differ).
  std::string executor() const;
  EtDevice execution_device() const;
  size_t bytes_copied() const;  // boundary_bytes + every delegate's copies
  bool ok() const;              // no delegate rejected anything
  std::string repr() const;
};

MethodPlan compose_method_plan(std::string method, const std::vector<MethodInput>& inputs,
                               const std::vector<MethodOutput>& outputs,
                               std::vector<std::shared_ptr<const PlacementPlan>> delegates);

}  // namespace et_tensorrt
