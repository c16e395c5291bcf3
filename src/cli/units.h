// Parsing of human-written sizes ("4GiB", "512MiB", "1000000") and durations ("30s").
#pragma once
#include <cstdint>
#include <string>

namespace pc::cli {

// Accepts an integer with an optional unit: B, KB/MB/GB/TB (powers of 1000),
// KiB/MiB/GiB/TiB (powers of 1024), K/M/G/T (powers of 1024). Throws pc::Error.
int64_t parse_bytes(const std::string& s);
std::string format_bytes(int64_t n);
// A duration in milliseconds: a non-negative number with an optional unit, ms, s, m
// or h (none = seconds): "30s", "1.5m", "500ms", "30". Throws pc::Error.
int64_t parse_duration_ms(const std::string& s);

}  // namespace pc::cli
