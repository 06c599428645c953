#include "python_error.h"

#include <string>

namespace py = pybind11;

namespace et_tensorrt {

std::runtime_error python_error(const py::error_already_set& e) {
  std::string type = "Exception", what;
  try {
    type = py::str(e.type().attr("__name__")).cast<std::string>();
    what = py::str(e.value()).cast<std::string>();
  } catch (...) {
    what = e.what();
  }
  return std::runtime_error(type + ": " + what);
}

}  // namespace et_tensorrt
