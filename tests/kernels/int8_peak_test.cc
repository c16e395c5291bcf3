#include "kernels/int8_peak.h"

#include <gtest/gtest.h>

#include <string>

#include "kernels/cpu.h"
#include "kernels/thread_pool.h"

namespace pc {
namespace {

// The peak of each level this CPU runs is a rate a core can issue: more than
// 1 G multiply-adds/s a thread, and less than four of the instruction a cycle at
// 6 GHz (a loop whose products the compiler hoisted out would report far more).
// Scalar has no int8 vector instruction and reports none.
TEST(Int8Peak, EachLevelMeasuresAnIssuableRate) {
  ThreadPool pool(2);
  for (CpuLevel l : {CpuLevel::Avx2, CpuLevel::AvxVnni, CpuLevel::Avx512}) {
    if (detect_cpu_level() < l || (l == CpuLevel::AvxVnni && !cpu_has_avx_vnni())) continue;
    const Int8Peak p = measure_int8_peak(pool, l, 2);
    const double lanes = l == CpuLevel::Avx512 ? 64 : 32;
    EXPECT_EQ(p.threads, 2);
    EXPECT_EQ(std::string(p.instruction), l == CpuLevel::Avx512    ? "vpdpbusd"
                                          : l == CpuLevel::AvxVnni ? "vpdpbusd (ymm)"
                                                                   : "vpmaddubsw+vpmaddwd");
    EXPECT_GT(p.gmacs, 1.0 * p.threads) << cpu_level_name(l);
    EXPECT_LT(p.gmacs, 4 * lanes * 6.0 * p.threads) << cpu_level_name(l);
  }
  const Int8Peak s = measure_int8_peak(pool, CpuLevel::Scalar, 2);
  EXPECT_EQ(s.gmacs, 0.0);
}

}  // namespace
}  // namespace pc
