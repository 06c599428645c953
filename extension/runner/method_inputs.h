// A method's inputs as its caller knows them, in the runner's and the delegate's errors: "input 1
// ('cache_position')". ExecuTorch keeps the exported program's input spec (ExecutionPlan.container_meta_type
// .encoded_inp_str, a pytree spec: keyword arguments by name); it is read from the file, and turned into names by
// et_tensorrt.runtime.input_names, only when an error needs them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace et_tensorrt {

// The method's encoded_inp_str in the program flatbuffer `data` (bounds-checked), or "" when it has none.
std::string method_input_spec(const uint8_t* data, size_t size, const std::string& method);

// One name per input from a spec ("" for a positional argument); empty when Python cannot read it.
std::vector<std::string> method_input_names(const std::string& spec);

}  // namespace et_tensorrt
