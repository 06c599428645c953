#include "torch_view.h"

#include <vector>

#include "device_translation.h"
#include "dtype_translation.h"

namespace et_tensorrt {

at::Tensor torch_view(const executorch::aten::Tensor& t) {
  const std::vector<int64_t> sizes(t.sizes().begin(), t.sizes().end());
  const std::vector<int64_t> strides(t.strides().begin(), t.strides().end());
  const auto options = at::TensorOptions()
                           .dtype(executorch_to_torch_dtype(t.scalar_type()))
                           .device(executorch_to_torch_device(t.device()));
  return at::from_blob(t.mutable_data_ptr(), sizes, strides, options);
}

}  // namespace et_tensorrt
