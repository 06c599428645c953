#include "delegate_fields_check.h"

#include <cstring>

#include "../format/flatbuffer_view.h"
#include "program_fields.h"

namespace et_tensorrt {

using namespace program_fields;

size_t program_flatbuffer_size(const uint8_t* data, size_t size) {
  uint64_t program_size = 0;
  if (size >= 32 && std::memcmp(data + 8, "eh00", 4) == 0) {
    std::memcpy(&program_size, data + 16, sizeof(program_size));
    if (program_size > 0 && program_size <= size) return static_cast<size_t>(program_size);
  }
  return size;
}

std::string missing_delegate_fields(const uint8_t* data, size_t size) {
  const Flatbuffer fb(data, size);
  const auto program = fb.root();
  if (!program) return "the program's root table lies outside the file";
  const auto plans = fb.deref_field(*program, kProgramExecutionPlan);
  if (!plans) return "";  // no plans: nothing to load (ExecuTorch reports it)
  const auto n_plans = fb.length(*plans);
  if (!n_plans) return "the execution plan list is damaged";
  for (uint32_t p = 0; p < *n_plans; ++p) {
    const auto plan = fb.follow(*plans + 4 + 4 * static_cast<size_t>(p));
    if (!plan) return "execution plan " + std::to_string(p) + " is damaged";
    const auto name = fb.deref_field(*plan, kPlanName);
    if (!name) return "execution plan " + std::to_string(p) + " has no name";  // Method::init logs it unchecked
    const std::string where = "method '" + fb.string_at(*name) + "'";
    const auto delegates = fb.deref_field(*plan, kPlanDelegates);
    if (!delegates) continue;
    const auto n_delegates = fb.length(*delegates);
    if (!n_delegates) return where + ": its delegate list is damaged";
    for (uint32_t d = 0; d < *n_delegates; ++d) {
      const std::string what = where + " delegate " + std::to_string(d);
      const auto delegate = fb.follow(*delegates + 4 + 4 * static_cast<size_t>(d));
      if (!delegate) return what + " is damaged";
      if (!fb.deref_field(*delegate, kDelegateId)) return what + " has no backend id";
      if (!fb.deref_field(*delegate, kDelegateProcessed)) return what + " has no processed-data reference";
      const auto specs = fb.deref_field(*delegate, kDelegateCompileSpecs);
      if (!specs) return what + " has no compile-spec list";
      const auto n_specs = fb.length(*specs);
      if (!n_specs) return what + ": its compile-spec list is damaged";
      for (uint32_t s = 0; s < *n_specs; ++s) {
        const auto spec = fb.follow(*specs + 4 + 4 * static_cast<size_t>(s));
        if (!spec) return what + " compile spec " + std::to_string(s) + " is damaged";
        if (!fb.deref_field(*spec, kCompileSpecKey)) return what + " compile spec " + std::to_string(s) + " has no key";
        if (!fb.deref_field(*spec, kCompileSpecValue)) {
          return what + " compile spec " + std::to_string(s) + " has no value";
        }
      }
    }
  }
  return "";
}

}  // namespace et_tensorrt
