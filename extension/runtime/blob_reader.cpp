#include "blob_reader.h"

#include <cstring>
#include <set>

namespace et_tensorrt {
namespace {

constexpr size_t kHeaderSize = 32;
constexpr size_t kSectionEntrySize = 24;
constexpr uint32_t kMaxSections = 16;
constexpr uint16_t kMaxRank = 16;
enum SectionKind : uint32_t { kIoTable = 1, kEngine = 2, kProgram = 3, kMetadata = 4 };

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
  size_t remaining() const { return size_ - pos_; }

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

// Names are UTF-8 (the Python side decodes them): reject malformed and overlong sequences, surrogates.
bool valid_utf8(const std::string& s) {
  for (size_t i = 0, n = s.size(); i < n;) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
      len = 2, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, cp = c & 0x07;
    } else {
      return false;
    }
    if (n - i < len) return false;
    for (size_t k = 1; k < len; ++k) {
      const unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    const uint32_t min_cp[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
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
    fail(what + " is a size: it needs rank 1 (its value range) and dtype int64");
  }
  return e;
}

} // namespace

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
  if (blob.version != kBlobFormatVersion) {
    fail("format version " + std::to_string(blob.version) + " is not supported (this build reads version " +
         std::to_string(kBlobFormatVersion) + ")");
  }
  if (header.read<uint16_t>() != 0) {
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
  ByteSpan io_table;
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
    const ByteSpan span{bytes + offset, static_cast<size_t>(length)};
    switch (kind) {
      case kIoTable: io_table = span; break;
      case kEngine: blob.engine = span; break;
      case kProgram: blob.program = span; break;
      case kMetadata: blob.metadata = span; break;
      default: break;  // forward compatible: unknown sections are skipped
    }
  }
  if (!seen.count(kIoTable)) fail("missing the IO_TABLE section");
  if (!seen.count(kProgram)) fail("missing the PROGRAM section");

  Reader r(io_table.data, io_table.size, "IO_TABLE");
  const uint32_t count = r.read<uint32_t>();
  for (uint32_t i = 0; i < count; ++i) {
    IoEntry e = read_entry(r, i);
    (e.role == IoRole::Output ? blob.outputs : blob.inputs).push_back(std::move(e));
  }
  if (r.remaining() != 0) {
    fail("IO_TABLE has trailing bytes");
  }
  return blob;
}

} // namespace et_tensorrt
