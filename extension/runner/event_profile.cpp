#include "event_profile.h"

#include <executorch/runtime/platform/clock.h>
#include <executorch/runtime/platform/platform.h>

#include <cstdlib>
#include <memory>

namespace et_tensorrt {

using executorch::runtime::DelegateDebugIntId;
using executorch::runtime::EventTracerEntry;

namespace {
std::string event_name(const char* name, DelegateDebugIntId id) {
  return name != nullptr ? std::string(name) : std::to_string(id);
}
}  // namespace

EventTracerEntry EventProfile::start_profiling_delegate(const char* name, DelegateDebugIntId delegate_debug_index) {
  const std::lock_guard<std::mutex> lock(mutex_);
  open_.push_back(event_name(name, delegate_debug_index));
  return ETDumpGen::start_profiling_delegate(name, delegate_debug_index);
}

void EventProfile::end_profiling_delegate(EventTracerEntry entry, const void* metadata, size_t metadata_len) {
  const et_timestamp_t end = et_pal_current_ticks();
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    std::string name = open_.empty() ? std::string("?") : std::move(open_.back());
    if (!open_.empty()) open_.pop_back();
    events_.push_back(ProfileEvent{std::move(name), executorch::runtime::ticks_to_ns(entry.start_time),
                                   executorch::runtime::ticks_to_ns(end),
                                   metadata ? std::string(static_cast<const char*>(metadata), metadata_len) : ""});
  }
  ETDumpGen::end_profiling_delegate(entry, metadata, metadata_len);
}

void EventProfile::log_profiling_delegate(const char* name, DelegateDebugIntId delegate_debug_index,
                                          et_timestamp_t start_time, et_timestamp_t end_time, const void* metadata,
                                          size_t metadata_len) {
  record(name, delegate_debug_index, start_time, end_time, metadata, metadata_len);
  ETDumpGen::log_profiling_delegate(name, delegate_debug_index, start_time, end_time, metadata, metadata_len);
}

void EventProfile::record(const char* name, DelegateDebugIntId id, et_timestamp_t start, et_timestamp_t end,
                          const void* metadata, size_t metadata_len) {
  const std::lock_guard<std::mutex> lock(mutex_);
  events_.push_back(ProfileEvent{event_name(name, id), executorch::runtime::ticks_to_ns(start),
                                 executorch::runtime::ticks_to_ns(end),
                                 metadata ? std::string(static_cast<const char*>(metadata), metadata_len) : ""});
}

std::vector<ProfileEvent> EventProfile::events() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return events_;
}

std::string EventProfile::take_etdump() {
  const std::lock_guard<std::mutex> lock(mutex_);
  const executorch::etdump::ETDumpResult result = get_etdump_data();
  // The generator allocated the buffer (no static buffer was given): the caller frees it, as ExecuTorch's own
  // write_etdump_result_to_file does.
  const std::unique_ptr<void, decltype(&std::free)> owned(result.buf, &std::free);
  std::string out = result.buf != nullptr ? std::string(static_cast<const char*>(result.buf), result.size) : "";
  reset();  // get_etdump_data finished the flatbuffer: a new one for the calls after
  events_.clear();
  open_.clear();
  return out;
}

}  // namespace et_tensorrt
