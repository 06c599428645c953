// torch dtype <-> ExecuTorch ScalarType. ExecuTorch's ScalarType reuses c10's codes 0..29 (Byte ..
// UInt64); torch dtypes past that (sub-byte ints, newer float8/float4 formats) are refused by name.
#pragma once

#include <c10/core/ScalarType.h>
#include <executorch/runtime/core/portable_type/scalar_type.h>

namespace et_tensorrt {

using EtScalarType = executorch::runtime::etensor::ScalarType;

EtScalarType torch_to_executorch_dtype(c10::ScalarType dtype);
c10::ScalarType executorch_to_torch_dtype(EtScalarType dtype);

}  // namespace et_tensorrt
