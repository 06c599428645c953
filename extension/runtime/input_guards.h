// The blob's INPUT_GUARDS, checked before each call (docs/blob-format.md): what the exported program requires of
// the delegate's arguments beyond their own ranges. Dims torch.export recorded as one symbol must agree (the
// program's "Guard failed: cache_position.size()[0] == input_ids.size()[1]", which ExecuTorch does not check),
// and an index argument must lie inside the table it looks up (a token id past the vocabulary: the PyTorch
// executor would fail deep inside aten::embedding, TensorRT's gather would read outside the table).
#pragma once

#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/span.h>

#include "../format/blob_reader.h"

namespace et_tensorrt {

// Throws PlacementRejected naming the arguments (argument_names.h) and the values that disagree.
void check_input_guards(const DelegateBlob& blob, executorch::runtime::Span<executorch::runtime::EValue*> args);

}  // namespace et_tensorrt
