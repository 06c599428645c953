// The write positions of a stateful call, checked before the executor runs (blob STATE guards).
//
// TensorRT's KV-cache layer writes where the positions say, unchecked: a position outside the cache would be an
// out-of-bounds write into device memory. The delegate reads the positions (a few integers; from the device
// when the caller keeps them there) and refuses the call when a write would leave its state.
#pragma once

#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/span.h>

#include "../format/blob_reader.h"

namespace et_tensorrt {

// Throws PlacementRejected naming the input, the positions and the state when a write leaves a state, or when
// positions that must be consecutive are not.
void check_write_positions(const DelegateBlob& blob, executorch::runtime::Span<executorch::runtime::EValue*> args);

}  // namespace et_tensorrt
