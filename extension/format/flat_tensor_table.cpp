#include "flat_tensor_table.h"

#include "flatbuffer_view.h"

namespace et_tensorrt {
namespace {

// flat_tensor.fbs (declaration order): FlatTensor {version, segments, named_data}, DataSegment {offset, size},
// NamedData {key, segment_index, tensor_layout}, TensorLayout {scalar_type, sizes: [int32], dim_order: [uint8]}.
constexpr int kVersion = 0, kSegments = 1, kNamedData = 2;
constexpr int kSegmentOffset = 0, kSegmentSize = 1;
constexpr int kKey = 0, kSegmentIndex = 1, kTensorLayout = 2;
constexpr int kLayoutScalarType = 0, kLayoutSizes = 1, kLayoutDimOrder = 2;

}  // namespace

std::string flat_tensor_table_problem(const uint8_t* data, size_t size, uint64_t segment_base, uint64_t file_size,
                                      std::set<std::string>* keys) {
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
      // ExecuTorch's get_tensor_layout reads both lists unchecked, and one dim order entry per size.
      const auto n_sizes = sizes ? fb.scalars(*sizes, 4) : std::nullopt;
      const auto n_order = order ? fb.scalars(*order, 1) : std::nullopt;
      const auto type_at = layout ? fb.field(*layout, kLayoutScalarType) : std::nullopt;
      const bool type_ok = layout && (!type_at || fb.read<int8_t>(*type_at));
      if (!n_sizes || !n_order || *n_order < *n_sizes || !type_ok) return what + " has a damaged tensor layout";
    }
    if (keys != nullptr) keys->insert(*key);
  }
  return "";
}

}  // namespace et_tensorrt
