// Which SIMD code path the kernels use. Detected once from what the processor
// can actually execute (CPUID *and* the OS-enabled state in XCR0 — e.g. AMX is
// listed on some machines but faults), capped by the caller (set_kernel_cap:
// the CLI passes PROMPTCACHE_KERNELS; the kernel layer reads no environment)
// and overridable for tests.
#pragma once
#include <string>

namespace pc {

// AvxVnni: Avx2 plus the AVX-VNNI instructions (vpdpbusd / vpdpwssd on ymm;
// Intel Alder Lake and later, AMD Zen 5), for the X16 weight kernels. It sits
// below Avx512 but is not implied by it (Zen 4 and Ice Lake have AVX-512 VNNI
// without AVX-VNNI): set_cpu_level() and the cap fall back to Avx2 where the
// CPU lacks it.
enum class CpuLevel { Scalar = 0, Avx2 = 1, AvxVnni = 2, Avx512 = 3 };

CpuLevel detect_cpu_level();        // best level this machine can run
bool cpu_has_avx_vnni();            // whether AvxVnni can run (AVX-VNNI, on top of Avx2)
// The process's default level: detect_cpu_level(), or the cap when it is lower.
CpuLevel default_cpu_level();
// Caps the default level at `cap` (Avx512, the initial cap: none) and switches
// the level in use to the new default. Called once at startup, before kernels run.
void set_kernel_cap(CpuLevel cap);
CpuLevel kernel_cap();
CpuLevel cpu_level();               // level in use (defaults to default_cpu_level())
void set_cpu_level(CpuLevel level); // clamps to detect_cpu_level()
std::string cpu_level_name(CpuLevel level);
// "scalar", "avx2", "avx512" -> the level; false for any other name.
bool cpu_level_from_name(const std::string& name, CpuLevel* level);

}  // namespace pc
