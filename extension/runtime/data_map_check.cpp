#include "data_map_check.h"

#include <executorch/extension/flat_tensor/flat_tensor_data_map.h>
#include <executorch/extension/named_data_map/merged_data_map.h>
#include <executorch/runtime/executor/merged_data_map.h>

#include <vector>

#include "../format/flat_tensor_table.h"

namespace et_tensorrt {
namespace {

using executorch::extension::FlatTensorDataMap;
using executorch::runtime::DataLoader;
using executorch::runtime::FreeableBuffer;
using executorch::runtime::NamedDataMap;
using MethodMergedMap = executorch::runtime::internal::MergedDataMap;  // a method's: .ptd + the .pte's
using ModuleMergedMap = executorch::extension::ET_MERGED_DATA_MAP_NAMESPACE::MergedDataMap;  // a Module's data files

// ExecuTorch gives a backend no other way to the bytes its data map reads than the map's own members, which its
// public header declares private. An explicit instantiation may name a private member ([temp.spec.general]/6), so
// these pointers are the header's own members (the compiler checks their types), never a guess at its layout.
template <typename Tag, typename Tag::type Member>
struct Expose {
  friend typename Tag::type member(Tag) { return Member; }
};

struct FlatHeader {
  using type = const executorch::extension::FlatTensorHeader FlatTensorDataMap::*;
  friend type member(FlatHeader);
};
struct FlatData {
  using type = FreeableBuffer FlatTensorDataMap::*;
  friend type member(FlatData);
};
struct FlatLoader {
  using type = DataLoader* FlatTensorDataMap::*;
  friend type member(FlatLoader);
};
struct MethodFirst {
  using type = const NamedDataMap* MethodMergedMap::*;
  friend type member(MethodFirst);
};
struct MethodSecond {
  using type = const NamedDataMap* MethodMergedMap::*;
  friend type member(MethodSecond);
};
struct ModuleMaps {
  using type = std::vector<const NamedDataMap*> ModuleMergedMap::*;
  friend type member(ModuleMaps);
};

template struct Expose<FlatHeader, &FlatTensorDataMap::header_>;
template struct Expose<FlatData, &FlatTensorDataMap::flat_tensor_data_>;
template struct Expose<FlatLoader, &FlatTensorDataMap::loader_>;
template struct Expose<MethodFirst, &MethodMergedMap::first_>;
template struct Expose<MethodSecond, &MethodMergedMap::second_>;
template struct Expose<ModuleMaps, &ModuleMergedMap::named_data_maps_>;

std::string flat_map_problem(const FlatTensorDataMap& map) {
  const auto& header = map.*member(FlatHeader{});
  const FreeableBuffer& table = map.*member(FlatData{});
  DataLoader* loader = map.*member(FlatLoader{});
  const auto file_size = loader != nullptr ? loader->size() : executorch::runtime::Result<size_t>(0);
  if (!file_size.ok()) return "its size cannot be read";
  return flat_tensor_table_problem(static_cast<const uint8_t*>(table.data()), table.size(), header.segment_base_offset,
                                   file_size.get(), nullptr);
}

std::string problem(const NamedDataMap* map, int depth) {
  if (map == nullptr || depth > 8) return "";
  if (const auto* flat = dynamic_cast<const FlatTensorDataMap*>(map)) return flat_map_problem(*flat);
  if (const auto* merged = dynamic_cast<const MethodMergedMap*>(map)) {
    const std::string first = problem(merged->*member(MethodFirst{}), depth + 1);
    return first.empty() ? problem(merged->*member(MethodSecond{}), depth + 1) : first;
  }
  if (const auto* merged = dynamic_cast<const ModuleMergedMap*>(map)) {
    for (const NamedDataMap* inner : merged->*member(ModuleMaps{})) {
      const std::string found = problem(inner, depth + 1);
      if (!found.empty()) return found;
    }
  }
  return "";  // the .pte's own named data (verified with the program) or a map of the caller's own
}

}  // namespace

std::string damaged_data_map(const NamedDataMap* map) { return problem(map, 0); }

}  // namespace et_tensorrt
