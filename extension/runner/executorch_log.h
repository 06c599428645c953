// ExecuTorch's own log lines ("E 00:00:00.016 executorch:method.cpp:128] Init failed for backend ...") while a
// Runner loads or runs a program: held back, because the RunnerError that follows says what happened (its
// delegate's message included). ET_TENSORRT_EXECUTORCH_LOGS=1 (`et-tensorrt --debug` sets it) shows them. Only the
// thread inside a Runner call is quieted: ExecuTorch's own runtime (executorch.runtime) logs as before.
#pragma once

namespace et_tensorrt {

constexpr const char* kExecuTorchLogsEnv = "ET_TENSORRT_EXECUTORCH_LOGS";

// While one lives on this thread, ExecuTorch's log lines from this thread are dropped (unless kExecuTorchLogsEnv
// is 1). It installs the filter in ExecuTorch's platform layer, in front of the log function it has, unless it is
// there already.
class QuietExecuTorchLog {
 public:
  QuietExecuTorchLog();
  ~QuietExecuTorchLog();
  QuietExecuTorchLog(const QuietExecuTorchLog&) = delete;
  QuietExecuTorchLog& operator=(const QuietExecuTorchLog&) = delete;
};

}  // namespace et_tensorrt
