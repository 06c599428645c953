#include <torch/python.h>

#include <pybind11/stl.h>

#include <optional>
#include <variant>

#include "../extension/aten_util/errors.h"
#include "../extension/runner/data_file_check.h"
#include "../extension/runner/executorch_log.h"
#include "../extension/runner/program_runner.h"
#include "../extension/format/blob_reader.h"
#include "../extension/runtime/delegate_handle.h"
#include "../extension/runtime/executor_choice.h"
#include "../extension/runtime/named_data.h"
#include "../extension/runtime/placement_plan.h"
#include "../extension/runtime/plan_recorder.h"
#include "../extension/runtime/pointer_residence.h"

#include <thread>
#include "../extension/runtime/backend_interface.h"
#include "bindings.h"
#include "blob_bytes.h"
#include "tensor_descriptor_object.h"

namespace py = pybind11;

namespace et_tensorrt::python {
namespace {

// A program's named data from Python buffers (key -> bytes-like), for the delegate's choice without a .pte (tests that
// fake a GPU): each datum handed out holds its Python object until ExecuTorch's FreeableBuffer is freed.
class BufferDataMap final : public executorch::runtime::NamedDataMap {
 public:
  explicit BufferDataMap(py::dict data) : data_(std::move(data)) {}

  executorch::runtime::Result<const executorch::runtime::TensorLayout> get_tensor_layout(
      std::string_view) const override {
    return executorch::runtime::Error::NotImplemented;
  }

  executorch::runtime::Result<executorch::runtime::FreeableBuffer> get_data(std::string_view key) const override {
    py::str name(key.data(), key.size());
    if (!data_.contains(name)) return executorch::runtime::Error::NotFound;
    auto* held = new py::buffer(data_[name]);
    py::buffer_info info = held->request();
    const size_t size = static_cast<size_t>(info.size * info.itemsize);
    return executorch::runtime::FreeableBuffer(
        info.ptr, size,
        [](void* context, void*, size_t) {
          py::gil_scoped_acquire gil;
          delete static_cast<py::buffer*>(context);
        },
        held);
  }

  executorch::runtime::Error load_data_into(std::string_view, void*, size_t) const override {
    return executorch::runtime::Error::NotImplemented;
  }
  executorch::runtime::Result<uint32_t> get_num_keys() const override { return static_cast<uint32_t>(data_.size()); }
  executorch::runtime::Result<const char*> get_key(uint32_t) const override {
    return executorch::runtime::Error::NotImplemented;
  }

 private:
  py::dict data_;
};

struct PlanRecording {
  std::unique_ptr<PlanRecorder> recorder;  // installed between __enter__ and __exit__
  std::thread::id thread;
  std::vector<std::shared_ptr<const PlacementPlan>> plans;  // kept after __exit__
};

struct LogCapture {
  std::unique_ptr<ExecuTorchLogCapture> capture;  // installed between __enter__ and __exit__
  std::thread::id thread;
  std::vector<std::pair<char, std::string>> messages;  // kept after __exit__
};

std::vector<ArgumentInfo> argument_infos(const std::vector<TensorDescriptor>& descriptors) {
  std::vector<ArgumentInfo> out;
  for (const TensorDescriptor& d : descriptors) out.push_back(argument_info(*d.tensor));
  return out;
}

// Delegate arguments as ExecuTorch passes them: tensors (descriptors) and sizes (ints).
std::vector<ArgumentInfo> argument_infos(const std::vector<std::variant<TensorDescriptor, int64_t>>& arguments) {
  std::vector<ArgumentInfo> out;
  for (const auto& a : arguments) {
    out.push_back(std::holds_alternative<int64_t>(a) ? size_argument_info(std::get<int64_t>(a))
                                                     : argument_info(*std::get<TensorDescriptor>(a).tensor));
  }
  return out;
}

}  // namespace

void bind_runtime(py::module_& m) {
  py::class_<TensorPlacement>(m, "TensorPlacement", "One input's or output's placement decision.")
      .def_property_readonly("role", [](const TensorPlacement& p) { return role_name(p.role); })
      .def_readonly("index", &TensorPlacement::index)
      .def_property_readonly("action", [](const TensorPlacement& p) { return placement_name(p.action); })
      .def_property_readonly("source", [](const TensorPlacement& p) { return executorch_to_torch_device(p.from); })
      .def_property_readonly("destination", [](const TensorPlacement& p) { return executorch_to_torch_device(p.to); })
      .def_readonly("bytes", &TensorPlacement::bytes)
      .def_readonly("data_ptr", &TensorPlacement::address)
      .def_readonly("reason", &TensorPlacement::reason)
      .def("__repr__", [](const TensorPlacement& p) {
        return std::string("<") + role_name(p.role) + " " + std::to_string(p.index) + ": " + placement_name(p.action) +
               " " + device_str(p.from) + " -> " + device_str(p.to) + ">";
      });

  py::class_<StatePlacement>(m, "StatePlacement", "A state tensor the delegate owns, and what a call did to it.")
      .def_readonly("name", &StatePlacement::name)
      .def_property_readonly("device", [](const StatePlacement& s) { return executorch_to_torch_device(s.device); })
      .def_readonly("update", &StatePlacement::update)
      .def_readonly("bytes", &StatePlacement::bytes)
      .def_property_readonly("dtype", [](const StatePlacement& s) { return executorch_to_torch_dtype(s.dtype); })
      .def_readonly("methods", &StatePlacement::methods,
                    "The program's methods that bind this same device buffer (empty: this method only).")
      .def("__repr__", [](const StatePlacement& s) {
        std::string dtype = py::str(py::cast(executorch_to_torch_dtype(s.dtype)));
        std::string shared;
        for (const std::string& m : s.methods) shared += (shared.empty() ? ", shared by " : ", ") + m;
        return "<state " + s.name + ": " + device_str(s.device) + ", " + dtype.substr(dtype.find('.') + 1) + ", " +
               (s.update == "copied back" ? "copied back " + std::to_string(s.bytes) + " B" : s.update) + shared + ">";
      });

  py::class_<PlacementPlan, std::shared_ptr<PlacementPlan>>(m, "PlacementPlan",
                                                            "Per call: share, copy or reject each input and output.")
      .def_readonly("executor", &PlacementPlan::executor)
      .def_readonly("executor_detail", &PlacementPlan::executor_detail)
      .def_readonly("executor_reason", &PlacementPlan::executor_reason,
                    "Why not TensorRT, and why not the recorded GPU; empty when TensorRT runs.")
      .def_readonly("engine_origin", &PlacementPlan::engine_origin,
                    "Where the TensorRT engine came from: empty for the blob's own, else e.g. 'built here for sm90 "
                    "with TensorRT 11.4 in 14.2 s; cached'.")
      .def_property_readonly("execution_device",
                             [](const PlacementPlan& p) { return executorch_to_torch_device(p.execution_device); })
      .def_readonly("inputs", &PlacementPlan::inputs)
      .def_readonly("outputs", &PlacementPlan::outputs)
      .def_readonly("states", &PlacementPlan::states)
      .def_property_readonly("state_bytes", &PlacementPlan::state_bytes)
      .def_readonly("executor_ns", &PlacementPlan::executor_ns, "Time inside the executor (ns).")
      .def_readonly("delegate_ns", &PlacementPlan::delegate_ns,
                    "The delegate's own time around the executor: plan, bind, write back, lock, GIL (ns).")
      .def_property_readonly("bytes_copied", &PlacementPlan::bytes_copied)
      .def_property_readonly("ok", &PlacementPlan::ok)
      .def("__repr__", &PlacementPlan::repr);

  m.def(
      "scalar_type_code",
      [](const c10::ScalarType& dtype) { return static_cast<int>(torch_to_executorch_dtype(dtype)); }, py::arg("dtype"),
      "torch dtype -> ExecuTorch ScalarType code (raises UnsupportedDtypeError).");
  m.def(
      "scalar_type_dtype",
      [](int code) {
        if (code < 0 || code > static_cast<int>(EtScalarType::UInt64)) {
          throw UnsupportedDtypeError("ExecuTorch ScalarType code " + std::to_string(code) + " has no torch dtype");
        }
        return executorch_to_torch_dtype(static_cast<EtScalarType>(code));
      },
      py::arg("code"), "ExecuTorch ScalarType code -> torch dtype (raises UnsupportedDtypeError).");

  m.def(
      "fallback_policy", []() { return std::string(fallback_policy_name(fallback_policy())); },
      "ET_TENSORRT_FALLBACK as the delegate reads it: 'pytorch' or 'error' (ValueError for any other value).");
#ifdef ET_EVENT_TRACER_ENABLED
  m.attr("event_tracer_enabled") = true;  // compiled with the wheel's ET_EVENT_TRACER_ENABLED (CMakeLists.txt)
#else
  m.attr("event_tracer_enabled") = false;
#endif
  m.def("cuda_device_count", &cuda_device_count, "CUDA devices the delegate sees (0 with a CPU-only torch).");
  m.def(
      "create_executor",
      [](const py::buffer& blob_bytes, std::optional<int> cuda_devices, std::optional<py::dict> named_data,
         uintptr_t program_scope, const std::string& method) {
        // The delegate's own choice, for drivers without a .pte (fuzzers, tests that fake a GPU); `named_data`
        // stands in for the program's NamedDataMap, resolved as the delegate resolves it.
        py::buffer_info info;
        const std::string_view bytes = bytes_view(blob_bytes, info);
        const DelegateBlob blob = parse_delegate_blob(bytes.data(), bytes.size());
        std::optional<BufferDataMap> map;
        if (named_data) map.emplace(*named_data);
        const NamedData named = resolve_named_data(blob, map ? &*map : nullptr);
        // As the delegate: the weights are views of the blob (held by `owner`) or of the named data.
        std::shared_ptr<const void> owner(new py::buffer(blob_bytes), [](const void* held) {
          py::gil_scoped_acquire gil;
          delete static_cast<const py::buffer*>(held);
        });
        ExecutorChoice choice;
        py::object executor = create_executor(blob, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(),
                                              cuda_devices.value_or(cuda_device_count()), choice, owner, &named,
                                              ProgramScope{program_scope, method});
        py::dict out;
        out["executor"] = choice.executor;
        out["device"] = executorch_to_torch_device(choice.device);
        out["recorded_device"] = executorch_to_torch_device(choice.recorded_device);
        out["reason"] = choice.reason;
        out["engine_origin"] = choice.engine_origin;
        return py::make_tuple(executor, out);
      },
      py::arg("blob"), py::arg("cuda_devices") = py::none(), py::arg("named_data") = py::none(),
      py::arg("program_scope") = 0, py::arg("method") = "",
      "The executor the delegate would build for this blob and its choice (executor, device, recorded_device, "
      "reason, engine_origin). `cuda_devices` overrides the CUDA device count the choice is made with; "
      "`named_data` (key -> bytes-like) is the program's named data, for a blob with NAMED_DATA; `program_scope` "
      "and `method` stand for the loaded program and method whose shared states the executor binds.");

  m.def(
      "plan_placement",
      [](const py::buffer& blob_bytes, const std::vector<std::variant<TensorDescriptor, int64_t>>& inputs,
         const std::vector<TensorDescriptor>& outputs, const c10::Device& execution_device, const std::string& executor,
         bool writes_in_place, bool reads_in_place, const std::string& fixed_addresses) {
        py::buffer_info info;
        const std::string_view bytes = bytes_view(blob_bytes, info);
        const DelegateBlob blob = parse_delegate_blob(bytes.data(), bytes.size());
        return std::make_shared<PlacementPlan>(plan_placement(argument_infos(inputs), argument_infos(outputs), blob,
                                                              torch_to_executorch_device(execution_device), executor,
                                                              writes_in_place, reads_in_place, fixed_addresses));
      },
      py::arg("blob"), py::arg("inputs"), py::arg("outputs"), py::arg("execution_device"),
      py::arg("executor") = "tensorrt", py::arg("writes_in_place") = true, py::arg("reads_in_place") = true,
      py::arg("fixed_addresses") = "",
      "The plan the delegate would compute for these arguments: descriptors, and ints for size arguments "
      "(moves no data).");

  m.def(
      "_relabel",
      [](const TensorDescriptor& d, const c10::Device& device) {
        // Tests only: a descriptor over the same memory under another device label.
        const auto& t = *d.tensor;
        TensorPtr keep = d.tensor;
        return TensorDescriptor{executorch::extension::make_tensor_ptr(
            std::vector<executorch::aten::SizesType>(t.sizes().begin(), t.sizes().end()), t.mutable_data_ptr(),
            std::vector<executorch::aten::DimOrderType>(t.dim_order().begin(), t.dim_order().end()),
            std::vector<executorch::aten::StridesType>(t.strides().begin(), t.strides().end()), t.scalar_type(),
            torch_to_executorch_device(device), executorch::aten::TensorShapeDynamism::STATIC, [keep](void*) {})};
      },
      py::arg("descriptor"), py::arg("device"));

  py::class_<MethodPlan, std::shared_ptr<MethodPlan>>(
      m, "MethodPlan",
      "Per call of a method: each method input and output end to end (ExecuTorch's boundary copies composed "
      "with the delegate's), and every delegate's own PlacementPlan in call order.")
      .def_readonly("method", &MethodPlan::method)
      .def_readonly("inputs", &MethodPlan::inputs)
      .def_readonly("outputs", &MethodPlan::outputs)
      .def_property_readonly("delegates",
                             [](const MethodPlan& p) {
                               std::vector<std::shared_ptr<PlacementPlan>> out;
                               for (const auto& d : p.delegates)
                                 out.push_back(std::const_pointer_cast<PlacementPlan>(d));
                               return out;
                             })
      .def_property_readonly("executor", &MethodPlan::executor)
      .def_property_readonly("execution_device",
                             [](const MethodPlan& p) { return executorch_to_torch_device(p.execution_device()); })
      .def_readonly("boundary_bytes", &MethodPlan::boundary_bytes)
      .def_property_readonly("bytes_copied", &MethodPlan::bytes_copied)
      .def_property_readonly("ok", &MethodPlan::ok)
      .def("__repr__", &MethodPlan::repr);

  // For ExecuTorch's own runtime (executorch.runtime), which has no Runner: collects the plans of the delegate
  // calls made on this thread inside the `with` block.
  py::class_<PlanRecording>(m, "PlanRecording")
      .def(py::init<>())
      .def(
          "__enter__",
          [](PlanRecording& r) -> PlanRecording& {
            if (r.recorder) throw std::logic_error("this PlanRecording is already active");
            r.recorder = std::make_unique<PlanRecorder>();
            r.thread = std::this_thread::get_id();
            return r;
          },
          py::return_value_policy::reference)
      .def("__exit__",
           [](PlanRecording& r, const py::args&) {
             if (!r.recorder) return;
             if (r.thread != std::this_thread::get_id()) {
               throw std::logic_error("a PlanRecording must be exited on the thread that entered it");
             }
             r.plans = r.recorder->plans();
             r.recorder.reset();
           })
      .def_property_readonly("plans", [](const PlanRecording& r) {
        std::vector<std::shared_ptr<PlacementPlan>> out;
        for (const auto& d : r.recorder ? r.recorder->plans() : r.plans) {
          out.push_back(std::const_pointer_cast<PlacementPlan>(d));
        }
        return out;
      });

  // What ExecuTorch logs on this thread inside the `with` block, with its level: ExecuTorch's Python bindings print
  // log lines without it (et_tensorrt.llm reads why TextLLMRunner refused a prompt from its error-level lines).
  py::class_<LogCapture>(m, "ExecuTorchLogCapture")
      .def(py::init<>())
      .def(
          "__enter__",
          [](LogCapture& c) -> LogCapture& {
            if (c.capture) throw std::logic_error("this ExecuTorchLogCapture is already active");
            c.capture = std::make_unique<ExecuTorchLogCapture>();
            c.thread = std::this_thread::get_id();
            return c;
          },
          py::return_value_policy::reference)
      .def("__exit__",
           [](LogCapture& c, const py::args&) {
             if (!c.capture) return;
             if (c.thread != std::this_thread::get_id()) {
               throw std::logic_error("an ExecuTorchLogCapture must be exited on the thread that entered it");
             }
             c.messages = c.capture->messages();
             c.capture.reset();
           })
      .def_property_readonly("messages", [](const LogCapture& c) {
        py::list out;  // (level, text): level "E" error, "I" info, ...
        for (const auto& [level, text] : c.capture ? c.capture->messages() : c.messages) {
          out.append(py::make_tuple(std::string(1, level), py::bytes(text).attr("decode")("utf-8", "replace")));
        }
        return out;
      });

  m.def(
      "_pointer_residence",
      [](uintptr_t address) -> std::string {
        const PointerResidence r = pointer_residence(reinterpret_cast<const void*>(address));
        switch (r.kind) {
          case PointerResidence::Host:
            return "host";
          case PointerResidence::Device:
            return "cuda:" + std::to_string(r.device_index);
          default:
            return "unknown";
        }
      },
      py::arg("address"),
      "Where the CUDA driver says an address lives: 'host', 'cuda:N', or 'unknown' (no driver loaded here).");

  m.def(
      "_check_argument",
      [](const TensorDescriptor& d, size_t arg, size_t n_inputs) {
        // The delegate's own per-argument check (the driver cross-check of the device label); for the GPU check.
        const ArgumentInfo v = checked_argument_info(*d.tensor, arg, n_inputs);
        return py::make_tuple(executorch_to_torch_device(v.device), v.label_note);
      },
      py::arg("descriptor"), py::arg("arg") = 0, py::arg("n_inputs") = 1,
      "(device the delegate would use, note) for one argument; raises PlacementError for a host pointer "
      "labelled cuda.");
  m.def("last_delegate_error", &last_delegate_error, "This thread's last delegate error message.");
  m.def(
      "check_data_file",
      [](const std::string& data_path, const std::string& program) { data_file_keys(data_path, "program " + program); },
      py::arg("data_path"), py::arg("program"),
      "Raises RunnerError naming `data_path` when it is no .ptd, is truncated or its key table is damaged (what "
      "Runner checks before ExecuTorch maps it; for hosts that hand the file to ExecuTorch themselves).");
  // The switches the runtime reads from the environment (one spelling, here): named data used unchecked; ExecuTorch's
  // log lines shown while a Runner loads and runs.
  m.attr("TRUST_NAMED_DATA_ENV") = kTrustNamedDataEnv;
  m.attr("EXECUTORCH_LOGS_ENV") = kExecuTorchLogsEnv;
  m.def("register_backend", &register_tensorrt_backend,
        "Register EtTensorRTBackend into libexecutorch.so's registry (idempotent).");
  m.def("install_log_filter", &install_executorch_log_filter,
        "Put et_tensorrt's filter in front of ExecuTorch's log function now (idempotent): every line reaches it as "
        "UTF-8; a Runner call's lines are held for its error.");

  py::class_<EventProfile, std::shared_ptr<EventProfile>>(
      m, "EventProfile",
      "ExecuTorch's ETDumpGen for a Runner's methods (Runner(..., profile=True)), with a copy of each delegate event.")
      .def(py::init<>())
      .def(
          "events",
          [](const EventProfile& p) {
            py::list out;
            for (const ProfileEvent& e : p.events()) {
              out.append(py::make_tuple(e.name, e.start_ns, e.end_ns, py::bytes(e.metadata)));
            }
            return out;
          },
          "(name, start_ns, end_ns, metadata bytes) of every delegate event since the profile began or was taken.")
      .def(
          "take_etdump", [](EventProfile& p) { return py::bytes(p.take_etdump()); },
          "The ETDump of everything since the profile began or was last taken; the profile then starts over.");

  py::class_<ProgramRunner>(m, "ProgramRunner")
      .def_static("from_file", &ProgramRunner::from_file, py::arg("path"), py::arg("verify") = true,
                  py::arg("data_path") = "", py::arg("profile") = nullptr)
      .def_static(
          "from_bytes",
          [](const py::bytes& b, bool verify, const std::string& data_path, std::shared_ptr<EventProfile> profile) {
            return ProgramRunner::from_bytes(std::string(b), verify, data_path, std::move(profile));
          },
          py::arg("data"), py::arg("verify") = true, py::arg("data_path") = "", py::arg("profile") = nullptr)
      .def("method_names", &ProgramRunner::method_names)
      .def("num_inputs", &ProgramRunner::num_inputs, py::arg("method"))
      .def("last_plan", [](const ProgramRunner& r) { return std::const_pointer_cast<MethodPlan>(r.last_plan()); })
      .def(
          "run",
          [](ProgramRunner& r, const std::vector<MethodArgument>& inputs, const std::string& method,
             const std::optional<std::vector<at::Tensor>>& outputs) {
            std::vector<bool> in_place;
            std::vector<at::Tensor> result;
            {
              // Native work without the GIL; the delegate takes it back to call its executor.
              py::gil_scoped_release no_gil;
              result = r.run(inputs, method, outputs, &in_place);
            }
            return py::make_tuple(result, in_place);
          },
          py::arg("inputs"), py::arg("method"), py::arg("outputs") = py::none());
}

}  // namespace et_tensorrt::python
