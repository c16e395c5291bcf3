// PROMPTCACHE_KERNELS: the environment variable that caps the CPU code path a
// process uses (an escape hatch should a path misbehave on some machine). Read
// here, once, at startup; the kernel layer only takes the cap (kernels/cpu.h).
#pragma once

namespace pc::cli {

// Reads PROMPTCACHE_KERNELS and passes it to set_kernel_cap(): scalar, avx2 or
// avx512 cap the kernels at that level (a higher one than the CPU runs changes
// nothing); unset, empty or "auto" leave them uncapped; any other value is
// reported on stderr and ignored.
void apply_kernel_cap_from_environment();

}  // namespace pc::cli
