// torch dtype <-> ExecuTorch ScalarType. ExecuTorch's ScalarType reuses c10's codes 0..29 (Byte ..
// UInt64); torch dtypes past that (sub-byte ints, newer float8/float4 formats) are refused by name.
#pragma once

#include <c10/core/ScalarType.h>

#include "../format/scalar_types.h"

namespace et_tensorrt {

EtScalarType torch_to_executorch_dtype(c10::ScalarType dtype);
c10::ScalarType executorch_to_torch_dtype(EtScalarType dtype);

}  // namespace et_tensorrt
