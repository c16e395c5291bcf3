// Which SIMD code path the kernels use. Detected once from what the processor
// can actually execute (CPUID *and* the OS-enabled state in XCR0 — e.g. AMX is
// listed on some machines but faults), and overridable for tests.
#pragma once
#include <string>

namespace pc {

enum class CpuLevel { Scalar = 0, Avx2 = 1, Avx512 = 2 };

CpuLevel detect_cpu_level();        // best level this machine can run
// The level a process starts with: detect_cpu_level(), or lower when the
// environment variable PROMPTCACHE_KERNELS names a lower one (scalar, avx2,
// avx512; "auto" or unset: no cap; anything else: a warning, no cap).
CpuLevel default_cpu_level();
CpuLevel cpu_level();               // level in use (defaults to default_cpu_level())
void set_cpu_level(CpuLevel level); // clamps to detect_cpu_level()
std::string cpu_level_name(CpuLevel level);
// "scalar", "avx2", "avx512" -> the level; false for any other name.
bool cpu_level_from_name(const std::string& name, CpuLevel* level);

}  // namespace pc
