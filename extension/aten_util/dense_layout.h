// Which strided layouts an ExecuTorch tensor can describe. ExecuTorch tensors carry a dim order (a
// permutation, outermost dim first) and derive strides from it, so only dense, non-overlapping
// layouts exist there: contiguous, channels-last and any other permutation. make_tensor_ptr aborts the
// process on anything else, so callers validate here first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace et_tensorrt {

struct DenseLayout {
  std::vector<uint8_t> dim_order;  // outermost dim first
  std::vector<int32_t> sizes;
  std::vector<int32_t> strides;  // derived from dim_order exactly as ExecuTorch derives them
};

// Validates (sizes, strides) and returns the dim order and ExecuTorch strides that address the same
// elements. Strides of size-1 dims (which address nothing) come back normalized, and an empty tensor
// gets the dim order its strides suggest. Throws LayoutError naming the offending dim and what to do.
// Views, not vectors: callers pass torch's or ExecuTorch's arrays without copying them.
DenseLayout dense_layout(const int64_t* sizes, const int64_t* strides, size_t dims);

}  // namespace et_tensorrt
