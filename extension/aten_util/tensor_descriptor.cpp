#include "tensor_descriptor.h"

#include <vector>

#include "dense_layout.h"
#include "device_translation.h"
#include "dtype_translation.h"
#include "errors.h"

namespace et_tensorrt {
namespace {

void check_representable(const at::Tensor& tensor) {
  if (!tensor.defined()) {
    throw std::invalid_argument("tensor is undefined");
  }
  if (tensor.layout() != c10::kStrided) {
    throw LayoutError("layout " + c10::str(tensor.layout()) + " is not strided; call .to_dense() before passing it");
  }
  if (tensor.is_conj() || tensor.is_neg()) {
    // The bits say "negate/conjugate on read"; the memory holds the un-negated values.
    throw LayoutError("tensor has a lazy conjugate/negative view bit; call .resolve_conj().resolve_neg() first");
  }
}

}  // namespace

TensorPtr make_descriptor(const at::Tensor& tensor) {
  check_representable(tensor);
  // Validate everything before calling ExecuTorch, which aborts the process on bad strides.
  const EtDevice device = torch_to_executorch_device(tensor.device());
  const EtScalarType dtype = torch_to_executorch_dtype(tensor.scalar_type());
  DenseLayout layout = dense_layout(tensor.sizes().data(), tensor.strides().data(), tensor.dim());

  return executorch::extension::make_tensor_ptr(
      std::move(layout.sizes), tensor.data_ptr(), std::move(layout.dim_order), std::move(layout.strides), dtype, device,
      executorch::aten::TensorShapeDynamism::STATIC,
      // Ownership: the descriptor holds a reference to the at::Tensor until it is destroyed.
      [keep_alive = tensor](void*) {});
}

TensorPtr describe_input(const at::Tensor& tensor, size_t index, const std::string& method) {
  const std::string where = "input " + std::to_string(index) + " of method '" + method + "'";
  try {
    return make_descriptor(tensor);
  } catch (const UnsupportedDeviceError&) {
    throw UnsupportedDeviceError(where + " is on device " + tensor.device().str() +
                                 ", which the ExecuTorch runtime does not model (only cpu and cuda); "
                                 "move it with .to('cpu') or .to('cuda')");
  } catch (const UnsupportedDtypeError& e) {
    throw UnsupportedDtypeError(where + ": " + e.what());
  } catch (const LayoutError& e) {
    throw LayoutError(where + " (device " + tensor.device().str() + "): " + e.what());
  }
}

}  // namespace et_tensorrt
