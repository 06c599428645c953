// Registry glue only: init parses the blob and builds the executor, execute binds and runs, destroy
// frees. No exception ever leaves these functions: ExecuTorch gets an Error and the message is logged
// and kept for the Python caller (last_delegate_error).
#include "backend_interface.h"

#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/platform/log.h>

#include <c10/util/Exception.h>

#include <exception>
#include <string>

#include "data_map_check.h"
#include "delegate_events.h"
#include "delegate_handle.h"
#include "named_data.h"

namespace et_tensorrt {
namespace {

using executorch::runtime::ArrayRef;
using executorch::runtime::BackendExecutionContext;
using executorch::runtime::BackendInitContext;
using executorch::runtime::CompileSpec;
using EtDelegateHandle = executorch::runtime::DelegateHandle;  // void: ExecuTorch's opaque handle type
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::FreeableBuffer;
using executorch::runtime::Result;
using executorch::runtime::Span;

Error report(const char* stage, const std::string& what, Error code) {
  set_last_delegate_error(std::string(kBackendId) + " " + stage + ": " + what);
  ET_LOG(Error, "%s %s: %s", kBackendId, stage, what.c_str());
  return code;
}

class TensorRTBackend final : public executorch::runtime::BackendInterface {
 public:
  bool is_available() const override { return true; }

  Result<EtDelegateHandle*> init(BackendInitContext& context, FreeableBuffer* processed,
                                 ArrayRef<CompileSpec> specs) const override {
    try {
      // The delegate takes the processed buffer itself (no copy); ExecuTorch's own FreeableBuffer is left empty.
      // Its engine and weights may be the program's named data (the .pte's, or a .ptd's): read from there.
      const InitSite site(context.get_method_name(), specs);  // named in its errors
      // Before anything asks the program's named data for a key: a .ptd's damaged key table would crash ExecuTorch.
      if (const std::string damaged = damaged_data_map(context.get_named_data_map()); !damaged.empty()) {
        return report("init",
                      "the program's data file (.ptd) is corrupt: its key table is damaged (" + damaged +
                          "), and ExecuTorch would read outside it; copy the .ptd again or save the model again",
                      Error::InvalidExternalData);
      }
      // States shared by the program's methods are keyed by the loaded program (program_scope.h).
      DelegatePhase phase(context.event_tracer());
      auto* handle = new et_tensorrt::DelegateHandle(std::move(*processed), context.get_named_data_map(),
                                                     context.get_method_name());
      if (phase.active()) {  // what init did: deserialized the engine, built it on the device, or loaded the fallback
        const ExecutorChoice& c = handle->choice();
        phase.end(init_event_name(compile_spec_int(specs, "et_tensorrt.partition_index"),
                                  compile_spec_int(specs, "et_tensorrt.partition_count")),
                  "executor=" + c.executor + (c.engine_origin.empty() ? "" : "; engine=" + c.engine_origin) +
                      (c.reason.empty() ? "" : "; reason=" + c.reason));
      }
      return handle;
    } catch (const BlobFormatError& e) {
      return report("init", e.what(), Error::DelegateInvalidCompatibility);
    } catch (const c10::Error& e) {  // torch's reason, not its C++ backtrace
      return report("init", e.what_without_backtrace(), Error::Internal);
    } catch (const std::exception& e) {
      return report("init", e.what(), Error::Internal);
    } catch (...) {
      return report("init", "unknown exception", Error::Internal);
    }
  }

  Error execute(BackendExecutionContext& context, EtDelegateHandle* handle, Span<EValue*> args) const override {
    try {
      static_cast<et_tensorrt::DelegateHandle*>(handle)->execute(args, context.event_tracer());
      return Error::Ok;
    } catch (const PlacementRejected& e) {
      return report("execute", e.what(), Error::InvalidArgument);
    } catch (const PlacementCountError& e) {
      return report("execute", e.what(), Error::InvalidArgument);
    } catch (const c10::Error& e) {
      return report("execute", e.what_without_backtrace(), Error::Internal);
    } catch (const std::exception& e) {
      return report("execute", e.what(), Error::Internal);
    } catch (...) {
      return report("execute", "unknown exception", Error::Internal);
    }
  }

  void destroy(EtDelegateHandle* handle) const override {
    try {
      delete static_cast<et_tensorrt::DelegateHandle*>(handle);
    } catch (...) {
      ET_LOG(Error, "%s destroy: exception while releasing a delegate", kBackendId);
    }
  }
};

}  // namespace

bool register_tensorrt_backend() {
  static TensorRTBackend backend;
  static const bool registered = [] {
    const Error err = executorch::runtime::register_backend({kBackendId, &backend});
    return err == Error::Ok;
  }();
  return registered;
}

}  // namespace et_tensorrt
