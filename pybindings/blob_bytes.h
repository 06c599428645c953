// A blob handed in from Python: any C-contiguous buffer, read in place. Both modules take blobs so: _C (the
// delegate's choice and plans, for drivers without a .pte) and format/_reader (the reader, without torch).
#pragma once

#include <pybind11/pybind11.h>

#include <string_view>

namespace et_tensorrt::python {

// The bytes of `data`, valid while `info` (the buffer request this fills) lives; a non-contiguous buffer is refused.
inline std::string_view bytes_view(const pybind11::buffer& data, pybind11::buffer_info& info) {
  info = data.request();
  if (!PyBuffer_IsContiguous(info.view(), 'C')) {
    throw pybind11::buffer_error("a blob must be a C-contiguous buffer (bytes, bytearray or a contiguous memoryview)");
  }
  return {static_cast<const char*>(info.ptr), static_cast<size_t>(info.size * info.itemsize)};
}

}  // namespace et_tensorrt::python
