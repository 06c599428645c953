#include "plan_recorder.h"

namespace et_tensorrt {
namespace {
thread_local PlanRecorder* t_recorder = nullptr;
}  // namespace

PlanRecorder::PlanRecorder() : previous_(t_recorder) { t_recorder = this; }

PlanRecorder::~PlanRecorder() { t_recorder = previous_; }

void record_plan(std::shared_ptr<const PlacementPlan> plan) {
  if (t_recorder != nullptr) t_recorder->plans_.push_back(std::move(plan));
}

}  // namespace et_tensorrt
