#include "kernels/cpu.h"

#include <gtest/gtest.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

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
  // AVX-VNNI: the CPUID bit (leaf 7, subleaf 1, EAX bit 4) as /proc/cpuinfo's avx_vnni.
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_max(0, nullptr) >= 7) __cpuid_count(7, 1, a, b, c, d);
  const bool vnni_bit = (a & 16) != 0;
  EXPECT_EQ(cpu_has_avx_vnni(), best >= CpuLevel::Avx2 && vnni_bit);
  if (best == CpuLevel::AvxVnni) {
    EXPECT_TRUE(cpu_has_avx_vnni());
  }
  if (cpu_has_avx_vnni() && best < CpuLevel::Avx512) {
    EXPECT_EQ(best, CpuLevel::AvxVnni);
  }
#endif
  // AvxVnni runs only with AVX-VNNI: below it (an AVX-512 CPU without the VEX
  // form, such as Zen 4, included) asking for it gives Avx2.
  const CpuLevel saved_vnni = cpu_level();
  set_cpu_level(CpuLevel::AvxVnni);
  EXPECT_EQ(cpu_level(), cpu_has_avx_vnni() ? CpuLevel::AvxVnni : best < CpuLevel::Avx2 ? best : CpuLevel::Avx2);
  set_cpu_level(saved_vnni);
  const CpuLevel saved = cpu_level();
  set_cpu_level(CpuLevel::Scalar);
  EXPECT_EQ(cpu_level(), CpuLevel::Scalar);
  set_cpu_level(CpuLevel::Avx512);  // clamps to what the machine has
  EXPECT_EQ(cpu_level(), best);
  set_cpu_level(saved);
  EXPECT_EQ(cpu_level_name(CpuLevel::Scalar), "scalar");
  EXPECT_EQ(cpu_level_name(CpuLevel::Avx2), "avx2");
  EXPECT_EQ(cpu_level_name(CpuLevel::AvxVnni), "avxvnni");
  EXPECT_EQ(cpu_level_name(CpuLevel::Avx512), "avx512");
  CpuLevel named = CpuLevel::Scalar;
  EXPECT_TRUE(cpu_level_from_name("avxvnni", &named));
  EXPECT_EQ(named, CpuLevel::AvxVnni);
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
  set_kernel_cap(CpuLevel::AvxVnni);
  EXPECT_EQ(default_cpu_level(), cpu_has_avx_vnni() ? CpuLevel::AvxVnni : best < CpuLevel::Avx2 ? best : CpuLevel::Avx2);
  EXPECT_EQ(cpu_level(), default_cpu_level());
  set_kernel_cap(CpuLevel::Avx512);
  EXPECT_EQ(default_cpu_level(), best);
  EXPECT_EQ(cpu_level(), best);
}

}  // namespace
}  // namespace pc
