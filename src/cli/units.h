// Parsing of human-written sizes ("4GiB", "512MiB", "1000000").
#pragma once
#include <cstdint>
#include <string>

namespace pc::cli {

// Accepts an integer with an optional unit: B, KB/MB/GB/TB (powers of 1000),
// KiB/MiB/GiB/TiB (powers of 1024), K/M/G/T (powers of 1024). Throws pc::Error.
int64_t parse_bytes(const std::string& s);
std::string format_bytes(int64_t n);

}  // namespace pc::cli
