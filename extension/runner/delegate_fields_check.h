// A check ExecuTorch 1.5 leaves out: its flatbuffer verifier accepts a program whose optional fields are
// absent, but Method::init dereferences some of them unchecked (BackendDelegate::Init: a delegate's
// processed reference and compile-spec list, each compile spec's key and value; the plan's name). Such a
// program (one flipped vtable byte makes one) passes InternalConsistency verification and then crashes at
// load_method. The runner refuses it after verification, before any method is loaded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace et_tensorrt {

// What is missing ("method 'forward' delegate 0: compile spec 1 has no key"), or "" when every delegate
// has its fields. `data` is the program's flatbuffer (the file up to the extended header's program_size);
// every read is bounds-checked, so unverified data is refused rather than over-read.
std::string missing_delegate_fields(const uint8_t* data, size_t size);

// The flatbuffer part of a .pte: its length from the extended header ("eh00" at offset 8), or `size`.
size_t program_flatbuffer_size(const uint8_t* data, size_t size);

}  // namespace et_tensorrt
