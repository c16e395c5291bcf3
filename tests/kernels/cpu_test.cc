#include "kernels/cpu.h"

#include <gtest/gtest.h>

namespace pc {
namespace {

TEST(Cpu, DetectAndClamp) {
  const CpuLevel best = detect_cpu_level();
  std::printf("detected cpu level: %s\n", cpu_level_name(best).c_str());
#if defined(__x86_64__)
  // CPUID agrees with the compiler's own probe (which ignores the OS state; a
  // mismatch the other way, compiler says yes but we say no, is possible only
  // when the OS disabled the state).
  if (best >= CpuLevel::Avx2) {
    EXPECT_TRUE(__builtin_cpu_supports("avx2"));
    EXPECT_TRUE(__builtin_cpu_supports("fma"));
  }
  if (best == CpuLevel::Avx512) {
    EXPECT_TRUE(__builtin_cpu_supports("avx512f"));
    EXPECT_TRUE(__builtin_cpu_supports("avx512bw"));
    EXPECT_TRUE(__builtin_cpu_supports("avx512vnni"));
  }
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512vnni")) {
    EXPECT_LT(best, CpuLevel::Avx512);
  }
#endif
  const CpuLevel saved = cpu_level();
  set_cpu_level(CpuLevel::Scalar);
  EXPECT_EQ(cpu_level(), CpuLevel::Scalar);
  set_cpu_level(CpuLevel::Avx512);  // clamps to what the machine has
  EXPECT_EQ(cpu_level(), best);
  set_cpu_level(saved);
  EXPECT_EQ(cpu_level_name(CpuLevel::Scalar), "scalar");
  EXPECT_EQ(cpu_level_name(CpuLevel::Avx2), "avx2");
  EXPECT_EQ(cpu_level_name(CpuLevel::Avx512), "avx512");
}

// The cap a caller passes (the CLI: PROMPTCACHE_KERNELS) lowers the default
// level and the level in use; Avx512, the initial cap, is no cap.
TEST(Cpu, KernelCapLowersTheDefaultLevel) {
  const CpuLevel best = detect_cpu_level();
  EXPECT_EQ(kernel_cap(), CpuLevel::Avx512);
  EXPECT_EQ(default_cpu_level(), best);
  set_kernel_cap(CpuLevel::Scalar);
  EXPECT_EQ(default_cpu_level(), CpuLevel::Scalar);
  EXPECT_EQ(cpu_level(), CpuLevel::Scalar);
  set_kernel_cap(CpuLevel::Avx2);
  EXPECT_EQ(default_cpu_level(), best < CpuLevel::Avx2 ? best : CpuLevel::Avx2);
  EXPECT_EQ(cpu_level(), default_cpu_level());
  set_kernel_cap(CpuLevel::Avx512);
  EXPECT_EQ(default_cpu_level(), best);
  EXPECT_EQ(cpu_level(), best);
}

}  // namespace
}  // namespace pc
