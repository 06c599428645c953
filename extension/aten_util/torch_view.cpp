#include "torch_view.h"

#include <executorch/runtime/core/exec_aten/util/dim_order_util.h>

#include <cstring>
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

namespace {

bool dense_on_host(const executorch::aten::Tensor& t) {
  return t.device().type() == executorch::runtime::etensor::DeviceType::CPU &&
         executorch::runtime::is_contiguous_dim_order(t.dim_order().data(), t.dim());
}

}  // namespace

void copy_into(const executorch::aten::Tensor& dst, const at::Tensor& src) {
  if (dense_on_host(dst) && src.device().is_cpu() && src.is_contiguous() &&
      executorch_to_torch_dtype(dst.scalar_type()) == src.scalar_type() &&
      std::equal(src.sizes().begin(), src.sizes().end(), dst.sizes().begin(), dst.sizes().end())) {
    if (src.nbytes() > 0) std::memcpy(dst.mutable_data_ptr(), src.data_ptr(), src.nbytes());
    return;
  }
  torch_view(dst).copy_(src);
}

at::Tensor torch_copy(const executorch::aten::Tensor& t) {
  if (!dense_on_host(t)) return torch_view(t).clone();
  at::Tensor copy = at::empty(std::vector<int64_t>(t.sizes().begin(), t.sizes().end()),
                              at::TensorOptions().dtype(executorch_to_torch_dtype(t.scalar_type())));
  if (t.nbytes() > 0) std::memcpy(copy.data_ptr(), t.const_data_ptr(), t.nbytes());
  return copy;
}

}  // namespace et_tensorrt
