// Who sees a delegate's placement plan: the call that ran it. A recorder installed on a thread collects
// the plan of every delegate call made on that thread while it is installed (ExecuTorch runs a
// method's delegates synchronously on the caller's thread), so plans belong to one Runner call — never to
// a process-global that another thread could overwrite.
#pragma once

#include <memory>
#include <vector>

#include "placement_plan.h"

namespace et_tensorrt {

class PlanRecorder {
 public:
  PlanRecorder();   // installs itself on this thread (nesting: the previous one is restored on destruction)
  ~PlanRecorder();  // must be destroyed on the thread that created it
  PlanRecorder(const PlanRecorder&) = delete;
  PlanRecorder& operator=(const PlanRecorder&) = delete;

  // Every delegate plan of this thread since construction, in call order.
  const std::vector<std::shared_ptr<const PlacementPlan>>& plans() const { return plans_; }

 private:
  friend void record_plan(std::shared_ptr<const PlacementPlan> plan);
  std::vector<std::shared_ptr<const PlacementPlan>> plans_;
  PlanRecorder* previous_;
};

// Called by each delegate call: hands its plan to this thread's recorder, if one is installed.
void record_plan(std::shared_ptr<const PlacementPlan> plan);

}  // namespace et_tensorrt
