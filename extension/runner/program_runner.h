// Runs an ExecuTorch program (.pte) through ExecuTorch's C++ Module / Method, with inputs described
// by our descriptors (their real devices included) and, optionally, caller-owned output memory
// (Method::set_output_data_ptr), so a GPU-activation program can keep its I/O on the GPU.
#pragma once

#include <ATen/core/Tensor.h>
#include <executorch/extension/module/module.h>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "../runtime/named_data.h"
#include "event_profile.h"
#include "method_plan.h"

namespace et_tensorrt {

struct RunnerError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// An input's shape is not one the method takes; the message names the input and both shapes.
struct InputShapeError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// One method input: a tensor, or a value (ExecuTorch's Bool, Int and Double inputs: an export keeps a Python
// value its model took, e.g. a `return_dict=True` keyword, and the method takes exactly that value).
using MethodArgument = std::variant<at::Tensor, bool, int64_t, double>;

class ProgramRunner {
 public:
  // From a file path, or from program bytes (copied and owned by the runner). `verify` loads the program
  // with ExecuTorch's InternalConsistency verification (the flatbuffer verifier and its semantic checks),
  // so a corrupt program is an error rather than a crash; only a trusted program should skip it.
  // `data_path`: a .ptd with the program's named data kept outside the .pte (mapped, not read: the delegate's
  // weights are views of it); empty: none.
  // `profile`: the event tracer every method gets as it loads (its ETDump and delegate events), or null: none, and
  // nothing is traced. Shared, so a Runner's profile outlives the ProgramRunner a reset replaces.
  static std::unique_ptr<ProgramRunner> from_file(const std::string& path, bool verify = true,
                                                  const std::string& data_path = "",
                                                  std::shared_ptr<EventProfile> profile = nullptr);
  static std::unique_ptr<ProgramRunner> from_bytes(std::string bytes, bool verify = true,
                                                   const std::string& data_path = "",
                                                   std::shared_ptr<EventProfile> profile = nullptr);

  std::vector<std::string> method_names();
  size_t num_inputs(const std::string& method);

  // Outputs come back as torch tensors: the caller's `outputs` where given (written in place when the
  // program left that output unplanned, else copied into), otherwise fresh copies of ExecuTorch's.
  // `outputs_written_in_place` reports which outputs needed no copy.
  std::vector<at::Tensor> run(const std::vector<MethodArgument>& inputs, const std::string& method,
                              const std::optional<std::vector<at::Tensor>>& outputs,
                              std::vector<bool>* outputs_written_in_place);

  // The plan of this runner's last call (also after a failed call; null before any call). Composed when first asked
  // for, not on every call: its entries' words cost more than a small call itself.
  std::shared_ptr<const MethodPlan> last_plan() const;

  // "input 1 ('cache_position') of method 'decode'" (the name when the program's input spec gives one); without
  // `method_too`, "input 1 ('cache_position')".
  std::string input_label(const std::string& method, size_t index, bool method_too = true);

 private:
  ProgramRunner() = default;
  void ensure_loaded(const std::string& method);
  void check_data_used(const std::string& method);
  executorch::runtime::Method& loaded_method(const std::string& method);

  std::string bytes_;                      // program bytes when built from memory; must outlive module_
  DataFiles files_;                        // the .pte and .ptd, for named-data errors that name them
  std::shared_ptr<EventProfile> profile_;  // before module_: the methods log into it until they go
  std::unique_ptr<executorch::extension::Module> module_;
  // What the last call saw, composed into last_plan_ on request; guarded because Python reads the plan without the
  // Runner's lock while another thread may be inside run() (which runs without the GIL).
  struct PlanParts {
    std::string method;
    std::vector<MethodInput> inputs;
    std::vector<MethodOutput> outputs;
    std::vector<std::shared_ptr<const PlacementPlan>> delegates;
  };
  void set_plan_parts(std::optional<PlanParts> parts);
  mutable std::mutex plan_mutex_;
  mutable std::optional<PlanParts> plan_parts_;
  mutable std::shared_ptr<const MethodPlan> last_plan_;
  std::map<std::string, std::vector<std::string>> input_names_;  // by method, read when an error first needs them
};

}  // namespace et_tensorrt
