// C++ error types of the descriptor layer. They carry no Python: the binding translates each into the
// et_tensorrt.errors class of the same meaning, and the delegate runtime turns them into Error values.
#pragma once

#include <stdexcept>
#include <string>

namespace et_tensorrt {

// A device type the ExecuTorch runtime does not model (anything but cpu and cuda).
struct UnsupportedDeviceError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// Strides ExecuTorch cannot express with a dim order (expanded, stepped, negative, overlapping).
struct LayoutError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// A dtype with no ExecuTorch ScalarType.
struct UnsupportedDtypeError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

}  // namespace et_tensorrt
