// Describes an at::Tensor as an ExecuTorch runtime tensor (TensorPtr) that carries the tensor's real
// device. Nothing is copied: the descriptor points at the tensor's memory and owns a reference to the
// at::Tensor (inside make_tensor_ptr's deleter) so that memory lives as long as the descriptor does.
#pragma once

#include <ATen/core/Tensor.h>
#include <executorch/extension/tensor/tensor_ptr.h>

#include <cstddef>
#include <string>

namespace et_tensorrt {

using executorch::extension::TensorPtr;

// Throws UnsupportedDeviceError / UnsupportedDtypeError / LayoutError before ExecuTorch sees anything
// it would abort on.
TensorPtr make_descriptor(const at::Tensor& tensor);

// make_descriptor for argument `index` of `method`: errors keep their type and gain the context,
// e.g. "input 2 of method 'forward' is on device meta, which the ExecuTorch runtime does not model".
TensorPtr describe_input(const at::Tensor& tensor, size_t index, const std::string& method);

}  // namespace et_tensorrt
