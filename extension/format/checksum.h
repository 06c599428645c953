// zlib's CRC-32 (ISO-HDLC) of a byte range: what a blob's DIGESTS records per section and its NAMED_DATA per named
// datum. Ranges of 64 MiB and more are split over threads and the parts combined (crc32_combine), so a multi-GB
// .ptd is checked at several GB/s where the host has the cores.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace et_tensorrt {

uint32_t crc32_of(const uint8_t* data, size_t size);

// "0x1234abcd", as errors print a CRC-32.
std::string hex32(uint32_t value);

}  // namespace et_tensorrt
