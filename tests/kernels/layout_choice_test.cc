// kernels/layout_choice.h: decode's layout timed per type at the AVX2 level,
// once per process, and taken without timing where it cannot matter.
#include "kernels/layout_choice.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "kernels/cpu.h"
#include "kernels/weight_repack.h"

namespace pc {
namespace {

struct RestoreLevel {
  ~RestoreLevel() { set_cpu_level(default_cpu_level()); }
};

// Both layouts are timed over the same weights: rates a core can stream (more
// than 0.05 GB/s, less than 1000), the buffer at least what was asked for less
// one group, in whole groups of 16 rows; with one pair of passes the median
// ratio is that pair's.
TEST(LayoutChoice, TimesBothLayoutsOverTheSameWeights) {
  if (detect_cpu_level() < CpuLevel::Avx2) GTEST_SKIP() << "the X16 layouts' decode kernels need AVX2";
  RestoreLevel restore;
  set_cpu_level(CpuLevel::Avx2);
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0, GgmlType::IQ4_XS}) {
    const int64_t want = int64_t(4) << 20;
    const LayoutTiming m = time_decode_layouts(t, want, 1, 2);
    EXPECT_EQ(m.stored, t);
    EXPECT_EQ(m.x16, x16_layout(t, /*by_stored=*/true)->x16);
    const int64_t group = 16 * ggml_row_bytes(t, 4096);
    EXPECT_EQ(m.bytes % group, 0) << ggml_type_name(t);
    EXPECT_GT(m.bytes, want - group) << ggml_type_name(t);
    EXPECT_LE(m.bytes, want) << ggml_type_name(t);
    for (double r : {m.stored_gb_per_s, m.x16_gb_per_s}) {
      EXPECT_GT(r, 0.05) << ggml_type_name(t);
      EXPECT_LT(r, 1000.0) << ggml_type_name(t);
    }
    EXPECT_GT(m.seconds, 0.0);
    // One pair: its ratio is the ratio of the (only) passes' rates.
    EXPECT_DOUBLE_EQ(m.x16_over_stored, m.x16_gb_per_s / m.stored_gb_per_s) << ggml_type_name(t);
  }
  EXPECT_THROW(time_decode_layouts(GgmlType::F32, 1 << 20), Error);
}

// At the AVX2 level a type with enough weights is timed on its first call and
// the choice follows the timing; later calls reuse it; a type with few weights
// takes X16 untimed. The scalar path reads every type as stored, AVX-512 every
// type as X16, neither timed.
TEST(LayoutChoice, TimesEachTypeOnceAtTheAvx2Level) {
  if (detect_cpu_level() < CpuLevel::Avx2) GTEST_SKIP() << "the X16 layouts' decode kernels need AVX2";
  RestoreLevel restore;
  set_cpu_level(CpuLevel::Avx2);
  const size_t before = measured_decode_layouts().size();
  EXPECT_EQ(fastest_decode_layout(GgmlType::Q4_1, kDecodeTimingBytes - 1), GgmlType::Q4_1_X16);
  EXPECT_EQ(measured_decode_layouts().size(), before);
  const GgmlType chosen = fastest_decode_layout(GgmlType::Q4_1, kDecodeTimingBytes);
  const std::vector<LayoutTiming> measured = measured_decode_layouts();
  ASSERT_EQ(measured.size(), before + 1);
  const LayoutTiming& m = measured.back();
  EXPECT_EQ(m.stored, GgmlType::Q4_1);
  EXPECT_GE(m.bytes, kDecodeTimingBytes - 16 * ggml_row_bytes(GgmlType::Q4_1, 4096));
  EXPECT_EQ(chosen, m.x16_over_stored < kDecodeX16MinRatio ? GgmlType::Q4_1 : GgmlType::Q4_1_X16);
  EXPECT_EQ(fastest_decode_layout(GgmlType::Q4_1, int64_t(1) << 40), chosen);
  EXPECT_EQ(fastest_decode_layout(GgmlType::Q4_1, 1), chosen);  // decided once for the process
  EXPECT_EQ(measured_decode_layouts().size(), before + 1);
  EXPECT_EQ(fastest_decode_layout(GgmlType::F16, int64_t(1) << 40), GgmlType::F16);  // no X16 layout
  set_cpu_level(CpuLevel::Scalar);
  EXPECT_EQ(fastest_decode_layout(GgmlType::Q5_1, int64_t(1) << 40), GgmlType::Q5_1);
  if (detect_cpu_level() >= CpuLevel::Avx512) {
    set_cpu_level(CpuLevel::Avx512);
    EXPECT_EQ(fastest_decode_layout(GgmlType::Q5_1, int64_t(1) << 40), GgmlType::Q5_1_X16);
  }
  EXPECT_EQ(measured_decode_layouts().size(), before + 1);
}

}  // namespace
}  // namespace pc
