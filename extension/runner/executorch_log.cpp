#include "executorch_log.h"

#include <executorch/runtime/platform/platform.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

namespace et_tensorrt {
namespace {

thread_local int t_quiet = 0;
pal_emit_log_message_method g_previous = nullptr;  // ExecuTorch's log function before ours

bool shown() {
  const char* value = std::getenv(kExecuTorchLogsEnv);
  return value != nullptr && std::strcmp(value, "1") == 0;
}

void emit(et_timestamp_t timestamp, et_pal_log_level_t level, const char* filename, const char* function, size_t line,
          const char* message, size_t length) {
  if (t_quiet > 0 && !shown()) return;
  if (g_previous != nullptr) g_previous(timestamp, level, filename, function, line, message, length);
}

void install() {
  static std::once_flag once;
  std::call_once(once, [] {
    const executorch::runtime::PalImpl* current = executorch::runtime::get_pal_impl();
    g_previous = current != nullptr && current->emit_log_message != nullptr ? current->emit_log_message
                                                                            : &et_pal_emit_log_message;
    executorch::runtime::register_pal(executorch::runtime::PalImpl::create(&emit, __FILE__));
  });
}

}  // namespace

QuietExecuTorchLog::QuietExecuTorchLog() {
  install();
  ++t_quiet;
}

QuietExecuTorchLog::~QuietExecuTorchLog() { --t_quiet; }

}  // namespace et_tensorrt
