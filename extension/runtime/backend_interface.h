// Registers the et_tensorrt delegate (backend id "EtTensorRTBackend") into the backend registry of
// libexecutorch.so — the same registry ExecuTorch's own Python runtime uses.
#pragma once

namespace et_tensorrt {

inline constexpr const char* kBackendId = "EtTensorRTBackend";

// Idempotent; returns false when another library registered the id first.
bool register_tensorrt_backend();

}  // namespace et_tensorrt
