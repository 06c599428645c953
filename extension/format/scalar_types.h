// The dtype codes of the blob format: ExecuTorch's ScalarType, and ExecuTorch's Device, as this code names them.
// Torch-free (ExecuTorch's portable headers only), so that the blob reader builds into et_tensorrt.format._reader,
// which reads a blob without loading torch; the torch <-> ExecuTorch translation is extension/aten_util/'s.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <executorch/runtime/core/portable_type/device.h>
#include <executorch/runtime/core/portable_type/scalar_type.h>

namespace et_tensorrt {

using EtScalarType = executorch::runtime::etensor::ScalarType;
using EtDevice = executorch::runtime::etensor::Device;
using EtDeviceType = executorch::runtime::etensor::DeviceType;

// Every ScalarType torch has too (codes 0..29: ExecuTorch reuses c10's), with torch's name for it (`torch.<name>`)
// and its element size in bytes (c10's: a packed sub-byte type counts one byte). The one table:
// aten_util/dtype_translation.cpp translates by it (checking each code against c10's at compile time), and
// et_tensorrt.format.dtypes names dtypes by it.
#define ET_TENSORRT_SCALAR_TYPES(_)        \
  _(Byte, "uint8", 1)                      \
  _(Char, "int8", 1)                       \
  _(Short, "int16", 2)                     \
  _(Int, "int32", 4)                       \
  _(Long, "int64", 8)                      \
  _(Half, "float16", 2)                    \
  _(Float, "float32", 4)                   \
  _(Double, "float64", 8)                  \
  _(ComplexHalf, "complex32", 4)           \
  _(ComplexFloat, "complex64", 8)          \
  _(ComplexDouble, "complex128", 16)       \
  _(Bool, "bool", 1)                       \
  _(QInt8, "qint8", 1)                     \
  _(QUInt8, "quint8", 1)                   \
  _(QInt32, "qint32", 4)                   \
  _(BFloat16, "bfloat16", 2)               \
  _(QUInt4x2, "quint4x2", 1)               \
  _(QUInt2x4, "quint2x4", 1)               \
  _(Bits1x8, "bits1x8", 1)                 \
  _(Bits2x4, "bits2x4", 1)                 \
  _(Bits4x2, "bits4x2", 1)                 \
  _(Bits8, "bits8", 1)                     \
  _(Bits16, "bits16", 2)                   \
  _(Float8_e5m2, "float8_e5m2", 1)         \
  _(Float8_e4m3fn, "float8_e4m3fn", 1)     \
  _(Float8_e5m2fnuz, "float8_e5m2fnuz", 1) \
  _(Float8_e4m3fnuz, "float8_e4m3fnuz", 1) \
  _(UInt16, "uint16", 2)                   \
  _(UInt32, "uint32", 4)                   \
  _(UInt64, "uint64", 8)

// torch's name for `dtype` ("float32"), or nullptr for a code torch lacks.
inline const char* scalar_type_name(EtScalarType dtype) {
  switch (dtype) {
#define ET_TENSORRT_NAME(name, text, size) \
  case EtScalarType::name:                 \
    return text;
    ET_TENSORRT_SCALAR_TYPES(ET_TENSORRT_NAME)
#undef ET_TENSORRT_NAME
    default:
      return nullptr;
  }
}

// How messages name `dtype`: torch's name ("float32"), as Python prints it; "ScalarType(N)" for a code torch lacks.
inline std::string dtype_text(EtScalarType dtype) {
  const char* name = scalar_type_name(dtype);
  return name != nullptr ? name : "ScalarType(" + std::to_string(static_cast<int>(dtype)) + ")";
}

// The element size of `dtype` in bytes, or 0 for a code torch lacks.
inline size_t scalar_type_size(EtScalarType dtype) {
  switch (dtype) {
#define ET_TENSORRT_SIZE(name, text, size) \
  case EtScalarType::name:                 \
    return size;
    ET_TENSORRT_SCALAR_TYPES(ET_TENSORRT_SIZE)
#undef ET_TENSORRT_SIZE
    default:
      return 0;
  }
}

}  // namespace et_tensorrt
