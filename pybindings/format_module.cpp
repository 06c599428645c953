// et_tensorrt.format._reader: the one blob reader (extension/format/) for Python, without torch. It links neither
// torch nor ExecuTorch, so `et-tensorrt inspect` and the format layer read blobs without loading them (a second);
// the delegate runtime (et_tensorrt._C) links the same reader.
#include <pybind11/pybind11.h>

#include <string_view>

#include "../extension/format/blob_fields.h"
#include "../extension/format/blob_reader.h"
#include "../extension/format/scalar_types.h"
#include "blob_bytes.h"

namespace py = pybind11;

namespace {

// A code as the enum (int8_t underneath); one outside its range is no ScalarType: Undefined names none.
et_tensorrt::EtScalarType scalar_type(int code) {
  return code < 0 || code > 127 ? et_tensorrt::EtScalarType::Undefined : static_cast<et_tensorrt::EtScalarType>(code);
}

}  // namespace

PYBIND11_MODULE(_reader, m) {
  m.doc() = "The delegate blob's C++ reader and dtype codes, without torch (et_tensorrt.format)";
  // Intentionally leaked: the translator (which cannot capture) needs it until the interpreter ends.
  static py::object& errors = *new py::object(py::module_::import("et_tensorrt.errors"));
  py::register_local_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const et_tensorrt::BlobFormatError& e) {
      PyErr_SetString(errors.attr("BlobFormatError").ptr(), e.what());
    }
  });

  m.def(
      "parse_blob",
      [](const py::buffer& data) {
        py::buffer_info info;
        const std::string_view bytes = et_tensorrt::python::bytes_view(data, info);
        const auto* base = reinterpret_cast<const uint8_t*>(bytes.data());
        const et_tensorrt::DelegateBlob blob = et_tensorrt::parse_delegate_blob(base, bytes.size());
        // Section payloads come back as slices of a byte view of `data` (which the slices keep alive).
        return et_tensorrt::blob_fields(blob, base, py::memoryview(data).attr("cast")("B"));
      },
      py::arg("blob"),
      "Parse a delegate blob with the C++ reader the runtime uses (raises BlobFormatError). Returns a dict of plain "
      "values: version, execution_device and each I/O entry's device as (type, index) codes, dtypes as ExecuTorch "
      "ScalarType codes, the WEIGHTS, REFIT_MAP, STATE and NAMED_DATA tables, and each section's payload as a "
      "memoryview slice of `blob`, or None; recipe: the RECIPE's version, header, graph, map and entries, or None.");

  m.def(
      "scalar_type_name",
      [](int code) -> py::object {
        const char* name = et_tensorrt::scalar_type_name(scalar_type(code));
        return name == nullptr ? py::object(py::none()) : py::object(py::str(name));
      },
      py::arg("code"),
      "ExecuTorch ScalarType code -> torch's name for it ('float32'), or None for a code torch lacks.");
  m.def(
      "scalar_type_size", [](int code) { return et_tensorrt::scalar_type_size(scalar_type(code)); }, py::arg("code"),
      "ExecuTorch ScalarType code -> its element size in bytes, or 0 for a code torch lacks.");
}
