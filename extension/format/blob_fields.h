// The parsed blob as Python sees it: one dict of plain values (dtype and device codes as the blob stores them, no
// torch objects), built from the C++ reader's result. et_tensorrt.format._reader.parse_blob returns it (read without
// torch: `inspect`, tools, tests); the delegate's blob_to_python adds what only the runtime has (weight views, a
// named engine). Section payloads are slices of `view`, a memoryview over the parsed bytes: no copies.
#pragma once

#include <pybind11/pybind11.h>

#include "blob_reader.h"

namespace et_tensorrt {

// `view` must be a memoryview of exactly the bytes `blob` was parsed from, starting at `base`. "weight_views" is
// None and "engine" None for an engine that is named data.
pybind11::dict blob_fields(const DelegateBlob& blob, const uint8_t* base, const pybind11::object& view);

}  // namespace et_tensorrt
