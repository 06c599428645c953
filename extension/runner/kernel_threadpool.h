// ExecuTorch's CPU kernels create their thread pool on first use, and creating it logs ExecuTorch's "cpuinfo"
// lines (Info level, written to file descriptor 2: ExecuTorch has no runtime log level). The runner creates the
// pool once, before a method first runs, with fd 2 on /dev/null for that one call, so no kernel logs them later.
#pragma once

namespace et_tensorrt {

// Once per process; nothing when ExecuTorch's thread pool library is not loaded (no kernel library, no pool).
void create_kernel_threadpool_quietly();

}  // namespace et_tensorrt
