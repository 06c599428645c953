// The parsed blob as Python sees it: one dict, built from the C++ reader's result, that both
// et_tensorrt._C.parse_blob (tools, tests) and the delegate (handing its executor the blob it already
// parsed) return. Section payloads are slices of `view`, a memoryview over the parsed bytes: no copies.
#pragma once

#include <torch/python.h>

#include "blob_reader.h"

namespace et_tensorrt {

// `view` must be a memoryview of exactly the bytes `blob` was parsed from, starting at `base`.
pybind11::dict blob_to_python(const DelegateBlob& blob, const uint8_t* base, const pybind11::object& view);

}  // namespace et_tensorrt
