// A Runner's profile (Runner(..., profile=True), `et-tensorrt run --profile`): ExecuTorch's own ETDumpGen, which
// writes the ETDump executorch.devtools.Inspector reads, keeping besides a copy of every delegate event it logs (name,
// times, metadata), so the per-phase table needs no ETDump parser (none of executorch.exir: a runtime-only install
// has the table too). Attached to each method as it loads (ProgramRunner::ensure_loaded); a Runner without a profile
// attaches nothing, and ExecuTorch and the delegate then skip every event.
#pragma once

#include <executorch/devtools/etdump/etdump_flatcc.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace et_tensorrt {

// One delegate event as logged: any backend's (ours names its phases, delegate_events.h; other backends theirs).
struct ProfileEvent {
  std::string name;  // a string debug id, else the integer one as text
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  std::string metadata;  // the raw delegate debug metadata ("bytes=64")
};

class EventProfile final : public executorch::etdump::ETDumpGen {
 public:
  EventProfile() = default;

  executorch::runtime::EventTracerEntry start_profiling_delegate(
      const char* name, executorch::runtime::DelegateDebugIntId delegate_debug_index) override;
  void end_profiling_delegate(executorch::runtime::EventTracerEntry entry, const void* metadata,
                              size_t metadata_len) override;
  void log_profiling_delegate(const char* name, executorch::runtime::DelegateDebugIntId delegate_debug_index,
                              et_timestamp_t start_time, et_timestamp_t end_time, const void* metadata,
                              size_t metadata_len) override;

  // The delegate events since this profile began or was last taken, in the order they ended.
  std::vector<ProfileEvent> events() const;
  // The ETDump of everything logged since the profile began or was last taken (a size-prefixed flatbuffer, as
  // ExecuTorch's write_etdump_result_to_file writes it); the profile then starts over, events() included.
  std::string take_etdump();

 private:
  void record(const char* name, executorch::runtime::DelegateDebugIntId id, et_timestamp_t start, et_timestamp_t end,
              const void* metadata, size_t metadata_len);

  mutable std::mutex mutex_;  // Python reads events() while a call (without the GIL) may be logging
  std::vector<ProfileEvent> events_;
  std::vector<std::string> open_;  // names of started, not yet ended delegate events (they nest)
};

}  // namespace et_tensorrt
