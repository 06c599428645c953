// Cross-checks a descriptor's device label against what the CUDA driver says about the pointer.
// Only where CUDA is usable: the driver library is looked up among already-loaded libraries
// (RTLD_NOLOAD), so a CPU-only process never loads it and every answer is Unknown.
#pragma once

#include "../aten_util/device_translation.h"

namespace et_tensorrt {

struct PointerResidence {
  enum Kind { Unknown, Host, Device } kind = Unknown;
  int device_index = 0;  // for Device
};

PointerResidence pointer_residence(const void* ptr);

}  // namespace et_tensorrt
