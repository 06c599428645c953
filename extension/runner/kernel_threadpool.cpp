#include "kernel_threadpool.h"

#include <dlfcn.h>

#include <mutex>

#include "quiet_stderr.h"

namespace et_tensorrt {
namespace {

// executorch::extension::threadpool::get_threadpool(): its header is not installed with the wheel.
constexpr const char* kGetThreadpool = "_ZN10executorch9extension10threadpool14get_threadpoolEv";

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
