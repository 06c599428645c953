// The inverse of a descriptor: a torch tensor over an ExecuTorch tensor's memory, on the device its
// label names. No copy and no ownership: the ExecuTorch tensor's owner must outlive the view.
#pragma once

#include <ATen/ATen.h>
#include <executorch/runtime/core/exec_aten/exec_aten.h>

namespace et_tensorrt {

at::Tensor torch_view(const executorch::aten::Tensor& t);

// `src` copied into `dst` (same sizes): one memcpy where both are dense host memory of one dtype (every result of the
// PyTorch executor, every output the runner hands back), else torch's copy_, which picks the copy kind from the two
// devices. copy_ builds a TensorIterator first: microseconds, more than a small tensor's copy itself.
void copy_into(const executorch::aten::Tensor& dst, const at::Tensor& src);

// A torch tensor of its own holding a copy of `t` (on `t`'s device, dense).
at::Tensor torch_copy(const executorch::aten::Tensor& t);

}  // namespace et_tensorrt
