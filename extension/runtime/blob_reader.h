// The delegate blob (docs/blob-format.md, version 1): what preprocess wrote for one partition.
// Parsing validates every offset and length before reading; a damaged blob is a BlobFormatError,
// never an out-of-bounds read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "../aten_util/device_translation.h"
#include "../aten_util/dtype_translation.h"

namespace et_tensorrt {

struct BlobFormatError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

constexpr uint16_t kBlobFormatVersion = 1;

// Size: an integer argument (a SymInt the partition reads), passed by ExecuTorch as an Int EValue; its one
// "dim" is the range of its value, its name the engine input it binds ("" when the engine derives it).
enum class IoRole : uint8_t { Input = 0, Output = 1, Size = 2 };

struct DimRange {
  int64_t min, opt, max;  // max == -1: unbounded
  bool is_static() const { return min == opt && opt == max; }
};

struct IoEntry {
  IoRole role;
  EtScalarType dtype;
  EtDevice recorded_device{EtDeviceType::CPU, 0};  // where the graph recorded this value
  std::string name;
  std::vector<DimRange> dims;
  bool is_size() const { return role == IoRole::Size; }
};

// A view of one section inside the caller's buffer (not owned).
struct ByteSpan {
  const uint8_t* data = nullptr;
  size_t size = 0;
  bool empty() const { return size == 0; }
};

struct DelegateBlob {
  uint16_t version = 0;
  EtDevice execution_device{EtDeviceType::CUDA, 0};
  std::vector<IoEntry> inputs;  // the delegate's arguments in order: tensors (Input) and sizes (Size)
  std::vector<IoEntry> outputs;
  ByteSpan engine;    // may be empty: the build was left to PyTorch
  ByteSpan program;   // torch.export.save bytes of the partition
  ByteSpan metadata;  // UTF-8 JSON, informational
};

// Parses `data[0, size)`; the returned spans point into that buffer, so it must outlive the result.
DelegateBlob parse_delegate_blob(const void* data, size_t size);

} // namespace et_tensorrt
