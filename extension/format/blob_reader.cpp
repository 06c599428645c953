#include "blob_reader.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <string_view>

#include "checksum.h"
#include "utf8.h"

namespace et_tensorrt {
namespace {

constexpr size_t kHeaderSize = 32;
constexpr size_t kSectionEntrySize = 24;
constexpr uint32_t kMaxSections = 16;
constexpr uint16_t kMaxRank = 16;
constexpr uint16_t kFlagState = 1;      // header flag bit 0: the blob has a STATE section
constexpr uint16_t kFlagNamedData = 2;  // header flag bit 1: the blob has a NAMED_DATA section
enum SectionKind : uint32_t {
  kIoTable = 1,
  kEngine = 2,
  kProgram = 3,  // version 1 only
  kMetadata = 4,
  kGraph = 5,         // version 2 on
  kWeights = 6,       // version 2 on
  kRefitMap = 7,      // version 2 on: a weight-stripped ENGINE's recipes over WEIGHTS
  kState = 8,         // version 2 on: the state tensors the delegate owns (et_tensorrt/format/state_table.py)
  kDigests = 9,       // version 3 on: a CRC-32 of every other section, checked before any of them is read
  kRecipe = 10,       // version 2 on: how to build the engine on the device (et_tensorrt/format/recipe.py)
  kNamedData = 11,    // version 2 on: the ENGINE / WEIGHTS data that is ExecuTorch named data, by key
  kInputGuards = 12,  // version 2 on: what the program requires of its arguments beyond their ranges
};
constexpr size_t kWeightEntryFixedSize = 24;

[[noreturn]] void fail(const std::string& what) {
  throw BlobFormatError("delegate blob: " + what + " (re-lower the model with this et_tensorrt version)");
}

// Bounds-checked little-endian reads from one region.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size, const char* region) : data_(data), size_(size), region_(region) {}

  template <typename T>
  T read() {
    T value;
    need(sizeof(T));
    std::memcpy(&value, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }
  std::string read_string(size_t n) {
    need(n);
    std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }
  void skip(size_t n) {
    need(n);
    pos_ += n;
  }
  size_t remaining() const { return size_ - pos_; }
  size_t position() const { return pos_; }

  // A table's head (u32 count, u32 reserved): the count, refused when the rest cannot hold that many entries of
  // at least `entry_size` bytes (a corrupt count must not size an allocation).
  uint32_t read_table_head(size_t entry_size, const char* holds = "it holds") {
    const uint32_t count = read<uint32_t>();
    if (read<uint32_t>() != 0) fail(std::string(region_) + " reserved field is not zero");
    if (count > remaining() / entry_size) {
      fail(std::string(region_) + " declares " + std::to_string(count) + " entries, more than " + holds +
           " (truncated)");
    }
    return count;
  }

 private:
  void need(size_t n) const {
    if (n > size_ - pos_) {
      fail(std::string(region_) + " ends early (truncated)");
    }
  }
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  const char* region_;
};

EtDevice read_device(int8_t type, int8_t index, const std::string& what) {
  if (type != static_cast<int8_t>(EtDeviceType::CPU) && type != static_cast<int8_t>(EtDeviceType::CUDA)) {
    fail(what + " has unknown device type " + std::to_string(type));
  }
  if (index < 0) {
    fail(what + " has negative device index");
  }
  return EtDevice(static_cast<EtDeviceType>(type), index);
}

IoEntry read_entry(Reader& r, uint32_t i) {
  const std::string what = "I/O entry " + std::to_string(i);
  IoEntry e;
  const uint8_t role = r.read<uint8_t>();
  if (role > 2) {
    fail(what + " has unknown role " + std::to_string(role));
  }
  e.role = static_cast<IoRole>(role);
  const uint8_t dtype = r.read<uint8_t>();
  if (dtype > static_cast<uint8_t>(EtScalarType::UInt64)) {
    fail(what + " has unknown dtype code " + std::to_string(dtype));
  }
  e.dtype = static_cast<EtScalarType>(dtype);
  const int8_t device_type = r.read<int8_t>();
  const int8_t device_index = r.read<int8_t>();
  e.recorded_device = read_device(device_type, device_index, what);
  const uint16_t name_len = r.read<uint16_t>();
  const uint16_t rank = r.read<uint16_t>();
  if (rank > kMaxRank) {
    fail(what + " has rank " + std::to_string(rank) + " > 16");
  }
  e.name = r.read_string(name_len);
  if (!valid_utf8(e.name)) {
    fail(what + " has a name that is not UTF-8");
  }
  e.dims.reserve(rank);
  for (uint16_t d = 0; d < rank; ++d) {
    DimRange range{r.read<int64_t>(), r.read<int64_t>(), r.read<int64_t>()};
    if (range.min < 0 || range.opt < range.min || (range.max != -1 && range.max < range.opt)) {
      fail(what + " dim " + std::to_string(d) + " has an invalid range");
    }
    e.dims.push_back(range);
  }
  if (e.is_size() && (rank != 1 || e.dtype != EtScalarType::Long)) {
    fail(what + " is a size with rank " + std::to_string(rank) + " and dtype code " +
         std::to_string(static_cast<int>(e.dtype)) + ": a size needs rank 1 (its value range) and dtype int64");
  }
  return e;
}

// Element size of a dtype WEIGHTS may hold: plain numeric types torch can view raw bytes as
// (quantized and bit-packed codes are refused; 0 means refused).
size_t weight_element_size(EtScalarType dtype) {
  switch (dtype) {
    case EtScalarType::Byte:
    case EtScalarType::Char:
    case EtScalarType::Bool:
    case EtScalarType::Float8_e5m2:
    case EtScalarType::Float8_e4m3fn:
    case EtScalarType::Float8_e5m2fnuz:
    case EtScalarType::Float8_e4m3fnuz:
      return 1;
    case EtScalarType::Short:
    case EtScalarType::Half:
    case EtScalarType::BFloat16:
    case EtScalarType::UInt16:
      return 2;
    case EtScalarType::Int:
    case EtScalarType::Float:
    case EtScalarType::UInt32:
    case EtScalarType::ComplexHalf:
      return 4;
    case EtScalarType::Long:
    case EtScalarType::Double:
    case EtScalarType::UInt64:
    case EtScalarType::ComplexFloat:
      return 8;
    case EtScalarType::ComplexDouble:
      return 16;
    default:
      return 0;
  }
}

// Bytes the sizes and strides address: (1 + sum((size - 1) * stride)) * element size, 0 when a size is 0.
// Every step is overflow-checked; an overflow is a damaged entry.
uint64_t addressed_bytes(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides, size_t element,
                         const std::string& what) {
  unsigned __int128 span = 1, numel = 1;
  constexpr unsigned __int128 kLimit = static_cast<unsigned __int128>(INT64_MAX);
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] < 0 || strides[d] < 0) {
      fail(what + " has a negative size or stride");
    }
    if (sizes[d] == 0) return 0;
    span += static_cast<unsigned __int128>(sizes[d] - 1) * static_cast<unsigned __int128>(strides[d]);
    numel *= static_cast<unsigned __int128>(sizes[d]);
    if (span > kLimit || numel > kLimit) {
      fail(what + " addresses more than 2^63 elements");
    }
  }
  const unsigned __int128 bytes = span * element;
  if (bytes > kLimit) fail(what + " addresses more than 2^63 bytes");
  return static_cast<uint64_t>(bytes);
}

// WEIGHTS: u32 count, u32 reserved, count entries, then (64-aligned) data. Offsets in the file are from
// the start of this payload; the result holds them from the start of the blob.
std::vector<WeightEntry> read_weights(const ByteSpan& section, size_t section_offset, const std::set<uint32_t>& named) {
  if (section_offset % kWeightAlignment != 0) {
    fail("WEIGHTS section is not 64-byte aligned in the blob");
  }
  Reader r(section.data, section.size, "WEIGHTS");
  const uint32_t count = r.read_table_head(kWeightEntryFixedSize, "its table can hold");
  std::vector<WeightEntry> entries;
  entries.reserve(count);
  std::set<std::string> names;
  for (uint32_t i = 0; i < count; ++i) {
    const std::string what = "WEIGHTS entry " + std::to_string(i);
    WeightEntry w;
    const uint8_t kind = r.read<uint8_t>();
    if (kind > static_cast<uint8_t>(WeightKind::Constant)) fail(what + " has unknown kind " + std::to_string(kind));
    w.kind = static_cast<WeightKind>(kind);
    const uint8_t dtype = r.read<uint8_t>();
    const size_t element =
        dtype <= static_cast<uint8_t>(EtScalarType::UInt64) ? weight_element_size(static_cast<EtScalarType>(dtype)) : 0;
    if (element == 0) fail(what + " has a dtype code (" + std::to_string(dtype) + ") weights cannot hold");
    w.dtype = static_cast<EtScalarType>(dtype);
    const uint8_t rank = r.read<uint8_t>();
    if (rank > kMaxRank) fail(what + " has rank " + std::to_string(rank) + " > 16");
    const uint8_t flags = r.read<uint8_t>();
    if (flags & ~1u) fail(what + " has unknown flags");
    w.persistent = (flags & 1u) != 0;
    const uint16_t name_len = r.read<uint16_t>();
    if (r.read<uint16_t>() != 0) fail(what + " reserved field is not zero");
    const uint64_t offset = r.read<uint64_t>();
    w.nbytes = r.read<uint64_t>();
    w.name = r.read_string(name_len);
    if (w.name.empty() || !valid_utf8(w.name)) fail(what + " has an empty or non-UTF-8 name");
    if (!names.insert(w.name).second) fail(what + " repeats the name '" + w.name + "'");
    w.sizes.resize(rank);
    w.strides.resize(rank);
    for (auto& s : w.sizes) s = r.read<int64_t>();
    for (auto& s : w.strides) s = r.read<int64_t>();
    const uint64_t expected = addressed_bytes(w.sizes, w.strides, element, what + " ('" + w.name + "')");
    if (w.nbytes != expected) {
      fail(what + " ('" + w.name + "') holds " + std::to_string(w.nbytes) +
           " bytes but its sizes, strides and dtype "
           "address " +
           std::to_string(expected));
    }
    if (offset % kWeightAlignment != 0) fail(what + " ('" + w.name + "') data is not 64-byte aligned");
    entries.push_back(std::move(w));
    entries.back().offset = offset;  // checked against the data region below, once the table's end is known
  }
  const size_t table_end = r.position();
  for (size_t i = 0; i < entries.size(); ++i) {
    WeightEntry& w = entries[i];
    if (named.count(static_cast<uint32_t>(i))) {  // its bytes are named data: nothing of it in the payload
      if (w.offset != 0)
        fail("WEIGHTS entry " + std::to_string(i) + " ('" + w.name + "') is named data but has an offset");
      w.named = true;
      continue;
    }
    if (w.nbytes == 0 ? w.offset != 0
                      : (w.offset < table_end || w.offset > section.size || w.nbytes > section.size - w.offset)) {
      fail("WEIGHTS entry " + std::to_string(i) + " ('" + w.name + "') data lies outside the WEIGHTS data region" +
           (w.nbytes == 0 ? " (an empty entry's offset is 0)" : ""));
    }
    w.offset += section_offset;
  }
  return entries;
}

// NAMED_DATA: u32 count, u32 layout, entries (u8 target, u8 reserved, u16 key_len, u32 index, u64 nbytes, in layout 1
// u32 crc32 and u32 reserved, key). Layout 0 (written before the CRC-32s were recorded) is still read, unchecked.
constexpr size_t kNamedEntryFixedSize = 16;
constexpr uint32_t kNamedLayoutCrc32 = 1;

std::vector<NamedDataEntry> read_named_data(const ByteSpan& section) {
  Reader r(section.data, section.size, "NAMED_DATA");
  const uint32_t count = r.read<uint32_t>();
  const uint32_t layout = r.read<uint32_t>();
  if (layout > kNamedLayoutCrc32) fail("NAMED_DATA has layout " + std::to_string(layout) + ", which is not known");
  const size_t entry_size = kNamedEntryFixedSize + (layout == kNamedLayoutCrc32 ? 8 : 0);
  if (count > r.remaining() / entry_size) {
    fail("NAMED_DATA declares " + std::to_string(count) + " entries, more than it holds (truncated)");
  }
  std::vector<NamedDataEntry> entries;
  std::set<std::pair<uint8_t, uint32_t>> targets;
  for (uint32_t i = 0; i < count; ++i) {
    const std::string what = "NAMED_DATA entry " + std::to_string(i);
    NamedDataEntry e;
    const uint8_t target = r.read<uint8_t>();
    if (target > static_cast<uint8_t>(NamedTarget::Weight))
      fail(what + " has unknown target " + std::to_string(target));
    e.target = static_cast<NamedTarget>(target);
    if (r.read<uint8_t>() != 0) fail(what + " reserved field is not zero");
    const uint16_t key_len = r.read<uint16_t>();
    e.index = r.read<uint32_t>();
    e.nbytes = r.read<uint64_t>();
    if (layout == kNamedLayoutCrc32) {
      e.has_crc32 = true;
      e.crc32 = r.read<uint32_t>();
      if (r.read<uint32_t>() != 0) fail(what + " reserved field is not zero");
    }
    e.key = r.read_string(key_len);
    if (e.key.empty() || !valid_utf8(e.key)) fail(what + " has an empty or non-UTF-8 key");
    if (e.target == NamedTarget::Engine && e.index != 0) fail(what + " (the engine) has an index");
    if (!targets.insert({target, e.index}).second) {
      fail(what + (e.target == NamedTarget::Engine ? " names the engine again"
                                                   : " names WEIGHTS entry " + std::to_string(e.index) + " again"));
    }
    entries.push_back(std::move(e));
  }
  if (r.remaining() != 0) fail("NAMED_DATA has trailing bytes");
  return entries;
}

// REFIT_MAP: u32 count, u32 reserved, entries (u16 name_len, u8 dtype, u8 rank, u16 step_count, u16 reserved,
// name, rank x i64 sizes, steps), then RAW data. Each step: u8 op, u8 argument, u16 reserved, operands.
constexpr uint16_t kMaxRefitSteps = 64;

// `region` names the map in errors: "REFIT_MAP", or "RECIPE map" (the same encoding inside a RECIPE).
std::vector<RefitEntry> read_refit_map(const ByteSpan& section, size_t weight_count, const char* region) {
  Reader r(section.data, section.size, region);
  const std::string name = region;
  const uint32_t count = r.read_table_head(8);
  auto weight_index = [&](const std::string& what) {
    const uint32_t i = r.read<uint32_t>();
    if (i >= weight_count)
      fail(what + " names WEIGHTS entry " + std::to_string(i) + " of " + std::to_string(weight_count));
    return i;
  };
  std::vector<RefitEntry> entries;
  entries.reserve(count);
  std::set<std::string> names;
  std::vector<std::pair<size_t, size_t>> raw;  // (entry, step) of RAW steps, checked once the table's end is known
  for (uint32_t i = 0; i < count; ++i) {
    std::string what = name + " entry " + std::to_string(i);
    RefitEntry e;
    const uint16_t name_len = r.read<uint16_t>();
    const uint8_t dtype = r.read<uint8_t>();
    if (dtype > static_cast<uint8_t>(EtScalarType::UInt64) ||
        weight_element_size(static_cast<EtScalarType>(dtype)) == 0) {
      fail(what + " has a dtype code (" + std::to_string(dtype) + ") weights cannot hold");
    }
    e.dtype = static_cast<EtScalarType>(dtype);
    const uint8_t rank = r.read<uint8_t>();
    if (rank > kMaxRank) fail(what + " has rank " + std::to_string(rank) + " > 16");
    const uint16_t step_count = r.read<uint16_t>();
    if (step_count == 0 || step_count > kMaxRefitSteps)
      fail(what + " has " + std::to_string(step_count) + " steps (1 to 64)");
    if (r.read<uint16_t>() != 0) fail(what + " reserved field is not zero");
    e.name = r.read_string(name_len);
    if (e.name.empty() || !valid_utf8(e.name)) fail(what + " has an empty or non-UTF-8 name");
    if (!names.insert(e.name).second) fail(what + " repeats the name '" + e.name + "'");
    what += " ('" + e.name + "')";
    e.sizes.resize(rank);
    for (auto& n : e.sizes) n = r.read<int64_t>();
    // The entry's dense size: the row-major strides of its sizes make addressed_bytes() the element count.
    std::vector<int64_t> dense(rank, 1);
    for (int d = static_cast<int>(rank) - 2; d >= 0; --d) {
      const unsigned __int128 step =
          static_cast<unsigned __int128>(dense[d + 1]) * std::max<int64_t>(e.sizes[d + 1], 1);
      if (step > static_cast<unsigned __int128>(INT64_MAX)) fail(what + " addresses more than 2^63 elements");
      dense[d] = static_cast<int64_t>(step);
    }
    const uint64_t entry_bytes =
        addressed_bytes(e.sizes, dense, weight_element_size(e.dtype), what);  // checks sizes >= 0, overflow
    int depth = 0;
    for (uint16_t k = 0; k < step_count; ++k) {
      RefitStep st;
      const uint8_t op = r.read<uint8_t>();
      const uint8_t arg = r.read<uint8_t>();
      if (r.read<uint16_t>() != 0) fail(what + " step " + std::to_string(k) + " reserved field is not zero");
      const std::string step = what + " step " + std::to_string(k);
      int pops = 0;
      switch (op) {
        case static_cast<uint8_t>(RefitOp::Source):
          st.weight = weight_index(step);
          pops = -1;
          break;
        case static_cast<uint8_t>(RefitOp::Raw):
          st.offset = r.read<uint64_t>();
          st.nbytes = r.read<uint64_t>();
          if (st.nbytes != entry_bytes) {
            fail(step + " holds " + std::to_string(st.nbytes) + " raw bytes, not the entry's size");
          }
          raw.emplace_back(entries.size(), e.steps.size());
          pops = -1;
          break;
        case static_cast<uint8_t>(RefitOp::Cast):
          if (arg > static_cast<uint8_t>(EtScalarType::UInt64) ||
              weight_element_size(static_cast<EtScalarType>(arg)) == 0) {
            fail(step + " casts to a dtype code (" + std::to_string(arg) + ") weights cannot hold");
          }
          st.dtype = static_cast<EtScalarType>(arg);
          pops = 1;
          break;
        case static_cast<uint8_t>(RefitOp::Permute):
        case static_cast<uint8_t>(RefitOp::Reshape): {
          if (arg > kMaxRank) fail(step + " has rank " + std::to_string(arg) + " > 16");
          st.dims.resize(arg);
          for (auto& d : st.dims) d = r.read<int64_t>();
          if (op == static_cast<uint8_t>(RefitOp::Permute)) {
            std::vector<bool> seen(arg, false);
            for (const int64_t d : st.dims) {
              if (d < 0 || d >= arg || seen[d]) fail(step + " is not a permutation");
              seen[d] = true;
            }
          } else {
            for (const int64_t d : st.dims) {
              if (d < 0) fail(step + " reshapes to a negative size");
            }
          }
          pops = 1;
          break;
        }
        case static_cast<uint8_t>(RefitOp::BnScale):
          st.params = {weight_index(step), weight_index(step)};
          st.eps = r.read<float>();
          st.axis = r.read<int32_t>();
          if (st.axis < 0 || st.axis >= kMaxRank) fail(step + " has axis " + std::to_string(st.axis));
          pops = 1;
          break;
        case static_cast<uint8_t>(RefitOp::BnShift):
          if (arg > 1) fail(step + " has unknown flags");
          st.zero = arg == 1;
          st.params = {weight_index(step), weight_index(step), weight_index(step), weight_index(step)};
          st.eps = r.read<float>();
          pops = st.zero ? -1 : 1;
          break;
        default:
          fail(step + " has unknown operation " + std::to_string(op));
      }
      if (pops == 1 && depth < 1) fail(step + " has no tensor to work on");
      if (pops == -1) ++depth;
      st.op = static_cast<RefitOp>(op);
      e.steps.push_back(std::move(st));
    }
    if (depth != 1) fail(what + " leaves " + std::to_string(depth) + " tensors, not 1");
    entries.push_back(std::move(e));
  }
  const size_t table_end = r.position();
  for (const auto& [i, k] : raw) {
    const RefitStep& st = entries[i].steps[k];
    if (st.nbytes != 0 && (st.offset < table_end || st.offset > section.size || st.nbytes > section.size - st.offset)) {
      fail(name + " entry " + std::to_string(i) + " ('" + entries[i].name + "') raw data lies outside the section");
    }
  }
  return entries;
}

// STATE: u32 count, u32 reserved, entries (u16 name_len, u16 input_len, u16 output_len, u8 dtype, u8 rank,
// u8 update, u8 init, i16 position_input, u8 position_kind, u8 reserved, i16 length_input, i16 length_dim,
// i64 length_value, the three names, rank x i64 sizes, and with init 1: u64 nbytes + the initial bytes).
constexpr uint8_t kStateSharedFlag = 1;  // the entry ends with the methods that share the state

std::vector<StateEntry> read_state_table(const ByteSpan& section) {
  Reader r(section.data, section.size, "STATE");
  const uint32_t count = r.read_table_head(26);
  std::vector<StateEntry> states;
  std::set<std::string> names;
  for (uint32_t i = 0; i < count; ++i) {
    const std::string what = "STATE entry " + std::to_string(i);
    StateEntry e;
    const uint16_t name_len = r.read<uint16_t>(), input_len = r.read<uint16_t>(), output_len = r.read<uint16_t>();
    const uint8_t dtype = r.read<uint8_t>(), rank = r.read<uint8_t>(), update = r.read<uint8_t>();
    const uint8_t init = r.read<uint8_t>();
    e.position_input = r.read<int16_t>();
    const uint8_t position_kind = r.read<uint8_t>();
    const uint8_t flags = r.read<uint8_t>();
    e.length_input = r.read<int16_t>();
    e.length_dim = r.read<int16_t>();
    e.length_value = r.read<int64_t>();
    if (dtype > static_cast<uint8_t>(EtScalarType::UInt64) ||
        weight_element_size(static_cast<EtScalarType>(dtype)) == 0) {
      fail(what + " has unsupported dtype code " + std::to_string(dtype));
    }
    e.dtype = static_cast<EtScalarType>(dtype);
    if (rank > kMaxRank) fail(what + " has rank " + std::to_string(rank) + " > 16");
    if (update > 1) fail(what + " has unknown update kind " + std::to_string(update));
    e.update = static_cast<StateUpdate>(update);
    if (init > 1) fail(what + " has unknown initial contents kind " + std::to_string(init));
    if (position_kind > 1) fail(what + " has unknown position kind " + std::to_string(position_kind));
    if ((flags & ~kStateSharedFlag) != 0) fail(what + " has unknown flags " + std::to_string(flags));
    e.position_kind = static_cast<PositionKind>(position_kind);
    if (e.position_input < -1 || e.length_input < -1 || e.length_dim < 0 || e.length_dim >= kMaxRank ||
        e.length_value < 0) {
      fail(what + " has an invalid position guard");
    }
    if (e.update == StateUpdate::InPlace && e.position_input < 0) {
      fail(what + " is updated in place without a position guard");
    }
    e.name = r.read_string(name_len);
    e.input_name = r.read_string(input_len);
    e.output_name = r.read_string(output_len);
    if (e.name.empty() || !valid_utf8(e.name) || !valid_utf8(e.input_name) || !valid_utf8(e.output_name)) {
      fail(what + " has an empty or non-UTF-8 name");
    }
    if (!names.insert(e.name).second) fail(what + " repeats the state '" + e.name + "'");
    e.sizes.resize(rank);
    for (uint8_t d = 0; d < rank; ++d) e.sizes[d] = r.read<int64_t>();
    std::vector<int64_t> strides(rank);  // contiguous: the bytes addressed are numel x element size
    int64_t stride = 1;
    for (int d = static_cast<int>(rank) - 1; d >= 0; --d) {
      strides[d] = stride;
      if (e.sizes[d] > 1 && stride > INT64_MAX / e.sizes[d]) fail(what + " has more than 2^63 elements");
      stride *= std::max<int64_t>(e.sizes[d], 1);
    }
    e.nbytes = addressed_bytes(e.sizes, strides, weight_element_size(e.dtype), what);
    if (e.update == StateUpdate::InPlace && rank < 2) fail(what + " is updated in place but has rank < 2");
    if (init == 1) {
      const uint64_t n = r.read<uint64_t>();
      if (n != e.nbytes) {
        fail(what + " has " + std::to_string(n) + " initial bytes for a " + std::to_string(e.nbytes) + "-byte tensor");
      }
      e.initial = section.data + r.position();
      r.skip(static_cast<size_t>(n));
    }
    if ((flags & kStateSharedFlag) != 0) {  // u16 count, then per method u16 length + UTF-8 name
      const uint16_t n_methods = r.read<uint16_t>();
      std::set<std::string> seen;
      for (uint16_t m = 0; m < n_methods; ++m) {
        std::string method = r.read_string(r.read<uint16_t>());
        if (method.empty() || !valid_utf8(method) || !seen.insert(method).second) {
          fail(what + " has an empty, repeated or non-UTF-8 method name");
        }
        e.methods.push_back(std::move(method));
      }
      if (e.methods.size() < 2) fail(what + " is marked shared by fewer than two methods");
    }
    states.push_back(std::move(e));
  }
  if (r.remaining() != 0) fail("STATE has trailing bytes");
  return states;
}

// RECIPE: u32 version, u32 reserved, u32 header_len, u32 reserved, u64 graph_len, u64 map_len, then the header
// (UTF-8 JSON) at 32, the graph and the map each at the next 64-aligned offset of the payload, nothing after.
constexpr size_t kRecipeHeadSize = 32;

size_t align64(size_t n) { return (n + 63) / 64 * 64; }

Recipe read_recipe(const ByteSpan& section, size_t weight_count) {
  Reader r(section.data, section.size, "RECIPE");
  Recipe recipe;
  recipe.version = r.read<uint32_t>();
  if (recipe.version == 0) fail("RECIPE has version 0");
  if (r.read<uint32_t>() != 0) fail("RECIPE reserved field is not zero");
  if (!recipe.parsed()) return recipe;  // a newer layout: kept unparsed, the blob stays usable without it
  const uint32_t header_len = r.read<uint32_t>();
  if (r.read<uint32_t>() != 0) fail("RECIPE reserved field is not zero");
  const uint64_t graph_len = r.read<uint64_t>();
  const uint64_t map_len = r.read<uint64_t>();
  const uint64_t size = section.size;
  const uint64_t graph_at = align64(kRecipeHeadSize + header_len);  // header_len < 2^32: no overflow
  if (graph_len > size || graph_at > size - graph_len) fail("RECIPE graph lies outside the section");
  const uint64_t map_at = align64(graph_at + graph_len);
  if (map_len > size || map_at > size || map_len != size - map_at) {
    fail("RECIPE map does not end the section (" + std::to_string(size) + " bytes)");
  }
  if (header_len == 0 || graph_len == 0) fail("RECIPE has an empty header or graph");
  recipe.header = ByteSpan{section.data + kRecipeHeadSize, header_len, true};
  recipe.graph = ByteSpan{section.data + graph_at, static_cast<size_t>(graph_len), true};
  recipe.map = ByteSpan{section.data + map_at, static_cast<size_t>(map_len), true};
  if (!valid_utf8(std::string_view(reinterpret_cast<const char*>(recipe.header.data), recipe.header.size))) {
    fail("RECIPE header is not UTF-8");
  }
  recipe.entries = read_refit_map(recipe.map, weight_count, "RECIPE map");
  return recipe;
}

// The guards index the delegate's inputs: each must name an input that exists (a tensor), and a length dim of it.
void check_state_guards(const DelegateBlob& blob) {
  for (size_t i = 0; i < blob.states.size(); ++i) {
    const StateEntry& e = blob.states[i];
    const std::string what = "STATE entry " + std::to_string(i) + " ('" + e.name + "')";
    const auto tensor_input = [&](int32_t index) {
      return index >= 0 && static_cast<size_t>(index) < blob.inputs.size() && !blob.inputs[index].is_size();
    };
    if (e.position_input >= 0 && !tensor_input(e.position_input)) fail(what + " guards an input that is not a tensor");
    if (e.length_input >= 0 && (!tensor_input(e.length_input) ||
                                static_cast<size_t>(e.length_dim) >= blob.inputs[e.length_input].dims.size())) {
      fail(what + " reads its write length from a dim no input has");
    }
  }
}

// INPUT_GUARDS: u32 dim count, u32 index count, dim entries (u32 argument, i32 dim, u32 symbol, u32 0, i64 scale,
// i64 offset), index entries (u32 argument, u32 0, i64 bound). Each names an argument that exists and can hold
// it: a dim of a tensor (or -1, a size's value), an integer tensor for an index; a symbol's entries are adjacent.
void read_input_guards(DelegateBlob& blob) {
  Reader r(blob.input_guards.data, blob.input_guards.size, "INPUT_GUARDS");
  const uint32_t n_dims = r.read<uint32_t>();
  const uint32_t n_indices = r.read<uint32_t>();
  if (n_dims > r.remaining() / 32 || n_indices > (r.remaining() - 32 * static_cast<size_t>(n_dims)) / 16) {
    fail("INPUT_GUARDS declares more entries than it holds (truncated)");
  }
  std::set<uint32_t> done;  // symbols whose entries ended
  for (uint32_t i = 0; i < n_dims; ++i) {
    const std::string what = "INPUT_GUARDS dim entry " + std::to_string(i);
    DimGuard g;
    g.argument = r.read<uint32_t>();
    g.dim = r.read<int32_t>();
    g.symbol = r.read<uint32_t>();
    if (r.read<uint32_t>() != 0) fail(what + " has a non-zero reserved field");
    g.scale = r.read<int64_t>();
    g.offset = r.read<int64_t>();
    if (g.argument >= blob.inputs.size()) fail(what + " names argument " + std::to_string(g.argument) + ", not one");
    const IoEntry& e = blob.inputs[g.argument];
    const bool fits = e.is_size() ? g.dim == -1 : g.dim >= 0 && static_cast<size_t>(g.dim) < e.dims.size();
    if (!fits) fail(what + " names dim " + std::to_string(g.dim) + ", which its argument does not have");
    if (g.scale < 1) fail(what + " has a scale below 1");
    if (!blob.dim_guards.empty() && blob.dim_guards.back().symbol != g.symbol) {
      done.insert(blob.dim_guards.back().symbol);
    }
    if (done.count(g.symbol)) fail(what + ": the entries of symbol " + std::to_string(g.symbol) + " are not adjacent");
    blob.dim_guards.push_back(g);
  }
  for (uint32_t i = 0; i < n_indices; ++i) {
    const std::string what = "INPUT_GUARDS index entry " + std::to_string(i);
    IndexGuard g;
    g.argument = r.read<uint32_t>();
    if (r.read<uint32_t>() != 0) fail(what + " has a non-zero reserved field");
    g.bound = r.read<int64_t>();
    if (g.argument >= blob.inputs.size() || blob.inputs[g.argument].is_size()) {
      fail(what + " names argument " + std::to_string(g.argument) + ", which is not a tensor input");
    }
    const EtScalarType t = blob.inputs[g.argument].dtype;
    if (t != EtScalarType::Long && t != EtScalarType::Int) fail(what + " guards an input that is not int32 or int64");
    if (g.bound < 1) fail(what + " has a bound below 1");
    blob.index_guards.push_back(g);
  }
  if (r.remaining() != 0) fail("INPUT_GUARDS has trailing bytes");
}

std::string section_name(uint32_t kind) {
  static const char* const names[] = {"",       "IO_TABLE",   "ENGINE",      "PROGRAM", "METADATA",
                                      "GRAPH",  "WEIGHTS",    "REFIT_MAP",   "STATE",   "DIGESTS",
                                      "RECIPE", "NAMED_DATA", "INPUT_GUARDS"};
  return kind < sizeof(names) / sizeof(names[0]) && kind > 0 ? names[kind] : "section " + std::to_string(kind);
}

// DIGESTS: u32 count, u32 reserved, count x (u32 kind, u32 crc32 of that section's payload). Exactly one
// entry per other section in the table, unknown kinds included.
void check_digests(const ByteSpan& section, const std::vector<std::pair<uint32_t, ByteSpan>>& sections) {
  Reader r(section.data, section.size, "DIGESTS");
  const uint32_t count = r.read<uint32_t>();
  if (r.read<uint32_t>() != 0) fail("DIGESTS reserved field is not zero");
  if (count != sections.size()) {
    fail("DIGESTS lists " + std::to_string(count) + " section(s), the table has " + std::to_string(sections.size()));
  }
  std::set<uint32_t> listed;
  for (uint32_t i = 0; i < count; ++i) {
    const uint32_t kind = r.read<uint32_t>();
    const uint32_t expected = r.read<uint32_t>();
    if (!listed.insert(kind).second) fail("DIGESTS lists " + section_name(kind) + " twice");
    const auto it = std::find_if(sections.begin(), sections.end(), [&](const auto& s) { return s.first == kind; });
    if (it == sections.end()) fail("DIGESTS lists " + section_name(kind) + ", which the blob does not have");
    const ByteSpan& payload = it->second;
    const uint32_t actual = crc32_of(payload.data, payload.size);
    if (actual != expected) {
      fail(section_name(kind) + " section fails its digest (crc32 " + hex32(actual) + ", recorded " + hex32(expected) +
           "): the blob is corrupt; copy the .pte again or lower the model again");
    }
  }
  if (r.remaining() != 0) fail("DIGESTS has trailing bytes");
}

}  // namespace

bool DelegateBlob::engine_named() const {
  return std::any_of(named_entries.begin(), named_entries.end(),
                     [](const NamedDataEntry& e) { return e.target == NamedTarget::Engine; });
}

DelegateBlob parse_delegate_blob(const void* data, size_t size) {
  if (data == nullptr || size < kHeaderSize) {
    fail("shorter than its 32-byte header (truncated)");
  }
  const auto* bytes = static_cast<const uint8_t*>(data);
  if (std::memcmp(bytes, "ETRT", 4) != 0) {
    fail("wrong magic (not an et_tensorrt delegate blob)");
  }
  Reader header(bytes + 4, kHeaderSize - 4, "header");
  DelegateBlob blob;
  blob.version = header.read<uint16_t>();
  if (blob.version < kOldestBlobFormatVersion || blob.version > kBlobFormatVersion) {
    fail("format version " + std::to_string(blob.version) + " is not supported (this build reads versions " +
         std::to_string(kOldestBlobFormatVersion) + " to " + std::to_string(kBlobFormatVersion) + ")");
  }
  // Flag bit 0: the blob has a STATE section. A reader that predates STATE refuses the blob here ("unknown
  // flags") instead of skipping the section and running a stateful engine without its state.
  // Flag bit 1: the blob has a NAMED_DATA section (its engine or weights are not in it): refused the same way.
  const uint16_t flags = header.read<uint16_t>();
  if ((flags & ~(kFlagState | kFlagNamedData)) != 0 || (blob.version < 2 && flags != 0)) {
    fail("unknown flags");
  }
  if (header.read<uint32_t>() != kHeaderSize) {
    fail("unexpected header size");
  }
  const uint32_t section_count = header.read<uint32_t>();
  const uint64_t total_size = header.read<uint64_t>();
  if (total_size != size) {
    fail("declares " + std::to_string(total_size) + " bytes but " + std::to_string(size) +
         " are present (truncated or padded)");
  }
  const int8_t device_type = header.read<int8_t>();
  const int8_t device_index = header.read<int8_t>();
  blob.execution_device = read_device(device_type, device_index, "execution device");
  if (section_count > kMaxSections) {
    fail("too many sections");
  }
  const size_t table_end = kHeaderSize + kSectionEntrySize * section_count;
  if (table_end > size) {
    fail("section table ends early (truncated)");
  }

  std::set<uint32_t> seen;
  std::vector<std::pair<uint32_t, ByteSpan>> sections;  // in table order, DIGESTS excluded
  ByteSpan digests;
  ByteSpan io_table;
  size_t weights_offset = 0;
  const bool v2 = blob.version >= 2;
  Reader table(bytes + kHeaderSize, table_end - kHeaderSize, "section table");
  for (uint32_t i = 0; i < section_count; ++i) {
    const uint32_t kind = table.read<uint32_t>();
    table.read<uint32_t>();
    const uint64_t offset = table.read<uint64_t>();
    const uint64_t length = table.read<uint64_t>();
    if (offset < table_end || offset > size || length > size - offset) {
      fail("section " + std::to_string(kind) + " lies outside the blob");
    }
    if (!seen.insert(kind).second) {
      fail("section " + std::to_string(kind) + " appears twice");
    }
    const ByteSpan span{bytes + offset, static_cast<size_t>(length), true};
    if (kind == kDigests && blob.version >= 3) {
      digests = span;
      continue;
    }
    sections.emplace_back(kind, span);
    switch (kind) {
      case kIoTable:
        io_table = span;
        break;
      case kEngine:
        blob.engine = span;
        break;
      case kMetadata:
        blob.metadata = span;
        break;
      case kProgram:
        if (v2) fail("has a PROGRAM section (a torch.export archive), which only version 1 carries");
        blob.program = span;
        break;
      case kGraph:
        if (v2) blob.graph = span;
        break;
      case kWeights:
        if (v2) blob.weights = span, weights_offset = offset;
        break;
      case kRefitMap:
        if (v2) blob.refit_map = span;
        break;
      case kState:
        if (v2) blob.state = span;
        break;
      case kRecipe:
        if (v2) blob.recipe_section = span;
        break;
      case kNamedData:
        if (v2) blob.named_data = span;
        break;
      case kInputGuards:
        if (v2) blob.input_guards = span;
        break;
      default:
        break;  // forward compatible: unknown sections are skipped (so are 5-7 in version 1)
    }
  }
  // Integrity before anything parses a payload (or TensorRT deserializes the ENGINE): a flipped byte is
  // refused here, by the name of its section.
  if (blob.version >= 3) {
    if (!digests.present) fail("has no DIGESTS section (every version-3 blob has one)");
    check_digests(digests, sections);
    blob.digests_verified = true;
  }
  if (!seen.count(kIoTable)) fail("missing the IO_TABLE section");
  if (!v2 && !blob.program.present) fail("missing the PROGRAM section");
  if (v2) {
    if (blob.named_data.present != ((flags & kFlagNamedData) != 0)) {
      fail(blob.named_data.present ? "has a NAMED_DATA section without the header's named-data flag"
                                   : "has the header's named-data flag without a NAMED_DATA section");
    }
    if (blob.named_data.present) blob.named_entries = read_named_data(blob.named_data);
    std::set<uint32_t> named_weights;
    for (const NamedDataEntry& e : blob.named_entries) {
      if (e.target == NamedTarget::Weight) named_weights.insert(e.index);
    }
    const bool engine_named = blob.engine_named();
    if (engine_named && blob.engine.present) fail("has both an ENGINE section and an engine in named data");
    const bool has_engine = blob.engine.present || engine_named;
    if (blob.graph.present != blob.weights.present) fail("has one of GRAPH and WEIGHTS without the other");
    if (!blob.graph.present && !has_engine) fail("has neither an ENGINE nor a GRAPH + WEIGHTS program");
    if (blob.refit_map.present && !(has_engine && blob.weights.present)) {
      fail("has a REFIT_MAP without both the ENGINE and the WEIGHTS it maps between");
    }
    if (blob.weights.present) blob.weight_entries = read_weights(blob.weights, weights_offset, named_weights);
    for (const NamedDataEntry& e : blob.named_entries) {
      if (e.target != NamedTarget::Weight) continue;
      if (e.index >= blob.weight_entries.size()) {
        fail("NAMED_DATA names WEIGHTS entry " + std::to_string(e.index) + " of " +
             std::to_string(blob.weight_entries.size()));
      }
      const WeightEntry& w = blob.weight_entries[e.index];
      if (e.nbytes != w.nbytes) {
        fail("NAMED_DATA gives WEIGHTS entry " + std::to_string(e.index) + " ('" + w.name + "') " +
             std::to_string(e.nbytes) + " bytes; the entry addresses " + std::to_string(w.nbytes));
      }
    }
    // A RECIPE's initializers are rebuilt from the WEIGHTS entries, wherever their bytes are (the blob or named data)
    if (blob.recipe_section.present && !blob.weights.present) {
      fail("has a RECIPE without the WEIGHTS its initializers are rebuilt from");
    }
    if (blob.refit_map.present) {
      blob.refit_entries = read_refit_map(blob.refit_map, blob.weight_entries.size(), "REFIT_MAP");
    }
    if (blob.recipe_section.present) blob.recipe = read_recipe(blob.recipe_section, blob.weight_entries.size());
    if (blob.state.present != ((flags & kFlagState) != 0)) {
      fail(blob.state.present ? "has a STATE section without the header's state flag"
                              : "has the header's state flag without a STATE section");
    }
    if (blob.state.present) blob.states = read_state_table(blob.state);
  }
  if (blob.metadata.present &&
      !valid_utf8(std::string_view(reinterpret_cast<const char*>(blob.metadata.data), blob.metadata.size))) {
    fail("METADATA is not UTF-8");
  }

  Reader r(io_table.data, io_table.size, "IO_TABLE");
  const uint32_t count = r.read<uint32_t>();
  for (uint32_t i = 0; i < count; ++i) {
    IoEntry e = read_entry(r, i);
    (e.role == IoRole::Output ? blob.outputs : blob.inputs).push_back(std::move(e));
  }
  if (r.remaining() != 0) {
    fail("IO_TABLE has trailing bytes");
  }
  check_state_guards(blob);
  if (blob.input_guards.present) read_input_guards(blob);
  return blob;
}

}  // namespace et_tensorrt
