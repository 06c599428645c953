// The blob's bytes that are ExecuTorch named data (its NAMED_DATA section: the engine, WEIGHTS entries), read at
// init from the program's NamedDataMap by key. ExecuTorch's loader hands each back as a FreeableBuffer: a view of
// the mapped .pte/.ptd where the program was loaded from a mapped file (Runner, ExecuTorch's mmap loaders), so the
// weights are ExecuTorch's data, never a copy of it. One key read by several partitions or methods is one region
// of the file.
#pragma once

#include <memory>
#include <vector>

#include <executorch/runtime/core/named_data_map.h>

#include "blob_reader.h"

namespace et_tensorrt {

struct NamedData {
  ByteSpan engine;                           // present when the engine is named data
  std::shared_ptr<const void> engine_owner;  // the buffer holding it
  std::vector<const uint8_t*> weights;       // per WEIGHTS entry: its bytes when named, else nullptr (in the blob)
  std::vector<std::shared_ptr<const void>> owners;  // per WEIGHTS entry: the buffer holding them (named only)
};

// Reads every NAMED_DATA entry of `blob` from `map` and checks its size; throws std::runtime_error naming the key
// (and what to load) when `map` lacks it. A blob without NAMED_DATA needs no map.
NamedData resolve_named_data(const DelegateBlob& blob, const executorch::runtime::NamedDataMap* map);

}  // namespace et_tensorrt
