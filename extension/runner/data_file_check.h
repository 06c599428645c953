// A .ptd given to a Runner, checked before ExecuTorch maps it: a file that is not an ExecuTorch data file, one
// shorter than its header says (truncated), or one whose key table is damaged (ExecuTorch reads it unverified: a
// flipped byte there would crash it) is one RunnerError naming it; otherwise its keys, so a delegate's named-data
// error can say which file holds what (named_data.h, DataFiles).
#pragma once

#include <set>
#include <string>

namespace et_tensorrt {

// The keys `data_path` holds; throws RunnerError ("cannot load data file <data_path> for program <program>: ...").
std::set<std::string> data_file_keys(const std::string& data_path, const std::string& program);

}  // namespace et_tensorrt
