#include "blob_to_python.h"

#include <cstring>

#include "../aten_util/dtype_translation.h"

namespace py = pybind11;

namespace et_tensorrt {
namespace {

// A WEIGHTS entry as a tensor over `bytes` (the blob's, or its named data's); the deleter holds `owner` alive.
at::Tensor weight_view(const WeightEntry& w, const uint8_t* bytes, const std::shared_ptr<const void>& owner) {
  const c10::ScalarType dtype = executorch_to_torch_dtype(w.dtype);
  const auto options = at::TensorOptions().dtype(dtype).device(c10::kCPU);
  if (w.nbytes == 0) return at::empty_strided(w.sizes, w.strides, options);
  void* data = const_cast<uint8_t*>(bytes);  // read-only by contract (see the header)
  if (reinterpret_cast<uintptr_t>(data) % c10::elementSize(dtype) != 0) {
    // Not aligned for its dtype (a blob stored unaligned in the .pte): a copy of its own.
    at::Tensor bytes = at::empty({static_cast<int64_t>(w.nbytes)}, at::TensorOptions().dtype(at::kByte));
    std::memcpy(bytes.data_ptr(), data, w.nbytes);
    return bytes.view(dtype).as_strided(w.sizes, w.strides);
  }
  return at::from_blob(data, w.sizes, w.strides, [owner](void*) {}, options);
}

}  // namespace

py::dict blob_to_python(const DelegateBlob& blob, const uint8_t* base, const py::object& view,
                        std::shared_ptr<const void> owner, const NamedData* named) {
  py::dict out = blob_fields(blob, base, view);
  if (named != nullptr && named->engine.present) {
    // A named engine: a view of ExecuTorch's buffer, valid while the delegate holds it (the executor deserializes
    // it at init).
    out["engine"] = py::memoryview::from_memory(static_cast<const void*>(named->engine.data),
                                                static_cast<py::ssize_t>(named->engine.size));
  }
  if (owner) {
    py::list views;
    for (size_t i = 0; i < blob.weight_entries.size(); ++i) {
      const WeightEntry& w = blob.weight_entries[i];
      if (w.named) {
        if (named == nullptr || named->weights[i] == nullptr) throw std::logic_error("named weight not resolved");
        views.append(weight_view(w, named->weights[i], named->owners[i]));
      } else {
        views.append(weight_view(w, base + w.offset, owner));
      }
    }
    out["weight_views"] = views;
  }
  return out;
}

}  // namespace et_tensorrt
