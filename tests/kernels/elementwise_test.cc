// Row operations of the forward pass: SwiGLU's scalar and AVX2 paths agree
// bitwise and stay close to the textbook formula.
#include "kernels/elementwise.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "cpu_levels.h"
#include "gguf/quants.h"

namespace pc {
namespace {

using test::LevelGuard;
using test::levels;

std::vector<float> swiglu_at(CpuLevel level, const std::vector<float>& g, const std::vector<float>& u) {
  LevelGuard guard;
  set_cpu_level(level);
  std::vector<float> out(g.size(), -7.f);
  swiglu(g.data(), u.data(), out.data(), int64_t(g.size()));
  return out;
}

TEST(Elementwise, SwigluEveryLevelBitwiseAndCloseToLibm) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.f, 4.f);
  for (int64_t n : {1, 7, 8, 9, 1536, 1541}) {
    std::vector<float> g(n), u(n);
    for (auto& v : g) v = nd(rng);
    for (auto& v : u) v = nd(rng);
    if (n > 8) {  // the edges of the exp's range and non-finite gates
      g[0] = 100.f;
      g[1] = -100.f;
      g[2] = 87.5f;
      g[3] = -88.5f;
      g[4] = std::numeric_limits<float>::quiet_NaN();
      g[5] = 0.f;
    }
    const std::vector<float> base = swiglu_at(CpuLevel::Scalar, g, u);
    for (CpuLevel level : levels()) {
      const std::vector<float> got = swiglu_at(level, g, u);
      EXPECT_EQ(std::memcmp(got.data(), base.data(), n * sizeof(float)), 0)
          << cpu_level_name(level) << " n=" << n;
    }
    for (int64_t i = 0; i < n; ++i) {
      const double want = double(g[i]) / (1.0 + std::exp(-double(g[i]))) * double(u[i]);
      if (std::isnan(g[i])) {
        EXPECT_TRUE(std::isnan(base[i]));
        continue;
      }
      EXPECT_NEAR(base[i], want, 1e-6 * std::abs(want) + 1e-30) << "g=" << g[i] << " u=" << u[i];
    }
  }
}

// RMS norm and the residual add: every level bitwise equal (the AVX2 forms
// keep the scalar order of the double sum), and the norm close to the formula.
TEST(Elementwise, RmsNormAndAddEveryLevelBitwise) {
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.f, 3.f);
  for (int64_t n : {1, 3, 4, 5, 8, 9, 64, 576, 577, 2048}) {
    std::vector<float> x(n), w(n), r(n);
    for (auto& v : x) v = nd(rng);
    for (auto& v : w) v = nd(rng);
    for (auto& v : r) v = nd(rng);
    std::vector<std::vector<float>> norms, sums;
    for (CpuLevel level : levels()) {
      LevelGuard guard;
      set_cpu_level(level);
      std::vector<float> y(n, -7.f), s = r;
      rms_norm(x.data(), w.data(), y.data(), n, 1e-5f);
      add_inplace(s.data(), x.data(), n);
      norms.push_back(y);
      sums.push_back(s);
    }
    for (size_t i = 1; i < norms.size(); ++i) {
      EXPECT_EQ(0, std::memcmp(norms[0].data(), norms[i].data(), sizeof(float) * n)) << "n=" << n;
      EXPECT_EQ(0, std::memcmp(sums[0].data(), sums[i].data(), sizeof(float) * n)) << "n=" << n;
    }
    double ss = 0;
    for (float v : x) ss += double(v) * v;
    const double scale = 1.0 / std::sqrt(ss / double(n) + 1e-5);
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_NEAR(norms[0][i], x[i] * scale * w[i], 1e-5 * std::fabs(x[i] * scale * w[i]) + 1e-30) << "n=" << n;
      EXPECT_EQ(sums[0][i], r[i] + x[i]);
    }
  }
}

// The row conversion to F16 (KV stores): every level gives fp32_to_fp16's
// bits, over a sweep of all float bit patterns (every 509th, plus the edges:
// zeros, subnormal results, the rounding ties, 65504..65520, infinities, NaNs).
TEST(Elementwise, F32ToF16RowEveryLevelMatchesScalar) {
  std::vector<float> x;
  for (uint64_t b = 0; b < (uint64_t(1) << 32); b += 509) x.push_back(std::bit_cast<float>(uint32_t(b)));
  for (uint32_t b : {0x00000000u, 0x80000000u, 0x33000000u, 0x33000001u, 0x387fe000u, 0x387ff000u, 0x38800000u,
                     0x477fe000u, 0x477fefffu, 0x477ff000u, 0x47800000u, 0x7f800000u, 0xff800000u, 0x7fc00000u,
                     0x7f800001u, 0xffc12345u, 0x3f801000u, 0x3f803000u})
    x.push_back(std::bit_cast<float>(b));
  std::vector<uint16_t> want(x.size());
  for (size_t i = 0; i < x.size(); ++i) want[i] = fp32_to_fp16(x[i]);
  for (CpuLevel level : levels()) {
    LevelGuard guard;
    set_cpu_level(level);
    std::vector<uint16_t> got(x.size(), 0xABCD);
    f32_to_f16_row(x.data(), got.data(), int64_t(x.size()));
    for (size_t i = 0; i < x.size(); ++i)
      ASSERT_EQ(got[i], want[i]) << cpu_level_name(level) << " bits 0x" << std::hex << std::bit_cast<uint32_t>(x[i]);
  }
}

}  // namespace
}  // namespace pc
