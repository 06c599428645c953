#include "data_file_check.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>

#include "flatbuffer_view.h"
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

// flat_tensor.fbs (declaration order): FlatTensor {version, segments, named_data}, DataSegment {offset, size},
// NamedData {key, segment_index, tensor_layout}, TensorLayout {scalar_type, sizes: [int32], dim_order: [uint8]}.
constexpr int kVersion = 0, kSegments = 1, kNamedData = 2;
constexpr int kSegmentOffset = 0, kSegmentSize = 1;
constexpr int kKey = 0, kSegmentIndex = 1, kTensorLayout = 2;
constexpr int kLayoutScalarType = 0, kLayoutSizes = 1, kLayoutDimOrder = 2;

// What is wrong with the key table `fb` ("" when nothing), its keys into `keys`. Segments must lie inside the file
// (`file_size`, from `segment_base`), each entry must name one.
std::string key_table_problem(const uint8_t* data, size_t size, uint64_t segment_base, uint64_t file_size,
                              std::set<std::string>& keys) {
  const Flatbuffer fb(data, size);
  const auto root = fb.root();
  if (!root || !fb.whole_table(*root)) return "its root lies outside it";
  const auto version_at = fb.field(*root, kVersion);
  if (version_at && !fb.read<uint32_t>(*version_at)) return "its version lies outside it";
  const auto segments = fb.deref_field(*root, kSegments);
  const auto named = fb.deref_field(*root, kNamedData);
  if (!segments || !named) return "no segment or key list";
  const auto n_segments = fb.length(*segments);
  const auto n_named = fb.length(*named);
  if (!n_segments || !n_named) return "a list ends past it";
  for (uint32_t i = 0; i < *n_segments; ++i) {
    const auto segment = fb.follow(*segments + 4 + 4 * static_cast<size_t>(i));
    const auto offset_at = segment ? fb.field(*segment, kSegmentOffset) : std::nullopt;
    const auto size_at = segment ? fb.field(*segment, kSegmentSize) : std::nullopt;
    const auto offset = offset_at ? fb.read<uint64_t>(*offset_at) : std::optional<uint64_t>(0);
    const auto bytes = size_at ? fb.read<uint64_t>(*size_at) : std::optional<uint64_t>(0);
    if (!segment || !fb.whole_table(*segment) || !offset || !bytes)
      return "segment " + std::to_string(i) + " is damaged";
    if (*offset > file_size || *bytes > file_size - *offset || segment_base > file_size - *offset - *bytes) {
      return "segment " + std::to_string(i) + " ends past the file";
    }
  }
  for (uint32_t i = 0; i < *n_named; ++i) {
    const std::string what = "entry " + std::to_string(i);
    auto entry = fb.follow(*named + 4 + 4 * static_cast<size_t>(i));
    if (entry && !fb.whole_table(*entry)) entry = std::nullopt;
    const auto key_at = entry ? fb.deref_field(*entry, kKey) : std::nullopt;
    const auto key = key_at ? fb.string(*key_at) : std::nullopt;
    if (!key) return what + " has no readable key";
    const auto index_at = fb.field(*entry, kSegmentIndex);
    const auto index = index_at ? fb.read<uint32_t>(*index_at) : std::optional<uint32_t>(0);
    if (!index || *index >= *n_segments) return what + " names no segment";
    if (fb.field(*entry, kTensorLayout)) {
      auto layout = fb.deref_field(*entry, kTensorLayout);
      if (layout && !fb.whole_table(*layout)) layout = std::nullopt;
      const auto sizes = layout ? fb.deref_field(*layout, kLayoutSizes) : std::nullopt;
      const auto order = layout ? fb.deref_field(*layout, kLayoutDimOrder) : std::nullopt;
      const bool sizes_ok = layout && (!fb.field(*layout, kLayoutSizes) || (sizes && fb.scalars(*sizes, 4)));
      const bool order_ok = layout && (!fb.field(*layout, kLayoutDimOrder) || (order && fb.scalars(*order, 1)));
      const auto type_at = layout ? fb.field(*layout, kLayoutScalarType) : std::nullopt;
      const bool type_ok = layout && (!type_at || fb.read<int8_t>(*type_at));
      if (!sizes_ok || !order_ok || !type_ok) return what + " has a damaged tensor layout";
    }
    keys.insert(*key);
  }
  return "";
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
  const std::string problem =
      key_table_problem(reinterpret_cast<const uint8_t*>(table.data()), table.size(), segment_base, size, keys);
  if (!problem.empty()) {
    throw RunnerError(prefix + "its key table is damaged (" + problem +
                      "): the file is corrupt; copy the .ptd again or save the model again");
  }
  return keys;
}

}  // namespace et_tensorrt
