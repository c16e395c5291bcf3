// Test helpers for running kernels at every CPU level this machine supports.
#pragma once
#include <string>
#include <vector>

#include "kernels/cpu.h"
#include "kernels/matmul_internal.h"
#include "kernels/paged_attention_internal.h"

namespace pc::test {

// Restores the CPU level in use, and the kernels chosen by it, when it goes
// out of scope.
struct LevelGuard {
  CpuLevel saved = cpu_level();
  ~LevelGuard() {
    set_cpu_level(saved);
    kern::force_kernel_set(nullptr);
    force_attn_tiles(nullptr);
  }
};

// Scalar, then each SIMD level the machine can execute.
inline std::vector<CpuLevel> levels() {
  std::vector<CpuLevel> l = {CpuLevel::Scalar};
  if (detect_cpu_level() >= CpuLevel::Avx2) l.push_back(CpuLevel::Avx2);
  if (cpu_has_avx_vnni()) l.push_back(CpuLevel::AvxVnni);
  if (detect_cpu_level() >= CpuLevel::Avx512) l.push_back(CpuLevel::Avx512);
  return l;
}

// A code path the kernel tests run: a CPU level, or the AVX-512 kernels' code
// (matmul and attention tiles) on its AVX2 emulation, or the AvxVnni level's
// 16-lane code with its VNNI instructions emulated, so machines with AVX2 but
// no AVX-512 or AVX-VNNI test that code too.
struct KernelPath {
  CpuLevel level = CpuLevel::Scalar;
  bool emulated512 = false;
  bool emulated_vnni = false;
  std::string name() const {
    return emulated512 ? "avx512-emulated" : emulated_vnni ? "avxvnni-emulated" : cpu_level_name(level);
  }
  void use() const {
    set_cpu_level(level);
    kern::force_kernel_set(emulated512     ? kern::avx512_emulated_kernel_set()
                           : emulated_vnni ? kern::avxvnni_emulated_kernel_set()
                                           : nullptr);
    force_attn_tiles(emulated512 ? avx512_emulated_attn_tiles : emulated_vnni ? avxvnni_emulated_attn_tiles : nullptr);
  }
};

// levels(), then the emulated AVX-512 and AvxVnni kernels where the CPU runs AVX2.
inline std::vector<KernelPath> kernel_paths() {
  std::vector<KernelPath> p;
  for (CpuLevel l : levels()) p.push_back({l, false, false});
  if (detect_cpu_level() >= CpuLevel::Avx2) {
    p.push_back({CpuLevel::Avx2, true, false});
    p.push_back({CpuLevel::Avx2, false, true});
  }
  return p;
}

}  // namespace pc::test
