// The blob's bytes that are ExecuTorch named data (its NAMED_DATA section: the engine, WEIGHTS entries), read at
// init from the program's NamedDataMap by key and checked against the CRC-32 the blob records for each before
// anything (TensorRT, the PyTorch executor, a refit) reads them. ExecuTorch's loader hands each back as a
// FreeableBuffer: a view of the mapped .pte/.ptd where the program was loaded from a mapped file (Runner, ExecuTorch's
// mmap loaders), so the weights are ExecuTorch's data, never a copy of it. One key read by several partitions or
// methods is one region of the file.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/core/named_data_map.h>

#include "../format/blob_reader.h"

namespace et_tensorrt {

struct NamedData {
  ByteSpan engine;                           // present when the engine is named data
  std::shared_ptr<const void> engine_owner;  // the buffer holding it
  std::vector<const uint8_t*> weights;       // per WEIGHTS entry: its bytes when named, else nullptr (in the blob)
  std::vector<std::shared_ptr<const void>> owners;  // per WEIGHTS entry: the buffer holding them (named only)
};

// What every key of ours starts with (et_tensorrt/builder/named_data.py KEY_PREFIX): a content digest follows.
constexpr const char* kNamedDataKeyPrefix = "et_tensorrt:";

// Set to exactly 1: named data is used without checking it against the blob's CRC-32s (files you trust; the check
// reads every named byte once at init, see docs/benchmarks.md).
constexpr const char* kTrustNamedDataEnv = "ET_TENSORRT_TRUST_NAMED_DATA";

// Reads every NAMED_DATA entry of `blob` from `map`, checks its size and (unless kTrustNamedDataEnv) its CRC-32;
// throws std::runtime_error naming the key, what it belongs to (InitSite), the file (DataFiles) and the fix when
// `map` lacks it or its bytes differ. A blob without NAMED_DATA needs no map.
NamedData resolve_named_data(const DelegateBlob& blob, const executorch::runtime::NamedDataMap* map);

// A compile spec's decimal value (the partitioner writes str(int)); 0 when absent or not a small number.
int compile_spec_int(executorch::runtime::ArrayRef<executorch::runtime::CompileSpec> specs, const char* key);

// Which delegate is being initialized, for the errors: the backend's init sets it for the duration of one init
// (ExecuTorch's method name; the partition index and count the partitioner recorded in the compile specs,
// "et_tensorrt.partition_index" / "et_tensorrt.partition_count", 1-based).
class InitSite {
 public:
  InitSite(const char* method, executorch::runtime::ArrayRef<executorch::runtime::CompileSpec> specs);
  ~InitSite();
  InitSite(const InitSite&) = delete;
  InitSite& operator=(const InitSite&) = delete;
};

// The files a Runner loads a program from, so named-data errors name them, and what its delegates read: a Runner
// sets it (on its thread) while it loads a method.
struct DataFiles {
  std::string program;              // the .pte ("" when loaded from bytes)
  std::string data;                 // the .ptd given with it ("" none)
  std::set<std::string> data_keys;  // the keys the .ptd holds
  size_t delegates = 0;             // et_tensorrt delegates initialized meanwhile
  size_t named_delegates = 0;       // of which read named data
};

class DataFilesScope {
 public:
  explicit DataFilesScope(DataFiles& files);
  ~DataFilesScope();
  DataFilesScope(const DataFilesScope&) = delete;
  DataFilesScope& operator=(const DataFilesScope&) = delete;
};

}  // namespace et_tensorrt
