#include "dense_layout.h"

#include <algorithm>
#include <array>
#include <limits>
#include <string>

#include "errors.h"

namespace et_tensorrt {
namespace {

constexpr size_t kMaxDims = 16;  // ExecuTorch's kTensorDimensionLimit
const char* const kFix = "; call .contiguous() (or .clone(memory_format=...)) before passing it";

[[noreturn]] void refuse(const std::string& what) { throw LayoutError("layout is not dense: " + what + kFix); }

int32_t narrow(int64_t value, const char* what, size_t dim) {
  if (value > std::numeric_limits<int32_t>::max()) {
    throw LayoutError(std::string(what) + " of dim " + std::to_string(dim) + " (" + std::to_string(value) +
                      ") exceeds ExecuTorch's 32-bit limit");
  }
  return static_cast<int32_t>(value);
}

}  // namespace

DenseLayout dense_layout(const int64_t* sizes, const int64_t* strides, size_t dims) {
  if (dims > kMaxDims) {
    throw LayoutError("rank " + std::to_string(dims) + " exceeds ExecuTorch's limit of 16 dims");
  }
  bool empty = false;
  for (size_t d = 0; d < dims; ++d) {
    if (sizes[d] < 0) {
      throw LayoutError("negative size at dim " + std::to_string(d));
    }
    if (strides[d] < 0) {
      refuse("negative stride " + std::to_string(strides[d]) + " at dim " + std::to_string(d));
    }
    empty = empty || sizes[d] == 0;
  }

  // Outermost first: larger stride first; ties keep the logical order. Insertion sort: rank <= 16 and
  // usually already sorted (contiguous), where it is a single pass.
  std::array<size_t, kMaxDims> order;
  for (size_t d = 0; d < dims; ++d) {
    size_t i = d;
    for (; i > 0 && strides[order[i - 1]] < strides[d]; --i) {
      order[i] = order[i - 1];
    }
    order[i] = d;
  }

  if (!empty) {
    // Walk innermost to outermost: every dim that addresses more than one element must step exactly
    // over the block of elements inside it.
    int64_t expected = 1;
    for (size_t k = dims; k-- > 0;) {
      const size_t d = order[k];
      if (sizes[d] == 1) {
        continue;
      }
      if (strides[d] != expected) {
        const std::string at = " at dim " + std::to_string(d) + " (size " + std::to_string(sizes[d]) + ")";
        if (strides[d] == 0) {
          refuse("expanded (stride 0)" + at);
        } else if (strides[d] < expected) {
          refuse("overlapping elements: stride " + std::to_string(strides[d]) + at + ", expected " +
                 std::to_string(expected));
        } else {
          refuse("gaps between elements (a stepped slice or a view into a larger tensor): stride " +
                 std::to_string(strides[d]) + at + ", expected " + std::to_string(expected));
        }
      }
      expected *= sizes[d];
    }
  }

  DenseLayout layout;
  layout.dim_order.reserve(dims);
  layout.sizes.resize(dims);
  layout.strides.resize(dims);
  for (size_t d = 0; d < dims; ++d) {
    layout.dim_order.push_back(static_cast<uint8_t>(order[d]));
    layout.sizes[d] = narrow(sizes[d], "size", d);
  }
  // ExecuTorch's rule (dim_order_to_stride): innermost stride 1, a size-0 dim multiplies by 1.
  int64_t stride = 1;
  for (size_t k = dims; k-- > 0;) {
    layout.strides[order[k]] = narrow(stride, "stride", order[k]);
    stride *= std::max<int64_t>(sizes[order[k]], 1);
  }
  return layout;
}

}  // namespace et_tensorrt
