// Runs a call with file descriptor 2 pointed at /dev/null, then restores it: for native code that writes to stderr
// on its own (ExecuTorch's threadpool's cpuinfo lines, register_pal's notice that it replaced a log function).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>

namespace et_tensorrt {

template <typename Call>
void without_stderr(Call call) {
  std::fflush(stderr);
  const int saved = dup(2);
  const int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
  const bool redirected = saved >= 0 && devnull >= 0 && dup2(devnull, 2) >= 0;
  call();
  std::fflush(stderr);
  if (redirected) dup2(saved, 2);
  if (saved >= 0) close(saved);
  if (devnull >= 0) close(devnull);
}

}  // namespace et_tensorrt
