#include "data_file_check.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>

#include "../format/flat_tensor_table.h"
#include "program_runner.h"

namespace et_tensorrt {
namespace {

// ExecuTorch's FlatTensor file: u32 root offset, "FT01" (the flatbuffer's identifier), then at offset 8 the header
// "FH01", u32 header length, u64 flatbuffer offset, u64 flatbuffer size, u64 segment base offset, u64 segment data
// size (extension/flat_tensor/serialize/flat_tensor_header.h). All little-endian.
constexpr size_t kHeadBytes = 48;
constexpr uint64_t kMaxKeyTableBytes = 256u << 20;  // a real one holds a few hundred bytes per key

uint64_t u64_at(const char* head, size_t offset) {
  uint64_t value;
  std::memcpy(&value, head + offset, sizeof(value));
  return value;
}

}  // namespace

std::set<std::string> data_file_keys(const std::string& data_path, const std::string& program) {
  const std::string prefix = "cannot load data file " + data_path + " for " + program + ": ";
  std::ifstream f(data_path, std::ios::binary | std::ios::ate);
  if (!f) throw RunnerError(prefix + "it cannot be opened");
  const uint64_t size = static_cast<uint64_t>(f.tellg());
  char head[kHeadBytes] = {};
  f.seekg(0);
  f.read(head, kHeadBytes);
  if (size < kHeadBytes || std::memcmp(head + 4, "FT01", 4) != 0 || std::memcmp(head + 8, "FH01", 4) != 0) {
    throw RunnerError(prefix + "it is not an ExecuTorch data file (.ptd): it has no FlatTensor header (" +
                      std::to_string(size) + " bytes)");
  }
  const uint64_t flatbuffer_offset = u64_at(head, 16), flatbuffer_size = u64_at(head, 24);
  const uint64_t segment_base = u64_at(head, 32), segment_size = u64_at(head, 40);
  if (flatbuffer_size > UINT64_MAX - flatbuffer_offset || segment_size > UINT64_MAX - segment_base) {
    throw RunnerError(prefix +
                      "its header is corrupt (its sizes overflow); copy the .ptd again or save the model again");
  }
  const uint64_t declared = std::max(flatbuffer_offset + flatbuffer_size, segment_base + segment_size);
  if (size < declared) {
    throw RunnerError(prefix + "it is truncated (its header declares " + std::to_string(declared) +
                      " bytes, the file has " + std::to_string(size) +
                      "); copy the .ptd again or save the model again");
  }
  // ExecuTorch reads the key table without verifying it (a flipped byte there crashes FlatTensorDataMap): walk it
  // bounds-checked first, every field ExecuTorch's data map reads.
  if (flatbuffer_offset + flatbuffer_size > kMaxKeyTableBytes) {
    throw RunnerError(prefix + "its header declares a key table of " +
                      std::to_string(flatbuffer_offset + flatbuffer_size) +
                      " bytes (more than 256 MiB): the file is corrupt; copy the .ptd again or save the model again");
  }
  std::string table(static_cast<size_t>(flatbuffer_offset + flatbuffer_size), '\0');
  f.clear();
  f.seekg(0);
  f.read(table.data(), static_cast<std::streamsize>(table.size()));
  std::set<std::string> keys;
  const std::string problem = flat_tensor_table_problem(reinterpret_cast<const uint8_t*>(table.data()), table.size(),
                                                        segment_base, size, &keys);
  if (!problem.empty()) {
    throw RunnerError(prefix + "its key table is damaged (" + problem +
                      "): the file is corrupt; copy the .ptd again or save the model again");
  }
  return keys;
}

}  // namespace et_tensorrt
