#include "kernel_threadpool.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <mutex>

namespace et_tensorrt {
namespace {

// executorch::extension::threadpool::get_threadpool(): its header is not installed with the wheel.
constexpr const char* kGetThreadpool = "_ZN10executorch9extension10threadpool14get_threadpoolEv";

// Runs `call` with file descriptor 2 pointed at /dev/null, then restores it.
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

}  // namespace

void create_kernel_threadpool_quietly() {
  static std::once_flag once;
  std::call_once(once, [] {
    void* library = dlopen("libexecutorch_threadpool.so", RTLD_NOW | RTLD_NOLOAD);
    if (library == nullptr) return;
    using GetThreadpool = void* (*)();
    if (auto get = reinterpret_cast<GetThreadpool>(dlsym(library, kGetThreadpool))) without_stderr(get);
    dlclose(library);
  });
}

}  // namespace et_tensorrt
