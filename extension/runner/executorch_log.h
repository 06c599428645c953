// ExecuTorch's own log lines ("E 00:00:00.016 executorch:method.cpp:128] Init failed for backend ...") while a
// Runner loads or runs a program: held back, because the RunnerError that follows says what happened (its
// delegate's message included). ET_TENSORRT_EXECUTORCH_LOGS=1 (`et-tensorrt --debug` sets it) shows them. Only the
// thread inside a Runner call is quieted: ExecuTorch's own runtime (executorch.runtime) logs as before.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace et_tensorrt {

constexpr const char* kExecuTorchLogsEnv = "ET_TENSORRT_EXECUTORCH_LOGS";

// While one lives on this thread, ExecuTorch's log lines from this thread are dropped (unless kExecuTorchLogsEnv
// is 1); its error lines are kept for the error that follows (held_executorch_errors). It installs the filter in
// ExecuTorch's platform layer, in front of the log function it has, unless it is there already.
class QuietExecuTorchLog {
 public:
  QuietExecuTorchLog();
  ~QuietExecuTorchLog();
  QuietExecuTorchLog(const QuietExecuTorchLog&) = delete;
  QuietExecuTorchLog& operator=(const QuietExecuTorchLog&) = delete;
};

// Puts the filter in front of the log function ExecuTorch has now, unless it is there already. Each log line then
// reaches that function as UTF-8 (ExecuTorch's Python bindings abort the process on a line that is not), from every
// thread; only threads inside a QuietExecuTorchLog are quieted.
void install_executorch_log_filter();

// ExecuTorch's last error lines logged on this thread since the outermost QuietExecuTorchLog began ("constant_buffer
// path is disabled ...; Failed parsing tensor at index 0: 0x23"), joined by "; "; empty when there were none.
std::string held_executorch_errors();

// While one lives on this thread, what ExecuTorch logs from this thread is also kept here, with its level ('E'
// error, 'I' info, ...): ExecuTorch's Python bindings print log lines without their level ("[file.cpp:153] ..."),
// so a caller reading stderr cannot tell a runner's reason for failing from its info lines. Shown as before.
class ExecuTorchLogCapture {
 public:
  ExecuTorchLogCapture();  // installs the filter (as QuietExecuTorchLog does) and itself on this thread
  ~ExecuTorchLogCapture();
  ExecuTorchLogCapture(const ExecuTorchLogCapture&) = delete;
  ExecuTorchLogCapture& operator=(const ExecuTorchLogCapture&) = delete;

  const std::vector<std::pair<char, std::string>>& messages() const { return messages_; }

 private:
  friend void keep(char level, const char* message, size_t length);
  std::vector<std::pair<char, std::string>> messages_;
  ExecuTorchLogCapture* previous_;
};

}  // namespace et_tensorrt
