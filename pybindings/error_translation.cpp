#include <pybind11/pybind11.h>

#include "../extension/aten_util/errors.h"
#include "../extension/runner/program_runner.h"
#include "../extension/format/blob_reader.h"
#include "../extension/runtime/delegate_handle.h"
#include "../extension/runtime/placement_plan.h"
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
    } catch (const BlobFormatError& e) {
      PyErr_SetString(errors.attr("BlobFormatError").ptr(), e.what());
    } catch (const PlacementRejected& e) {
      PyErr_SetString(errors.attr("PlacementError").ptr(), e.what());
    } catch (const PlacementCountError& e) {
      PyErr_SetString(errors.attr("PlacementError").ptr(), e.what());
    } catch (const InputShapeError& e) {
      PyErr_SetString(errors.attr("InputShapeError").ptr(), e.what());
    } catch (const RunnerError& e) {
      PyErr_SetString(errors.attr("RunnerError").ptr(), e.what());
    }
  });
}

}  // namespace et_tensorrt::python
