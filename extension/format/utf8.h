// UTF-8 checks: names in a blob must be UTF-8 (the Python side decodes them), and so must every log line handed to
// ExecuTorch's Python log function (it decodes each line and aborts the process on one that is not).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace et_tensorrt {

// The length (1..4) of the well-formed UTF-8 sequence that starts at s[i], or 0 where none does: a malformed, cut
// short or overlong sequence, a surrogate, a code point past U+10FFFF.
size_t utf8_sequence_length(std::string_view s, size_t i);

bool valid_utf8(std::string_view s);

// `s` with each byte that starts no well-formed sequence written as "\xNN" (a damaged file's identifier, quoted in a
// log line): text any UTF-8 decoder takes.
std::string escape_invalid_utf8(std::string_view s);

}  // namespace et_tensorrt
