#include "program_runner.h"

#include <executorch/extension/data_loader/buffer_data_loader.h>
#include <executorch/extension/data_loader/mmap_data_loader.h>
#include <executorch/runtime/core/exec_aten/util/dim_order_util.h>
#include <executorch/runtime/core/exec_aten/util/tensor_util.h>

#include <ATen/ATen.h>

#include <fstream>
#include <iomanip>
#include <sstream>

#include "../aten_util/device_translation.h"
#include "../aten_util/dtype_translation.h"
#include "../aten_util/errors.h"
#include "../aten_util/tensor_descriptor.h"
#include "../aten_util/torch_view.h"
#include "../runtime/argument_names.h"
#include "../runtime/delegate_handle.h"
#include "../runtime/plan_recorder.h"
#include "data_file_check.h"
#include "delegate_fields_check.h"
#include "executorch_log.h"
#include "kernel_threadpool.h"
#include "method_inputs.h"

namespace et_tensorrt {
namespace {

using executorch::extension::Module;
using executorch::runtime::Error;
using executorch::runtime::EValue;

[[noreturn]] void fail(const std::string& what, Error err) {
  std::string msg = what + " (ExecuTorch error " + std::to_string(static_cast<int>(err)) + ")";
  const std::string delegate = last_delegate_error();
  const std::string executorch = held_executorch_errors();  // its reason when no delegate gave one
  if (!delegate.empty()) {
    msg += ": " + delegate;
  } else if (!executorch.empty()) {
    msg += ": ExecuTorch logged: " + executorch;
  }
  throw RunnerError(msg);
}

template <typename T>
std::string tuple_str(executorch::runtime::Span<const T> values) {
  std::string s = "(";
  for (size_t i = 0; i < values.size(); ++i) s += (i ? ", " : "") + std::to_string(values[i]);
  return s + (values.size() == 1 ? ",)" : ")");
}

template <typename T>
std::string tuple_str(executorch::aten::ArrayRef<T> values) {
  return tuple_str(executorch::runtime::Span<const T>(values.data(), values.size()));
}

// An input's label ("input 1 ('cache_position') of method 'decode'"), made only when an error needs it.
struct Where {
  ProgramRunner& runner;
  const std::string& method;
  size_t index;
  std::string operator()() const { return runner.input_label(method, index); }
};

// Names the delegates' arguments that are the method's inputs while it executes (argument_names.h).
class MethodInputs final : public ArgumentNamer {
 public:
  MethodInputs(ProgramRunner& runner, const std::string& method, const executorch::runtime::Method& m)
      : runner_(runner), method_(method), m_(m) {}
  std::string name(const EValue* value) const override {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    for (size_t i = 0; i < m_.inputs_size(); ++i) {
      if (&m_.get_input(i) == value) return runner_.input_label(method_, i, false);
    }
#pragma GCC diagnostic pop
    return "";
  }

 private:
  ProgramRunner& runner_;
  const std::string& method_;
  const executorch::runtime::Method& m_;
};

// ExecuTorch's Method::set_input checks dtype and sizes only loosely and never the dim order: a
// transposed input would be read as row-major. Check all three against the program, by name.
// Whether the method's own input tensor was exported with static dims (ExecuTorch cannot resize it at all).
bool static_input(const executorch::runtime::Method& m, size_t index) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  const EValue& v = m.get_input(index);
#pragma GCC diagnostic pop
  return v.isTensor() && v.toTensor().shape_dynamism() == executorch::aten::TensorShapeDynamism::STATIC;
}

const char* kStaticDims = ": dims exported as static cannot change (export with dynamic_shapes for the dims that vary)";

void check_against_program(const executorch::aten::Tensor& t, const executorch::runtime::TensorInfo& info,
                           const Where& where, bool is_static) {
  if (t.scalar_type() != info.scalar_type()) {
    throw UnsupportedDtypeError(where() + " has dtype " + dtype_text(t.scalar_type()) + " but the program takes " +
                                dtype_text(info.scalar_type()));
  }
  const auto sizes = info.sizes();
  bool fits = static_cast<size_t>(t.dim()) == sizes.size();
  for (size_t d = 0; fits && d < sizes.size(); ++d) fits = t.size(d) <= sizes[d];
  if (!fits) {
    // A static input takes exactly its sizes; a dynamic one anything up to the bound its memory was planned for.
    throw InputShapeError(where() + " has shape " + tuple_str(t.sizes()) + " but the program takes " +
                          (is_static ? tuple_str(sizes) + kStaticDims : "at most " + tuple_str(sizes)));
  }
  const auto order = info.dim_order();
  bool same_order = order.size() == t.dim_order().size();
  for (size_t d = 0; same_order && d < order.size(); ++d) same_order = order[d] == t.dim_order()[d];
  if (!same_order) {
    throw LayoutError(where() + " has dim order " + tuple_str(t.dim_order()) + " but the program reads dim order " +
                      tuple_str(order) + "; pass .contiguous() (or the memory_format the program was exported with)");
  }
}

void check_output(const TensorPtr& t, const executorch::runtime::TensorInfo& info, size_t index,
                  const std::string& method) {
  const std::string where = "output " + std::to_string(index) + " of method '" + method + "'";
  if (t->scalar_type() != info.scalar_type()) {
    throw UnsupportedDtypeError(where + " is written in place, but the tensor given for it has dtype " +
                                dtype_text(t->scalar_type()) + " and the program writes " +
                                dtype_text(info.scalar_type()));
  }
  if (static_cast<size_t>(t->numel()) * t->element_size() < info.nbytes() ||
      !executorch::runtime::is_contiguous_dim_order(t->dim_order().data(), t->dim_order().size())) {
    throw std::invalid_argument(where + " is written in place: the tensor given for it must be contiguous and hold " +
                                tuple_str(info.sizes()) + " elements");
  }
}

executorch::runtime::Program::Verification verification(bool verify) {
  return verify ? executorch::runtime::Program::Verification::InternalConsistency
                : executorch::runtime::Program::Verification::Minimal;
}

const char* kVerifyHint = " (it failed ExecuTorch's program verification: the file is corrupt or not a program)";

// After verification: the fields ExecuTorch's method loading dereferences unchecked (delegate_fields_check.h).
void check_delegate_fields(const uint8_t* data, size_t size, const std::string& what) {
  const std::string missing = missing_delegate_fields(data, program_flatbuffer_size(data, size));
  if (!missing.empty()) {
    throw RunnerError("cannot load " + what + ": " + missing + " (the file is corrupt; ExecuTorch would crash on it)");
  }
}

// The flatbuffer part of a .pte file (the extended header says how long it is; segments are not read).
std::string read_program_flatbuffer(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::string head(32, '\0');
  f.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(f.gcount()));
  f.seekg(0, std::ios::end);
  const size_t file_size = static_cast<size_t>(f.tellg());
  size_t size = file_size;
  if (head.size() == 32) {
    const size_t declared = program_flatbuffer_size(reinterpret_cast<const uint8_t*>(head.data()), file_size);
    size = declared;
  }
  std::string data(size, '\0');
  f.seekg(0);
  f.read(data.data(), static_cast<std::streamsize>(size));
  data.resize(static_cast<size_t>(f.gcount()));
  return data;
}

// Method::set_input's own refusals (a static dim that differs, a rank it cannot resize to) come back as a bare
// error code; name the input, what the program takes and what was given instead.
void set_input(executorch::runtime::Method& m, const executorch::aten::Tensor& t, const Where& where,
               const executorch::runtime::TensorInfo* info) {
  const Error err = m.set_input(EValue(t), where.index);
  if (err == Error::Ok) return;
  std::string msg = where() + " has shape " + tuple_str(t.sizes());
  if (info != nullptr) msg += " but the program takes " + tuple_str(info->sizes()) + kStaticDims;
  throw InputShapeError(msg + " (ExecuTorch error " + std::to_string(static_cast<int>(err)) + ")");
}

// A value as Python writes it: True, 3, 0.5.
std::string value_text(const EValue& v) {
  if (v.isBool()) return v.toBool() ? "True" : "False";
  if (v.isInt()) return std::to_string(v.toInt());
  if (v.isDouble()) {
    std::ostringstream out;
    out << std::setprecision(17) << v.toDouble();
    return out.str();
  }
  return "a " + std::string(v.isTensor() ? "tensor" : "value");
}

EValue to_evalue(const MethodArgument& given) {
  if (const bool* b = std::get_if<bool>(&given)) return EValue(*b);
  if (const int64_t* n = std::get_if<int64_t>(&given)) return EValue(*n);
  return EValue(std::get<double>(given));
}

// A value input (an export keeps a Python bool, int or float its model took): ExecuTorch takes exactly the value
// the program was exported with. Returns its text for the plan.
std::string set_value_input(executorch::runtime::Method& m, const MethodArgument& given, size_t index,
                            const std::string& method) {
  const std::string where = "input " + std::to_string(index) + " of method '" + method + "'";
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  const EValue& expected = m.get_input(index);
#pragma GCC diagnostic pop
  const EValue value = to_evalue(given);
  if (expected.isTensor()) {
    throw std::invalid_argument(where + " is a tensor; got the value " + value_text(value));
  }
  if (m.set_input(value, index) != Error::Ok) {
    throw std::invalid_argument(where + " is the value the program was exported with, " + value_text(expected) +
                                ", which it takes as it is; got " + value_text(value) +
                                ": export again with the value you need");
  }
  return value_text(value);
}

// Where the method's own input tensor points after set_input: the caller's memory, or the buffer ExecuTorch
// planned for it and copied into. Method::get_input is deprecated for end users; a runner is its intended user.
const void* method_input_data(const executorch::runtime::Method& m, size_t index) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  const EValue& v = m.get_input(index);
#pragma GCC diagnostic pop
  return v.isTensor() ? v.toTensor().const_data_ptr() : nullptr;
}

// A non-tensor method input, by its EValue tag.
std::string value_kind(executorch::runtime::Result<executorch::runtime::Tag> tag) {
  using executorch::runtime::Tag;
  if (!tag.ok()) return "a value";
  switch (*tag) {
    case Tag::Int:
      return "an int";
    case Tag::Double:
      return "a float";
    case Tag::Bool:
      return "a bool";
    case Tag::String:
      return "a string";
    case Tag::None:
      return "None";
    default:
      return "a list";
  }
}

// What a method takes, for a wrong input count: "input 0: float32 (4, 16), input 1: int64 up to (8,)". A dynamic
// tensor shows the upper bound ExecuTorch planned its memory for (the method records no ranges).
std::string describe_inputs(const executorch::runtime::MethodMeta& meta, const executorch::runtime::Method& m,
                            const std::function<std::string(size_t)>& label) {
  std::string out;
  for (size_t i = 0; i < meta.num_inputs(); ++i) {
    if (i) out += ", ";
    out += label(i) + ": ";
    auto info = meta.input_tensor_meta(i);
    if (!info.ok()) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
      out += value_kind(meta.input_tag(i)) + " (" + value_text(m.get_input(i)) + ")";
#pragma GCC diagnostic pop
      continue;
    }
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    const EValue& value = m.get_input(i);
#pragma GCC diagnostic pop
    const bool dynamic =
        value.isTensor() && value.toTensor().shape_dynamism() != executorch::aten::TensorShapeDynamism::STATIC;
    out += std::string(c10::getDtypeNames(executorch_to_torch_dtype(info->scalar_type())).first) +
           (dynamic ? " up to " : "") + tuple_str(info->sizes());
  }
  return out;
}

}  // namespace

std::unique_ptr<ProgramRunner> ProgramRunner::from_file(const std::string& path, bool verify,
                                                        const std::string& data_path,
                                                        std::shared_ptr<EventProfile> profile) {
  const QuietExecuTorchLog quiet;  // a failure is the RunnerError below, not ExecuTorch's log lines first
  std::unique_ptr<ProgramRunner> r(new ProgramRunner());
  r->profile_ = std::move(profile);
  r->files_.program = path;
  if (!data_path.empty()) {
    r->files_.data = data_path;
    r->files_.data_keys = data_file_keys(data_path, "program " + path);
  }
  // Mapped, not read: delegate segments stay pages of the file (the delegate keeps ExecuTorch's buffer and its
  // weights view it in place), so loading a .pte costs about its size in memory once, and only what is touched.
  // A .ptd is mapped the same way (Module maps its data files in Mmap mode).
  r->module_ = data_path.empty() ? std::make_unique<Module>(path, Module::LoadMode::Mmap)
                                 : std::make_unique<Module>(path, data_path, Module::LoadMode::Mmap);
  if (const Error err = r->module_->load(verification(verify)); err != Error::Ok) {
    fail("cannot load program " + path + (data_path.empty() ? "" : " with data file " + data_path) +
             (err == Error::InvalidProgram && verify ? kVerifyHint : ""),
         err);
  }
  if (verify) {
    const std::string flatbuffer = read_program_flatbuffer(path);
    check_delegate_fields(reinterpret_cast<const uint8_t*>(flatbuffer.data()), flatbuffer.size(), "program " + path);
  }
  return r;
}

std::unique_ptr<ProgramRunner> ProgramRunner::from_bytes(std::string bytes, bool verify, const std::string& data_path,
                                                         std::shared_ptr<EventProfile> profile) {
  const QuietExecuTorchLog quiet;
  std::unique_ptr<ProgramRunner> r(new ProgramRunner());
  r->profile_ = std::move(profile);
  r->bytes_ = std::move(bytes);
  std::unique_ptr<executorch::runtime::DataLoader> data_map;
  if (!data_path.empty()) {
    r->files_.data = data_path;
    r->files_.data_keys = data_file_keys(data_path, "program from bytes");
    auto loader = executorch::extension::MmapDataLoader::from(data_path.c_str());
    if (!loader.ok()) fail("cannot map the data file " + data_path, loader.error());
    data_map = std::make_unique<executorch::extension::MmapDataLoader>(std::move(*loader));
  }
  r->module_ = std::make_unique<Module>(
      std::make_unique<executorch::extension::BufferDataLoader>(r->bytes_.data(), r->bytes_.size()), nullptr, nullptr,
      nullptr, std::move(data_map));
  if (const Error err = r->module_->load(verification(verify)); err != Error::Ok) {
    fail(std::string("cannot load program from bytes") + (err == Error::InvalidProgram && verify ? kVerifyHint : ""),
         err);
  }
  if (verify) {
    check_delegate_fields(reinterpret_cast<const uint8_t*>(r->bytes_.data()), r->bytes_.size(), "program from bytes");
  }
  return r;
}

std::string ProgramRunner::input_label(const std::string& method, size_t index, bool method_too) {
  auto found = input_names_.find(method);
  if (found == input_names_.end()) {
    const std::string flatbuffer = bytes_.empty() ? read_program_flatbuffer(files_.program) : std::string();
    const std::string& data = bytes_.empty() ? flatbuffer : bytes_;
    const auto* begin = reinterpret_cast<const uint8_t*>(data.data());
    const std::string spec = method_input_spec(begin, program_flatbuffer_size(begin, data.size()), method);
    found = input_names_.emplace(method, method_input_names(spec)).first;
  }
  std::string label = "input " + std::to_string(index);
  if (index < found->second.size() && !found->second[index].empty()) label += " ('" + found->second[index] + "')";
  return method_too ? label + " of method '" + method + "'" : label;
}

std::vector<std::string> ProgramRunner::method_names() {
  auto names = module_->method_names();
  if (!names.ok()) fail("cannot list methods", names.error());
  return {names->begin(), names->end()};
}

void ProgramRunner::ensure_loaded(const std::string& method) {
  if (module_->is_method_loaded(method)) return;
  const QuietExecuTorchLog quiet;
  set_last_delegate_error("");
  // ExecuTorch's verifier accepts a plan whose input or output indices point outside its values, and
  // Method::set_input / get_output then abort the process on them (fuzz finding F9): refuse such a method.
  if (auto meta = module_->method_meta(method); meta.ok()) {
    for (size_t i = 0; i < meta->num_inputs(); ++i) {
      if (!meta->input_tag(i).ok()) {
        throw RunnerError("cannot load method '" + method + "': its input " + std::to_string(i) +
                          " refers to a value the program does not have (the file is corrupt; ExecuTorch would "
                          "crash on it)");
      }
    }
    for (size_t i = 0; i < meta->num_outputs(); ++i) {
      if (!meta->output_tag(i).ok()) {
        throw RunnerError("cannot load method '" + method + "': its output " + std::to_string(i) +
                          " refers to a value the program does not have (the file is corrupt; ExecuTorch would "
                          "crash on it)");
      }
    }
  }
  files_.delegates = files_.named_delegates = 0;
  Error err;
  {
    const DataFilesScope scope(files_);                           // the delegates' named-data errors name the files
    err = module_->load_method(method, nullptr, profile_.get());  // no profile: no tracer, as before
  }
  if (err != Error::Ok) fail("cannot load method '" + method + "'", err);
  check_data_used(method);
}

// A .ptd of et_tensorrt's given with a program whose delegates read no named data (saved without
// named_data="ptd"): the .ptd is another program's, and the caller should know rather than run without it.
void ProgramRunner::check_data_used(const std::string& method) {
  if (files_.data.empty() || files_.delegates == 0 || files_.named_delegates != 0) return;
  size_t ours = 0;
  for (const std::string& key : files_.data_keys) ours += key.rfind(kNamedDataKeyPrefix, 0) == 0 ? 1 : 0;
  if (ours == 0) return;  // another backend's data: not ours to judge
  module_->unload_method(method);
  throw RunnerError("cannot load method '" + method + "' of " +
                    (files_.program.empty() ? std::string("the program") : files_.program) + " with data file " +
                    files_.data + ": the .ptd holds " + std::to_string(ours) +
                    " et_tensorrt engine(s) and weight(s), but this program's delegates keep theirs inside the .pte "
                    "(it was saved without named_data=\"ptd\"), so the .ptd is another program's; load the program "
                    "without it, or the .pte saved with it");
}

executorch::runtime::Method& ProgramRunner::loaded_method(const std::string& method) {
  ensure_loaded(method);
  // Module::method is deprecated for end users: the runner drives set_input/execute itself so that each
  // refusal names its input, and reads where ExecuTorch put each input for the plan.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  auto m = module_->method(method);
#pragma GCC diagnostic pop
  if (!m.ok()) fail("cannot load method '" + method + "'", m.error());
  return **m;
}

size_t ProgramRunner::num_inputs(const std::string& method) {
  ensure_loaded(method);
  auto meta = module_->method_meta(method);
  if (!meta.ok()) fail("no metadata for method '" + method + "'", meta.error());
  return meta->num_inputs();
}

void ProgramRunner::set_plan_parts(std::optional<PlanParts> parts) {
  const std::lock_guard<std::mutex> lock(plan_mutex_);
  plan_parts_ = std::move(parts);
  last_plan_.reset();
}

std::shared_ptr<const MethodPlan> ProgramRunner::last_plan() const {
  const std::lock_guard<std::mutex> lock(plan_mutex_);
  if (plan_parts_) {
    PlanParts& parts = *plan_parts_;
    last_plan_ = std::make_shared<MethodPlan>(
        compose_method_plan(std::move(parts.method), parts.inputs, parts.outputs, std::move(parts.delegates)));
    plan_parts_.reset();
  }
  return last_plan_;
}

std::vector<at::Tensor> ProgramRunner::run(const std::vector<MethodArgument>& inputs, const std::string& method,
                                           const std::optional<std::vector<at::Tensor>>& outputs,
                                           std::vector<bool>* outputs_written_in_place) {
  ensure_loaded(method);
  set_plan_parts(std::nullopt);
  auto meta = module_->method_meta(method);
  if (!meta.ok()) fail("no metadata for method '" + method + "'", meta.error());
  executorch::runtime::Method& m = loaded_method(method);
  if (inputs.size() != meta->num_inputs()) {
    const size_t n = meta->num_inputs();
    throw InputShapeError("method '" + method + "' takes " + std::to_string(n) + " input" + (n == 1 ? "" : "s") + " (" +
                          describe_inputs(*meta, m, [&](size_t i) { return input_label(method, i, false); }) +
                          "), got " + std::to_string(inputs.size()) + ": pass one tensor per input, in this order");
  }
  // Descriptors own references to the caller's tensors for the whole call.
  std::vector<TensorPtr> descriptors;
  std::vector<MethodInput> plan_inputs(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    auto info = meta->input_tensor_meta(i);
    if (!std::holds_alternative<at::Tensor>(inputs[i])) {
      plan_inputs[i].value = set_value_input(m, inputs[i], i, method);
      continue;
    }
    if (!info.ok()) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
      const EValue& expected = m.get_input(i);
#pragma GCC diagnostic pop
      throw std::invalid_argument("input " + std::to_string(i) + " of method '" + method + "' is " +
                                  value_kind(meta->input_tag(i)) + " the program was exported with (" +
                                  value_text(expected) + "); got a tensor: pass the value");
    }
    descriptors.push_back(describe_input(std::get<at::Tensor>(inputs[i]), i, method));
    const Where where{*this, method, i};
    check_against_program(*descriptors.back(), *info, where, static_input(m, i));
    set_input(m, *descriptors.back(), where, &*info);
    plan_inputs[i].caller = argument_info(*descriptors.back());
    plan_inputs[i].copied_into_planned = info.ok() && info->is_memory_planned();
  }
  // Output memory: the caller's tensors where given. Outputs the program left unplanned
  // (lower(..., zero_copy_outputs=True)) are then written in place; without a caller tensor the runner
  // allocates one on the host, since ExecuTorch has no memory of its own for them.
  std::vector<TensorPtr> out_descriptors;
  std::vector<at::Tensor> targets;
  std::vector<bool> in_place;
  for (size_t i = 0; i < meta->num_outputs(); ++i) {
    auto info = meta->output_tensor_meta(i);
    const bool caller_given = outputs && i < outputs->size();
    const bool planned = !info.ok() || info->is_memory_planned();
    if (!caller_given && planned) {
      targets.emplace_back();
      in_place.push_back(false);
      continue;
    }
    if (caller_given && !planned) {
      // Written in place: same dtype, dim order and room for the output's bound.
      check_output(make_descriptor((*outputs)[i]), *info, i, method);
    }
    at::Tensor target = caller_given
                            ? (*outputs)[i]
                            : at::empty(std::vector<int64_t>(info->sizes().begin(), info->sizes().end()),
                                        at::TensorOptions().dtype(executorch_to_torch_dtype(info->scalar_type())));
    out_descriptors.push_back(make_descriptor(target));
    // Succeeds only for outputs the program left unplanned; otherwise we copy after execution.
    in_place.push_back(!planned && module_->set_output(method, EValue(*out_descriptors.back()), i) == Error::Ok);
    targets.push_back(target);
  }
  set_last_delegate_error("");
  create_kernel_threadpool_quietly();
  const QuietExecuTorchLog quiet;
  Error status = Error::Ok;
  std::vector<std::shared_ptr<const PlacementPlan>> delegate_plans;
  {
    PlanRecorder recorder;  // every delegate call of this method on this thread reports here
    const MethodInputs inputs_named(*this, method, m);
    const ArgumentNames naming(inputs_named);  // a delegate's error names the method's input, not its own argument
    status = m.execute();
    delegate_plans = recorder.plans();
  }
  for (size_t i = 0; i < inputs.size(); ++i) plan_inputs[i].method_data = method_input_data(m, i);
  std::vector<MethodOutput> plan_outputs;
  if (status == Error::Ok) {
    for (size_t i = 0; i < m.outputs_size(); ++i) {
      const EValue& v = m.get_output(i);
      if (!v.isTensor()) continue;
      MethodOutput o;
      o.result = argument_info(v.toTensor());
      o.written_in_place = i < in_place.size() && in_place[i];
      o.caller_given = outputs && i < outputs->size();
      plan_outputs.push_back(o);
    }
  }
  set_plan_parts(PlanParts{method, std::move(plan_inputs), std::move(plan_outputs), std::move(delegate_plans)});
  if (status != Error::Ok) fail("method '" + method + "' failed", status);

  std::vector<at::Tensor> out;
  for (size_t i = 0; i < m.outputs_size(); ++i) {
    const EValue& v = m.get_output(i);
    if (!v.isTensor()) {
      throw RunnerError("output " + std::to_string(i) + " of method '" + method + "' is not a tensor");
    }
    if (i < targets.size() && targets[i].defined()) {
      at::Tensor target = targets[i];
      if (in_place[i]) {
        // A dynamic output smaller than its bound: ExecuTorch wrote it contiguously at the start of the
        // caller's buffer; return the view of exactly that.
        const auto& et = v.toTensor();
        const std::vector<int64_t> sizes(et.sizes().begin(), et.sizes().end());
        if (target.sizes().vec() != sizes) {
          target = target.view(-1).narrow(0, 0, et.numel()).view(sizes);
        }
      } else {
        target.copy_(torch_view(v.toTensor()));
      }
      out.push_back(target);
    } else {
      out.push_back(torch_copy(v.toTensor()));  // ExecuTorch owns (and reuses) this memory: the caller's own copy
      if (in_place.size() <= i) in_place.push_back(false);
    }
  }
  if (outputs_written_in_place) *outputs_written_in_place = in_place;
  return out;
}

}  // namespace et_tensorrt
