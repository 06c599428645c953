// torch <-> ExecuTorch device translation. ExecuTorch models only cpu and cuda; every other torch device
// type is refused (UnsupportedDeviceError) rather than reported as host memory.
#pragma once

#include <c10/core/Device.h>

#include "../format/scalar_types.h"

namespace et_tensorrt {

// cpu -> CPU, cuda:N -> CUDA(N). A bare "cuda" (no index) means the *current* CUDA device, resolved
// through torch's device guard when a CUDA runtime is loaded; without one (CPU builds, label-only
// descriptors) it is device 0, CUDA's own default current device.
EtDevice torch_to_executorch_device(c10::Device device);

// The inverse, for reporting ExecuTorch descriptors back to Python.
c10::Device executorch_to_torch_device(EtDevice device);

}  // namespace et_tensorrt
