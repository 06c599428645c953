// A bounds-checked view of a flatbuffer, for files ExecuTorch reads without verifying them first (a program's
// optional fields, a .ptd's tables): every accessor returns nullopt instead of reading outside the buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

namespace et_tensorrt {

constexpr uint32_t kMaxFlatbufferItems = 1u << 20;

// A bounds-checked view of a flatbuffer: every accessor returns nullopt instead of reading outside it.
class Flatbuffer {
 public:
  Flatbuffer(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  template <typename T>
  std::optional<T> read(size_t pos) const {
    if (pos > size_ || sizeof(T) > size_ - pos) return std::nullopt;
    T value;
    std::memcpy(&value, data_ + pos, sizeof(T));
    return value;
  }

  // The table the root offset points to.
  std::optional<size_t> root() const { return follow(0); }

  // Whether the table at `table` is whole: its vtable and its inline fields lie inside the buffer (field() answers
  // nullopt both for an absent field and an unreadable vtable; a reader without checks dereferences the latter).
  bool whole_table(size_t table) const {
    const auto back = read<int32_t>(table);
    if (!back) return false;
    const int64_t vtable = static_cast<int64_t>(table) - *back;
    if (vtable < 0) return false;
    const auto vt_size = read<uint16_t>(static_cast<size_t>(vtable));
    const auto inline_size = read<uint16_t>(static_cast<size_t>(vtable) + 2);
    if (!vt_size || !inline_size || *vt_size < 4 || *vt_size % 2 != 0) return false;
    if (static_cast<size_t>(vtable) + *vt_size > size_ || table + *inline_size > size_) return false;
    for (size_t slot = 4; slot < *vt_size; slot += 2) {
      const auto offset = read<uint16_t>(static_cast<size_t>(vtable) + slot);
      if (!offset || (*offset != 0 && *offset >= *inline_size)) return false;  // a field outside its table
    }
    return true;
  }

  // Position of field `index` of the table at `table`, or nullopt when absent (or out of bounds).
  std::optional<size_t> field(size_t table, int index) const {
    const auto back = read<int32_t>(table);
    if (!back) return std::nullopt;
    const int64_t vtable = static_cast<int64_t>(table) - *back;
    if (vtable < 0) return std::nullopt;
    const auto vt_size = read<uint16_t>(static_cast<size_t>(vtable));
    const size_t slot = 4 + 2 * static_cast<size_t>(index);
    if (!vt_size || slot + 2 > *vt_size) return std::nullopt;
    const auto offset = read<uint16_t>(static_cast<size_t>(vtable) + slot);
    if (!offset || *offset == 0) return std::nullopt;
    return table + *offset;
  }

  // The table, string or vector an offset field (at `pos`) refers to.
  std::optional<size_t> follow(size_t pos) const {
    const auto offset = read<uint32_t>(pos);
    if (!offset || *offset > size_ - pos) return std::nullopt;
    return pos + *offset;
  }

  std::optional<size_t> deref_field(size_t table, int index) const {
    const auto pos = field(table, index);
    return pos ? follow(*pos) : std::nullopt;
  }

  // Length of the vector at `vec`, bounded by what the buffer can hold.
  std::optional<uint32_t> length(size_t vec) const {
    const auto n = read<uint32_t>(vec);
    if (!n || *n > kMaxFlatbufferItems || static_cast<size_t>(*n) * 4 > size_ - vec - 4) return std::nullopt;
    return n;
  }

  // Length of the vector of `element`-byte scalars at `vec`, all inside the buffer.
  std::optional<uint32_t> scalars(size_t vec, size_t element) const {
    const auto n = read<uint32_t>(vec);
    if (!n || *n > kMaxFlatbufferItems || static_cast<size_t>(*n) * element > size_ - vec - 4) return std::nullopt;
    return n;
  }

  // The string at `str` when it and its terminating NUL lie inside the buffer (what c_str() readers rely on).
  std::optional<std::string> string(size_t str) const {
    const auto n = read<uint32_t>(str);
    if (!n || *n >= size_ - str - 4 || data_[str + 4 + *n] != 0) return std::nullopt;
    return std::string(reinterpret_cast<const char*>(data_ + str + 4), *n);
  }

  std::string string_at(size_t str) const {
    const auto n = read<uint32_t>(str);
    if (!n || *n > size_ - str - 4 || *n > 256) return "?";
    return std::string(reinterpret_cast<const char*>(data_ + str + 4), *n);
  }

 private:
  const uint8_t* data_;
  size_t size_;
};

}  // namespace et_tensorrt
