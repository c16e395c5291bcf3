// Test helpers for running kernels at every CPU level this machine supports.
#pragma once
#include <vector>

#include "kernels/cpu.h"

namespace pc::test {

// Restores the CPU level in use when it goes out of scope.
struct LevelGuard {
  CpuLevel saved = cpu_level();
  ~LevelGuard() { set_cpu_level(saved); }
};

// Scalar, then each SIMD level the machine can execute.
inline std::vector<CpuLevel> levels() {
  std::vector<CpuLevel> l = {CpuLevel::Scalar};
  if (detect_cpu_level() >= CpuLevel::Avx2) l.push_back(CpuLevel::Avx2);
  if (detect_cpu_level() >= CpuLevel::Avx512) l.push_back(CpuLevel::Avx512);
  return l;
}

}  // namespace pc::test
