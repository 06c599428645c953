// The key table of an ExecuTorch data file (.ptd, FlatTensor), walked bounds-checked. ExecuTorch's FlatTensorDataMap
// reads that flatbuffer without verifying it (a flipped byte there crashed it: finding F10, issue 45), so both
// readers of ours check it first: Runner from the file before ExecuTorch maps it (runner/data_file_check.h), the
// delegate from the bytes ExecuTorch loaded before it asks the map for anything (runtime/data_map_check.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

namespace et_tensorrt {

// What is wrong with the key table `data` (the file from its start to the end of its flatbuffer), "" when nothing:
// every field ExecuTorch's data map reads (the root, the segment and key lists, each entry's key, segment index and
// tensor layout) lies inside it, each entry names a segment, and each segment (from `segment_base`) lies inside the
// file (`file_size`). The keys go into `keys` (may be null).
std::string flat_tensor_table_problem(const uint8_t* data, size_t size, uint64_t segment_base, uint64_t file_size,
                                      std::set<std::string>* keys);

}  // namespace et_tensorrt
