#include "dtype_translation.h"

#include <string>

#include "errors.h"

namespace et_tensorrt {
namespace {

// Every code of the one table (format/scalar_types.h) is c10's too, checked at compile time so that a reordering on
// either side fails the build.
#define ET_TENSORRT_CHECK_CODE(name, text, size)                                                 \
  static_assert(static_cast<int>(c10::ScalarType::name) == static_cast<int>(EtScalarType::name), \
                "c10 and ExecuTorch disagree on the code of " #name);
ET_TENSORRT_SCALAR_TYPES(ET_TENSORRT_CHECK_CODE)
#undef ET_TENSORRT_CHECK_CODE

}  // namespace

EtScalarType torch_to_executorch_dtype(c10::ScalarType dtype) {
  switch (dtype) {
#define ET_TENSORRT_CASE(name, text, size) \
  case c10::ScalarType::name:              \
    return EtScalarType::name;
    ET_TENSORRT_SCALAR_TYPES(ET_TENSORRT_CASE)
#undef ET_TENSORRT_CASE
    default:
      throw UnsupportedDtypeError(std::string("dtype ") + c10::toString(dtype) +
                                  " has no ExecuTorch ScalarType; convert the tensor (e.g. .to(torch.float32)) first");
  }
}

c10::ScalarType executorch_to_torch_dtype(EtScalarType dtype) {
  switch (dtype) {
#define ET_TENSORRT_CASE(name, text, size) \
  case EtScalarType::name:                 \
    return c10::ScalarType::name;
    ET_TENSORRT_SCALAR_TYPES(ET_TENSORRT_CASE)
#undef ET_TENSORRT_CASE
    default:
      throw UnsupportedDtypeError("ExecuTorch ScalarType code " + std::to_string(static_cast<int>(dtype)) +
                                  " has no torch dtype");
  }
}

}  // namespace et_tensorrt
