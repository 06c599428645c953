// The delegate blob (docs/blob-format.md, versions 1 to 3): what preprocess wrote for one partition.
// This is the one reader: the runtime parses with it and Python's et_tensorrt.format.blob.read_blob wraps it.
// Parsing validates every count, offset and length before reading; a damaged blob is a BlobFormatError,
// never an out-of-bounds read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "scalar_types.h"

namespace et_tensorrt {

struct BlobFormatError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

constexpr uint16_t kBlobFormatVersion = 3;        // what preprocess writes (2 is version 3 without DIGESTS)
constexpr uint16_t kOldestBlobFormatVersion = 1;  // still read (its PROGRAM by the safe loader)
constexpr size_t kWeightAlignment = 64;           // WEIGHTS payload and every datum in it

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

// The graph-signature kind of a weight: what the embedded program lifts it as.
enum class WeightKind : uint8_t { Parameter = 0, Buffer = 1, Constant = 2 };

// One WEIGHTS table entry: a tensor's raw bytes, described by the blob itself (never by a pickle).
struct WeightEntry {
  WeightKind kind;
  EtScalarType dtype;
  bool persistent = true;  // buffers only: part of the state dict
  std::string name;        // the graph signature's target (a dotted module path)
  std::vector<int64_t> sizes, strides;
  uint64_t offset = 0;  // from the start of the blob (the file stores it from the WEIGHTS payload); 0 when named
  uint64_t nbytes = 0;  // exactly the storage the sizes and strides address, times the element size
  bool named = false;   // its bytes are ExecuTorch named data (a NAMED_DATA entry), not in the blob
};

// NAMED_DATA (docs/blob-format.md): the engine, or a WEIGHTS entry, whose bytes are ExecuTorch named data (the
// program's NamedDataMap: inside the .pte or in a .ptd), under `key`. The delegate reads them at init.
enum class NamedTarget : uint8_t { Engine = 0, Weight = 1 };

struct NamedDataEntry {
  NamedTarget target;
  uint32_t index = 0;  // Weight: the WEIGHTS entry; Engine: 0
  uint64_t nbytes = 0;
  std::string key;         // UTF-8, non-empty
  bool has_crc32 = false;  // NAMED_DATA layout 1: the CRC-32 its named bytes are checked against at init
  uint32_t crc32 = 0;
};

// REFIT_MAP (docs/blob-format.md): per engine weight (ONNX initializer), a recipe that rebuilds its bytes from
// WEIGHTS. The reader checks the structure (known steps, indexes inside WEIGHTS, RAW bytes inside the section,
// a recipe that leaves one tensor); running a recipe is Python's (et_tensorrt.format.refit_map.rebuild).
enum class RefitOp : uint8_t { Source = 1, Raw = 2, Cast = 3, Permute = 4, Reshape = 5, BnScale = 6, BnShift = 7 };

struct RefitStep {
  RefitOp op;
  uint32_t weight = 0;                       // Source: WEIGHTS index
  uint64_t offset = 0, nbytes = 0;           // Raw: from the REFIT_MAP payload start
  EtScalarType dtype = EtScalarType::Float;  // Cast
  std::vector<int64_t> dims;                 // Permute (a permutation) / Reshape (sizes)
  std::vector<uint32_t> params;              // BnScale: gamma, var; BnShift: gamma, var, mean, beta (WEIGHTS indexes)
  float eps = 0;                             // BnScale / BnShift
  int32_t axis = 0;                          // BnScale
  bool zero = false;                         // BnShift: the layer had no bias (start from zeros)
};

struct RefitEntry {
  std::string name;  // the ONNX initializer / TensorRT weight name, unique
  EtScalarType dtype;
  std::vector<int64_t> sizes;
  std::vector<RefitStep> steps;
};

// STATE (docs/blob-format.md): a tensor the delegate owns across calls (a KV cache, a counter), carried by the
// engine input `input_name` and output `output_name`. In place: the engine's output aliases its input (one
// buffer bound to both); write back: the delegate copies the output into the state after the call. The guard
// says where this call's write positions are, so the delegate checks them before the engine writes.
enum class StateUpdate : uint8_t { InPlace = 0, WriteBack = 1 };
enum class PositionKind : uint8_t { Positions = 0, Start = 1 };

struct StateEntry {
  std::string name;  // the buffer's fully qualified name, unique in the blob
  std::string input_name, output_name;
  EtScalarType dtype;
  std::vector<int64_t> sizes;
  StateUpdate update = StateUpdate::WriteBack;
  const uint8_t* initial = nullptr;  // nullptr: zeros; else nbytes() bytes inside the STATE section
  int32_t position_input = -1;       // the delegate input holding the positions; -1: no guard
  PositionKind position_kind = PositionKind::Positions;
  int32_t length_input = -1;  // Start: the input whose dim length_dim is the write length; -1: length_value
  int32_t length_dim = 0;
  int64_t length_value = 0;
  uint64_t nbytes = 0;  // numel x element size
  // The program's methods whose delegates declare this state (the same buffer): each binds the one device buffer
  // the loaded program holds under `name`. Empty: only this delegate's method has it.
  std::vector<std::string> methods;
};

// INPUT_GUARDS (docs/blob-format.md): what the partition's program requires of its arguments beyond their own
// ranges, as torch.export recorded it. A dim guard says that dim `dim` of argument `argument` (or, dim -1, the
// value of a size argument) is scale * symbol + offset: the guards of one symbol must agree. An index guard says
// that every value of an integer argument lies in [0, bound) (the rows of the table it looks up).
struct DimGuard {
  uint32_t argument = 0;
  int32_t dim = 0;  // -1: the value of a size argument
  uint32_t symbol = 0;
  int64_t scale = 1, offset = 0;
};

struct IndexGuard {
  uint32_t argument = 0;
  int64_t bound = 0;
};

// A view of one section inside the caller's buffer (not owned).
struct ByteSpan {
  const uint8_t* data = nullptr;
  size_t size = 0;
  bool present = false;  // the section is in the blob (it may still be empty)
};

// RECIPE (docs/blob-format.md): what a TensorRT builder on the device needs to build the partition there (its
// ONNX graph without weight bytes, a recipe per initializer over WEIGHTS, the build header). Only layout version
// kRecipeVersion is parsed; a newer one is kept as `version` with empty parts (the device build then says why).
constexpr uint32_t kRecipeVersion = 1;

struct Recipe {
  uint32_t version = 0;  // 0: the blob has no RECIPE
  ByteSpan header;       // UTF-8 JSON: the engine's I/O, profiles, precision, options, the ahead-of-time engine
  ByteSpan graph;        // ONNX ModelProto whose initializers carry no bytes
  ByteSpan map;          // the initializers' recipes, in REFIT_MAP's encoding (RAW offsets from its own start)
  std::vector<RefitEntry> entries;
  bool parsed() const { return version == kRecipeVersion; }
};

struct DelegateBlob {
  uint16_t version = 0;
  bool digests_verified = false;  // version 3: every section matched its DIGESTS entry (version 1-2: none)
  EtDevice execution_device{EtDeviceType::CUDA, 0};
  std::vector<IoEntry> inputs;  // the delegate's arguments in order: tensors (Input) and sizes (Size)
  std::vector<IoEntry> outputs;
  ByteSpan engine;          // serialized TensorRT engine; absent when the build was left to PyTorch
  ByteSpan program;         // version 1 only: torch.export.save archive of the partition
  ByteSpan graph;           // version 2: torch.export JSON of the partition's aten program
  ByteSpan weights;         // version 2: the WEIGHTS section (table + data), described by `weight_entries`
  ByteSpan refit_map;       // version 2: engine weight -> recipe over WEIGHTS (the ENGINE is weight-stripped)
  ByteSpan metadata;        // UTF-8 JSON, informational
  ByteSpan state;           // the STATE section, parsed into `states`
  ByteSpan recipe_section;  // the RECIPE section, parsed into `recipe`
  ByteSpan named_data;      // the NAMED_DATA section, parsed into `named_entries`
  ByteSpan input_guards;    // the INPUT_GUARDS section, parsed into `dim_guards` and `index_guards`
  std::vector<WeightEntry> weight_entries;
  std::vector<RefitEntry> refit_entries;      // REFIT_MAP parsed
  std::vector<StateEntry> states;             // STATE parsed
  Recipe recipe;                              // RECIPE parsed
  std::vector<NamedDataEntry> named_entries;  // NAMED_DATA parsed
  std::vector<DimGuard> dim_guards;           // INPUT_GUARDS parsed, grouped by symbol
  std::vector<IndexGuard> index_guards;
  // The engine is named data (no ENGINE section): `engine` is empty until the delegate resolves it.
  bool engine_named() const;
};

// Parses `data[0, size)`; the returned spans point into that buffer, so it must outlive the result.
DelegateBlob parse_delegate_blob(const void* data, size_t size);

}  // namespace et_tensorrt
