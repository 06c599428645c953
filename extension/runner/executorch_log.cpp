#include "executorch_log.h"

#include <executorch/runtime/platform/platform.h>

#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>

#include "../format/utf8.h"
#include "quiet_stderr.h"

namespace et_tensorrt {

void keep(char level, const char* message, size_t length);  // to this thread's ExecuTorchLogCapture, if any

namespace {

thread_local int t_quiet = 0;
thread_local std::deque<std::string> t_errors;  // the last kHeldErrors error lines while quiet
constexpr size_t kHeldErrors = 4;
thread_local ExecuTorchLogCapture* t_capture = nullptr;
pal_emit_log_message_method g_previous = nullptr;  // ExecuTorch's log function before ours

bool shown() {
  const char* value = std::getenv(kExecuTorchLogsEnv);
  return value != nullptr && std::strcmp(value, "1") == 0;
}

void emit(et_timestamp_t timestamp, et_pal_log_level_t level, const char* filename, const char* function, size_t line,
          const char* message, size_t length) {
  if (t_quiet > 0 && (level == kError || level == kFatal)) {
    t_errors.emplace_back(message, length);
    if (t_errors.size() > kHeldErrors) t_errors.pop_front();
  }
  keep(static_cast<char>(level), message, length);
  if (t_quiet > 0 && !shown()) return;
  if (g_previous == nullptr || message == nullptr) return;
  // ExecuTorch's Python bindings write each line to Python's stderr, which decodes it as UTF-8 and aborts the process
  // on a line that is not (FlatTensorDataMap quotes a damaged file's identifier bytes as they are).
  const std::string_view text(message, strnlen(message, length));
  if (valid_utf8(text)) {
    g_previous(timestamp, level, filename, function, line, message, length);
    return;
  }
  const std::string escaped = escape_invalid_utf8(text);
  g_previous(timestamp, level, filename, function, line, escaped.c_str(), escaped.size());
}

// In front of whatever log function ExecuTorch has now: installed on first use, and again when someone registered
// another since (ExecuTorch's Python bindings install theirs when they load, possibly after a Runner's first use).
void install() {
  static std::mutex mutex;
  const std::lock_guard<std::mutex> lock(mutex);
  const executorch::runtime::PalImpl* current = executorch::runtime::get_pal_impl();
  const pal_emit_log_message_method now = current != nullptr ? current->emit_log_message : nullptr;
  if (now == &emit) return;
  g_previous = now != nullptr ? now : &et_pal_emit_log_message;
  // register_pal logs that it replaced a log function: not before a Runner's error either.
  without_stderr([] { executorch::runtime::register_pal(executorch::runtime::PalImpl::create(&emit, __FILE__)); });
}

}  // namespace

void install_executorch_log_filter() { install(); }

void keep(char level, const char* message, size_t length) {
  if (t_capture != nullptr && message != nullptr) {
    t_capture->messages_.emplace_back(level, std::string(message, strnlen(message, length)));
  }
}

ExecuTorchLogCapture::ExecuTorchLogCapture() : previous_(t_capture) {
  install();
  t_capture = this;
}

ExecuTorchLogCapture::~ExecuTorchLogCapture() { t_capture = previous_; }

QuietExecuTorchLog::QuietExecuTorchLog() {
  install();
  if (t_quiet++ == 0) t_errors.clear();
}

QuietExecuTorchLog::~QuietExecuTorchLog() {
  if (--t_quiet == 0) t_errors.clear();  // held for the error thrown inside the block only
}

std::string held_executorch_errors() {
  std::string out;
  for (const std::string& line : t_errors) {
    if (!out.empty()) out += "; ";
    out += line;
  }
  return out;
}

}  // namespace et_tensorrt
