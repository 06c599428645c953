#include "pointer_residence.h"

#include <dlfcn.h>
#include <link.h>

#include <atomic>

namespace et_tensorrt {
namespace {

// The two driver entry points we need, typed by hand so no CUDA headers are required to build.
using CuPointerGetAttribute = int (*)(void* data, int attribute, unsigned long long ptr);
constexpr int kAttrMemoryType = 2;     // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
constexpr int kAttrDeviceOrdinal = 9;  // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
constexpr int kInvalidValue = 1;       // CUDA_ERROR_INVALID_VALUE
constexpr unsigned kMemoryTypeHost = 1, kMemoryTypeDevice = 2, kMemoryTypeUnified = 4;

// How many shared objects this process has loaded so far (glibc's dlpi_adds), read from the first entry only.
unsigned long long libraries_loaded() {
  unsigned long long adds = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        *static_cast<unsigned long long*>(data) = info->dlpi_adds;
        return 1;  // one entry is enough: the counter is process-wide
      },
      &adds);
  return adds;
}

// Looked up again until found: a process may run a host-only program before torch initializes CUDA (and
// loads the driver); caching that first "absent" would switch the check off for the process's lifetime.
// But only when a library was loaded since the last look: dlopen on every delegate argument costs tens of
// microseconds in a process with many libraries, the counter tens of nanoseconds.
CuPointerGetAttribute driver_entry() {
  static std::atomic<CuPointerGetAttribute> entry{nullptr};
  static std::atomic<unsigned long long> looked_at{0};
  CuPointerGetAttribute found = entry.load(std::memory_order_acquire);
  if (found != nullptr) return found;
  const unsigned long long loaded = libraries_loaded();
  if (looked_at.exchange(loaded, std::memory_order_acq_rel) == loaded) return nullptr;
  if (void* lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD)) {
    found = reinterpret_cast<CuPointerGetAttribute>(dlsym(lib, "cuPointerGetAttribute"));
    dlclose(lib);  // NOLOAD took a reference to a library that stays loaded
    entry.store(found, std::memory_order_release);
  }
  return found;
}

}  // namespace

PointerResidence pointer_residence(const void* ptr) {
  CuPointerGetAttribute get = driver_entry();
  if (get == nullptr || ptr == nullptr) {
    return {};
  }
  unsigned memory_type = 0;
  const int status = get(&memory_type, kAttrMemoryType, reinterpret_cast<unsigned long long>(ptr));
  if (status == kInvalidValue) {
    // Pageable host memory is unknown to the driver: CUDA_ERROR_INVALID_VALUE means host.
    return {PointerResidence::Host, 0};
  }
  if (status != 0) {
    return {};  // e.g. the driver is not initialized: no answer, keep the label
  }
  if (memory_type == kMemoryTypeDevice || memory_type == kMemoryTypeUnified) {
    int ordinal = 0;
    get(&ordinal, kAttrDeviceOrdinal, reinterpret_cast<unsigned long long>(ptr));
    return {PointerResidence::Device, ordinal};
  }
  return {memory_type == kMemoryTypeHost ? PointerResidence::Host : PointerResidence::Unknown, 0};
}

}  // namespace et_tensorrt
