// Which loaded program a delegate belongs to: the key under which its methods' delegates share state.
//
// ExecuTorch hands a backend no handle of the Program at init, only the method's name and its NamedDataMap. That
// map is the Program's own (or the caller's .ptd map, or a MergedDataMap of the two that ExecuTorch makes per
// method), and every key it lists is a string inside a header the Program (or the .ptd's map) loaded once and keeps
// for its life: the address of its first key is the same for every method of one loaded program, and differs
// between two loads. A program whose methods share a state therefore always carries named data (preprocess makes
// sure); without it the id is 0 and such a state is refused at init rather than held per method.
#pragma once

#include <cstdint>
#include <string>

#include <executorch/runtime/core/named_data_map.h>

namespace et_tensorrt {

struct ProgramScope {
  uintptr_t id = 0;    // 0: no named data, so no way to tell which program this is
  std::string method;  // the method whose delegate this is ("" when unknown)
};

ProgramScope program_scope(const executorch::runtime::NamedDataMap* named_data_map, const char* method_name);

}  // namespace et_tensorrt
