// kernels/layout_choice.h: each type's layout timed at the AVX2 level (decode
// and a prompt batch, weighed as one reference request), once per process,
// and taken without timing where it cannot matter.
#include "kernels/layout_choice.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "common/error.h"
#include "kernels/cpu.h"
#include "kernels/weight_repack.h"

namespace pc {
namespace {

struct RestoreLevel {
  ~RestoreLevel() { set_cpu_level(default_cpu_level()); }
};

// Both layouts are timed over the same weights: decode rates a core can stream
// (more than 0.05 GB/s, less than 1000) and prompt rates it can compute (more
// than 0.05 G multiply-adds a second, less than 10,000), each buffer at least
// what was asked for less one group, in whole groups of 16 rows; with one pair
// of passes the median ratio is that pair's, and the request's speedup weighs
// the two ratios by the stored layout's times.
TEST(LayoutChoice, TimesBothLayoutsOverTheSameWeights) {
  if (detect_cpu_level() < CpuLevel::Avx2) GTEST_SKIP() << "the X16 layouts' decode kernels need AVX2";
  RestoreLevel restore;
  set_cpu_level(CpuLevel::Avx2);
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0, GgmlType::IQ4_XS}) {
    const int64_t want = int64_t(4) << 20;
    const int64_t want_prompt = int64_t(1) << 20;
    const LayoutTiming m = time_layouts(t, want, 1, 2, want_prompt);
    EXPECT_EQ(m.stored, t);
    EXPECT_EQ(m.x16, x16_layout(t, /*by_stored=*/true)->x16);
    const int64_t group = 16 * ggml_row_bytes(t, 4096);
    // A timed buffer and its two rates (decode's, then the prompt batch's).
    const struct {
      int64_t bytes, want;
      double rates[2], max_rate;
    } timed[] = {{m.bytes, want, {m.stored_gb_per_s, m.x16_gb_per_s}, 1000.0},
                 {m.prompt_bytes, want_prompt, {m.stored_prompt_gmacs, m.x16_prompt_gmacs}, 10000.0}};
    for (const auto& b : timed) {
      EXPECT_EQ(b.bytes % group, 0) << ggml_type_name(t);
      EXPECT_GT(b.bytes, b.want - group) << ggml_type_name(t);
      EXPECT_LE(b.bytes, b.want) << ggml_type_name(t);
      for (double r : b.rates) {
        EXPECT_GT(r, 0.05) << ggml_type_name(t);
        EXPECT_LT(r, b.max_rate) << ggml_type_name(t);
      }
    }
    EXPECT_GT(m.seconds, 0.0);
    // One pair: its ratio is the ratio of the (only) passes' rates.
    EXPECT_DOUBLE_EQ(m.x16_over_stored, m.x16_gb_per_s / m.stored_gb_per_s) << ggml_type_name(t);
    EXPECT_DOUBLE_EQ(m.x16_prompt_over_stored, m.x16_prompt_gmacs / m.stored_prompt_gmacs) << ggml_type_name(t);
    // The request over the decode buffer's weights: its prompt's
    // multiply-adds and a pass over the weights a generated token, in seconds.
    const double params = double(m.bytes) / double(ggml_row_bytes(t, 4096)) * 4096;
    const double ps = kRefPromptTokens * params * 1e-9 / m.stored_prompt_gmacs;
    const double ds = kRefDecodeTokens * double(m.bytes) * 1e-9 / m.stored_gb_per_s;
    EXPECT_NEAR(m.x16_request_speedup, (ps + ds) / (ps / m.x16_prompt_over_stored + ds / m.x16_over_stored),
                1e-9 * m.x16_request_speedup)
        << ggml_type_name(t);
    // So it lies between the two ratios.
    EXPECT_GE(m.x16_request_speedup, std::min(m.x16_over_stored, m.x16_prompt_over_stored) * (1 - 1e-12));
    EXPECT_LE(m.x16_request_speedup, std::max(m.x16_over_stored, m.x16_prompt_over_stored) * (1 + 1e-12));
  }
  EXPECT_THROW(time_layouts(GgmlType::F32, 1 << 20), Error);
}

// At the AVX2 level a type with enough weights is timed on its first call and
// the choice follows the request's speedup; later calls reuse it; a type with few weights
// takes X16 untimed. The scalar path reads every type as stored, AVX-512 every
// type as X16, neither timed.
TEST(LayoutChoice, TimesEachTypeOnceAtTheAvx2Level) {
  if (detect_cpu_level() < CpuLevel::Avx2) GTEST_SKIP() << "the X16 layouts' decode kernels need AVX2";
  RestoreLevel restore;
  set_cpu_level(CpuLevel::Avx2);
  const size_t before = measured_layouts().size();
  EXPECT_EQ(fastest_layout(GgmlType::Q4_1, kDecodeTimingBytes - 1), GgmlType::Q4_1_X16);
  EXPECT_EQ(measured_layouts().size(), before);
  const GgmlType chosen = fastest_layout(GgmlType::Q4_1, kDecodeTimingBytes);
  const std::vector<LayoutTiming> measured = measured_layouts();
  ASSERT_EQ(measured.size(), before + 1);
  const LayoutTiming& m = measured.back();
  EXPECT_EQ(m.stored, GgmlType::Q4_1);
  EXPECT_GE(m.bytes, kDecodeTimingBytes - 16 * ggml_row_bytes(GgmlType::Q4_1, 4096));
  EXPECT_EQ(chosen, m.x16_request_speedup < kX16MinSpeedup ? GgmlType::Q4_1 : GgmlType::Q4_1_X16);
  EXPECT_EQ(fastest_layout(GgmlType::Q4_1, int64_t(1) << 40), chosen);
  EXPECT_EQ(fastest_layout(GgmlType::Q4_1, 1), chosen);  // decided once for the process
  EXPECT_EQ(measured_layouts().size(), before + 1);
  EXPECT_EQ(fastest_layout(GgmlType::F16, int64_t(1) << 40), GgmlType::F16);  // no X16 layout
  set_cpu_level(CpuLevel::Scalar);
  EXPECT_EQ(fastest_layout(GgmlType::Q5_1, int64_t(1) << 40), GgmlType::Q5_1);
  if (detect_cpu_level() >= CpuLevel::Avx512) {
    set_cpu_level(CpuLevel::Avx512);
    EXPECT_EQ(fastest_layout(GgmlType::Q5_1, int64_t(1) << 40), GgmlType::Q5_1_X16);
  }
  EXPECT_EQ(measured_layouts().size(), before + 1);
}

}  // namespace
}  // namespace pc
