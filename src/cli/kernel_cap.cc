#include "cli/kernel_cap.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "kernels/cpu.h"

namespace pc::cli {

void apply_kernel_cap_from_environment() {
  const char* env = std::getenv("PROMPTCACHE_KERNELS");
  if (!env || !*env || std::strcmp(env, "auto") == 0) return;
  CpuLevel cap;
  if (!cpu_level_from_name(env, &cap)) {
    std::fprintf(stderr, "promptcache: ignoring PROMPTCACHE_KERNELS=%s (auto, avx512, avxvnni, avx2 or scalar)\n", env);
    return;
  }
  set_kernel_cap(cap);
}

}  // namespace pc::cli
