// The sampler under a grammar mask: only allowed tokens are drawn, greedy takes the
// best allowed one, and the distribution is renormalized over them.
#include <gtest/gtest.h>

#include <set>

#include "common/error.h"
#include "engine/sampler.h"

namespace pc {
namespace {

TEST(SamplerMask, OnlyAllowedTokensAreDrawn) {
  std::vector<float> logits(200);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = float(i % 17) * 0.3f;
  std::vector<uint64_t> mask(4, 0);
  for (int id : {3, 70, 130, 199}) mask[id / 64] |= uint64_t(1) << (id % 64);
  SamplingParams greedy;
  EXPECT_EQ(Sampler(greedy).sample(logits, {}, &mask), 199);  // 199 % 17 = 12: the best of the four
  SamplingParams hot;
  hot.temperature = 1.f;
  hot.top_k = 3;
  Sampler s(hot);
  std::set<int32_t> seen;
  for (int i = 0; i < 300; ++i) seen.insert(s.sample(logits, {}, &mask));
  for (int32_t id : seen) EXPECT_TRUE(id == 3 || id == 70 || id == 130 || id == 199) << id;
  EXPECT_EQ(seen, (std::set<int32_t>{3, 130, 199}));  // top-k keeps the best 3 of the allowed 4
  double sum = 0;
  for (auto [id, p] : Sampler(hot).distribution(logits, {}, &mask)) sum += p;
  EXPECT_NEAR(sum, 1.0, 1e-5);
  std::vector<uint64_t> none(4, 0);
  EXPECT_THROW(Sampler(hot).sample(logits, {}, &none), Error);
}

}  // namespace
}  // namespace pc
