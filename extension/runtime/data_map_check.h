// The named data a delegate is given at init, checked before the delegate reads anything from it. ExecuTorch's
// FlatTensorDataMap (a .ptd) reads its key table unverified, and every lookup (get_data, get_key) walks it: a damaged
// table crashed the process inside get_data, through executorch.runtime (issue 45; Runner checks the file before
// ExecuTorch maps it). The delegate walks the very bytes ExecuTorch loaded, bounds-checked, first.
#pragma once

#include <string>

#include <executorch/runtime/core/named_data_map.h>

namespace et_tensorrt {

// What is wrong with `map` ("" when nothing, or when it is no map ExecuTorch reads unverified): every .ptd in it (a
// FlatTensorDataMap, alone or inside ExecuTorch's merged maps) must have a whole key table whose segments lie inside
// its file (format/flat_tensor_table.h).
std::string damaged_data_map(const executorch::runtime::NamedDataMap* map);

}  // namespace et_tensorrt
