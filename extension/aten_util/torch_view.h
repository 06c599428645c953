// The inverse of a descriptor: a torch tensor over an ExecuTorch tensor's memory, on the device its
// label names. No copy and no ownership: the ExecuTorch tensor's owner must outlive the view.
#pragma once

#include <ATen/ATen.h>
#include <executorch/runtime/core/exec_aten/exec_aten.h>

namespace et_tensorrt {

at::Tensor torch_view(const executorch::aten::Tensor& t);

}  // namespace et_tensorrt
