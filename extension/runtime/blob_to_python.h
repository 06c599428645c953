// The parsed blob as the delegate hands it to its executor: format/blob_fields.h's dict (the one Python reads
// everywhere), with the runtime's own additions: each WEIGHTS entry as a tensor viewing its bytes, and a named engine.
#pragma once

#include <torch/python.h>

#include "../format/blob_fields.h"
#include "named_data.h"

namespace et_tensorrt {

// `view` must be a memoryview of exactly the bytes `blob` was parsed from, starting at `base`.
// With an `owner` (the delegate's, which owns those bytes), the dict's "weight_views" holds every WEIGHTS entry
// as a CPU tensor viewing the bytes in place: no copy; each view keeps `owner` alive, so the bytes outlive
// every tensor made from them. The bytes may be read-only memory (a mapped file): views must not be written.
// An entry whose address is not aligned for its dtype is copied instead. Without an owner it is None.
// `named`: the blob's named data as the delegate resolved it: the engine and the named WEIGHTS entries are views
// of ExecuTorch's buffers (each view holding its buffer). Without it, "engine" is None for a named engine.
pybind11::dict blob_to_python(const DelegateBlob& blob, const uint8_t* base, const pybind11::object& view,
                              std::shared_ptr<const void> owner = nullptr, const NamedData* named = nullptr);

}  // namespace et_tensorrt
