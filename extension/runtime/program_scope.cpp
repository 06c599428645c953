#include "program_scope.h"

namespace et_tensorrt {

ProgramScope program_scope(const executorch::runtime::NamedDataMap* named_data_map, const char* method_name) {
  ProgramScope scope;
  scope.method = method_name == nullptr ? "" : method_name;
  if (named_data_map == nullptr) return scope;
  const auto keys = named_data_map->get_num_keys();
  if (!keys.ok() || keys.get() == 0) return scope;
  const auto first = named_data_map->get_key(0);
  if (first.ok() && first.get() != nullptr) scope.id = reinterpret_cast<uintptr_t>(first.get());
  return scope;
}

}  // namespace et_tensorrt
