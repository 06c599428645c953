#include <pybind11/pybind11.h>

#include "../extension/tensor/errors.h"
#include "bindings.h"

namespace py = pybind11;

namespace et_tensorrt::python {

void register_error_translators(py::module_& m) {
  // Intentionally leaked: the translator (which cannot capture) needs it until the interpreter ends,
  // and a static py::object would be released after Python has already finalized.
  static py::object& errors = *new py::object(py::module_::import("et_tensorrt.errors"));
  (void)m;
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const UnsupportedDeviceError& e) {
      PyErr_SetString(errors.attr("UnsupportedDeviceError").ptr(), e.what());
    } catch (const LayoutError& e) {
      PyErr_SetString(errors.attr("LayoutError").ptr(), e.what());
    } catch (const UnsupportedDtypeError& e) {
      PyErr_SetString(errors.attr("UnsupportedDtypeError").ptr(), e.what());
    }
  });
}

} // namespace et_tensorrt::python
