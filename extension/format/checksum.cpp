#include "checksum.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <thread>
#include <vector>

namespace et_tensorrt {
namespace {

constexpr size_t kPartBytes = 32u << 20;     // the smallest part a thread takes
constexpr size_t kParallelFrom = 64u << 20;  // below this one thread: starting threads costs more than it saves
constexpr unsigned kMaxThreads = 8;

uint32_t crc32_serial(const uint8_t* data, size_t size) {
  return static_cast<uint32_t>(crc32_z(crc32_z(0L, Z_NULL, 0), data, size));
}

}  // namespace

uint32_t crc32_of(const uint8_t* data, size_t size) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const size_t threads = std::min<size_t>({cores, kMaxThreads, size / kPartBytes});
  if (size < kParallelFrom || threads < 2) return crc32_serial(data, size);
  const size_t part = (size + threads - 1) / threads;
  std::vector<uint32_t> crcs(threads);
  std::vector<std::thread> workers;
  workers.reserve(threads - 1);
  for (size_t i = 1; i < threads; ++i) {
    const size_t start = i * part;
    workers.emplace_back(
        [&crcs, i, data, start, size, part] { crcs[i] = crc32_serial(data + start, std::min(part, size - start)); });
  }
  crcs[0] = crc32_serial(data, part);
  for (std::thread& w : workers) w.join();
  uLong crc = crcs[0];
  for (size_t i = 1; i < threads; ++i) {
    const size_t start = i * part;
    crc = crc32_combine(crc, crcs[i], static_cast<z_off_t>(std::min(part, size - start)));
  }
  return static_cast<uint32_t>(crc);
}

std::string hex32(uint32_t value) {
  char text[11];
  std::snprintf(text, sizeof(text), "0x%08x", value);
  return text;
}

}  // namespace et_tensorrt
