// Row operations of the forward pass: SwiGLU's scalar and AVX2 paths agree
// bitwise and stay close to the textbook formula.
#include "kernels/elementwise.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "cpu_levels.h"

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

}  // namespace
}  // namespace pc
