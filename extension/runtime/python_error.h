// Python exceptions raised into the delegate, turned into the one line a user reads.
#pragma once

#include <torch/python.h>

#include <stdexcept>

namespace et_tensorrt {

// "Type: message" of a Python exception, without pybind11's traceback.
std::runtime_error python_error(const pybind11::error_already_set& e);

}  // namespace et_tensorrt
