#include "dtype_translation.h"

#include <string>

#include "errors.h"

namespace et_tensorrt {
namespace {

// The codes both enums share, checked at compile time so a reordering on either side fails the build.
#define ET_TENSORRT_SHARED_DTYPES(_) \
  _(Byte)                            \
  _(Char)                            \
  _(Short)                           \
  _(Int)                             \
  _(Long)                            \
  _(Half)                            \
  _(Float)                           \
  _(Double)                          \
  _(ComplexHalf)                     \
  _(ComplexFloat)                    \
  _(ComplexDouble)                   \
  _(Bool)                            \
  _(QInt8)                           \
  _(QUInt8)                          \
  _(QInt32)                          \
  _(BFloat16)                        \
  _(QUInt4x2)                        \
  _(QUInt2x4)                        \
  _(Bits1x8)                         \
  _(Bits2x4)                         \
  _(Bits4x2)                         \
  _(Bits8)                           \
  _(Bits16)                          \
  _(Float8_e5m2)                     \
  _(Float8_e4m3fn)                   \
  _(Float8_e5m2fnuz)                 \
  _(Float8_e4m3fnuz)                 \
  _(UInt16)                          \
  _(UInt32)                          \
  _(UInt64)

#define ET_TENSORRT_CHECK_CODE(name)                                                             \
  static_assert(static_cast<int>(c10::ScalarType::name) == static_cast<int>(EtScalarType::name), \
                "c10 and ExecuTorch disagree on the code of " #name);
ET_TENSORRT_SHARED_DTYPES(ET_TENSORRT_CHECK_CODE)
#undef ET_TENSORRT_CHECK_CODE

}  // namespace

EtScalarType torch_to_executorch_dtype(c10::ScalarType dtype) {
  switch (dtype) {
#define ET_TENSORRT_CASE(name) \
  case c10::ScalarType::name:  \
    return EtScalarType::name;
    ET_TENSORRT_SHARED_DTYPES(ET_TENSORRT_CASE)
#undef ET_TENSORRT_CASE
    default:
      throw UnsupportedDtypeError(std::string("dtype ") + c10::toString(dtype) +
                                  " has no ExecuTorch ScalarType; convert the tensor (e.g. .to(torch.float32)) first");
  }
}

c10::ScalarType executorch_to_torch_dtype(EtScalarType dtype) {
  switch (dtype) {
#define ET_TENSORRT_CASE(name) \
  case EtScalarType::name:     \
    return c10::ScalarType::name;
    ET_TENSORRT_SHARED_DTYPES(ET_TENSORRT_CASE)
#undef ET_TENSORRT_CASE
    default:
      throw UnsupportedDtypeError("ExecuTorch ScalarType code " + std::to_string(static_cast<int>(dtype)) +
                                  " has no torch dtype");
  }
}

}  // namespace et_tensorrt
