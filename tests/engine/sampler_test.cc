// Sampling: the distribution the sampler draws from, against a plain reference that
// sorts the whole vocabulary, and seeded reproducibility.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <functional>
#include <random>

#include "engine/sampler.h"

namespace pc {
namespace {

// The definition, written the slow way: sort every token by logit (ties: lower id),
// keep the top k, softmax at the temperature, keep the shortest prefix reaching
// top_p, keep p >= min_p * p_max, renormalize. By id.
std::vector<std::pair<int32_t, float>> reference(const std::vector<float>& logits, const SamplingParams& p) {
  std::vector<int32_t> ids(logits.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(i);
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  });
  if (p.top_k > 0 && size_t(p.top_k) < ids.size()) ids.resize(p.top_k);
  std::vector<double> pr;
  double z = 0;
  for (int32_t id : ids) {
    pr.push_back(std::exp((double(logits[id]) - logits[ids[0]]) / p.temperature));
    z += pr.back();
  }
  size_t keep = ids.size();
  double cum = 0;
  for (size_t i = 0; i < ids.size() && p.top_p < 1.f; ++i) {
    cum += pr[i] / z;
    if (cum >= p.top_p) {
      keep = i + 1;
      break;
    }
  }
  size_t n = 1;
  while (n < keep && pr[n] >= p.min_p * pr[0]) ++n;
  double kept = 0;
  for (size_t i = 0; i < n; ++i) kept += pr[i];
  std::vector<std::pair<int32_t, float>> out;
  for (size_t i = 0; i < n; ++i) out.emplace_back(ids[i], float(pr[i] / kept));
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<float> random_logits(size_t n, uint64_t seed, float scale) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

void expect_same(const std::vector<std::pair<int32_t, float>>& got,
                 const std::vector<std::pair<int32_t, float>>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].first, want[i].first) << what << " at " << i;
    EXPECT_NEAR(got[i].second, want[i].second, 1e-5 * want[i].second + 1e-9) << what << " token " << got[i].first;
  }
}

TEST(Sampler, DistributionMatchesAFullSort) {
  struct Case {
    float temperature, top_p, min_p;
    int32_t top_k;
  };
  const Case cases[] = {{1.f, 1.f, 0.f, 0},   {0.7f, 0.9f, 0.f, 0},  {1.f, 0.5f, 0.f, 40},
                        {1.3f, 1.f, 0.05f, 0}, {0.8f, 0.95f, 0.1f, 0}, {1.f, 0.999f, 0.f, 0},
                        {1.f, 1.f, 0.f, 1},    {2.f, 0.3f, 0.02f, 500}};
  // A peaked vocabulary (few tokens matter) and a flat one (top-p keeps thousands).
  for (float scale : {6.f, 0.5f}) {
    const std::vector<float> logits = random_logits(20000, 7, scale);
    for (const Case& c : cases) {
      SamplingParams p;
      p.temperature = c.temperature;
      p.top_p = c.top_p;
      p.min_p = c.min_p;
      p.top_k = c.top_k;
      Sampler s(p);
      const std::string what = "T " + std::to_string(c.temperature) + " top_p " + std::to_string(c.top_p) +
                               " min_p " + std::to_string(c.min_p) + " top_k " + std::to_string(c.top_k) +
                               " scale " + std::to_string(scale);
      expect_same(s.distribution(logits, {}), reference(logits, p), what);
    }
  }
}

TEST(Sampler, TiesKeepTheLowerIds) {
  std::vector<float> logits(1000, 1.f);
  SamplingParams p;
  p.temperature = 1.f;
  p.top_k = 3;
  Sampler s(p);
  const auto d = s.distribution(logits, {});
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].first, 0);
  EXPECT_EQ(d[2].first, 2);
  p.top_k = 0;
  p.top_p = 0.0025f;  // 2.5 of 1000 equal tokens: the first three
  Sampler t(p);
  const auto e = t.distribution(logits, {});
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[2].first, 2);
}

TEST(Sampler, SeededDrawsRepeatAndFollowTheDistribution) {
  const std::vector<float> logits = random_logits(5000, 3, 2.f);
  SamplingParams p;
  p.temperature = 1.f;
  p.top_p = 0.9f;
  p.seed = 42;
  Sampler a(p), b(p);
  std::vector<int32_t> ta, tb;
  for (int i = 0; i < 200; ++i) {
    ta.push_back(a.sample(logits, {}));
    tb.push_back(b.sample(logits, {}));
  }
  EXPECT_EQ(ta, tb);
  p.seed = 43;
  Sampler c(p);
  std::vector<int32_t> tc;
  for (int i = 0; i < 200; ++i) tc.push_back(c.sample(logits, {}));
  EXPECT_NE(ta, tc);
  // Every draw is a token the distribution keeps.
  const auto d = Sampler(p).distribution(logits, {});
  for (int32_t t : ta)
    EXPECT_TRUE(std::binary_search(d.begin(), d.end(), std::make_pair(t, 0.f),
                                   [](const auto& x, const auto& y) { return x.first < y.first; }))
        << t;
}

// A step at temperature 1 over a 151,936-token vocabulary costs a few passes over the
// logits, less than sorting them once (what truncation did before). CPU time, best of
// three: a loaded test machine stretches wall time.
TEST(Sampler, TemperatureStepCostsLessThanASort) {
  const std::vector<float> logits = random_logits(151936, 5, 3.f);
  auto best_of = [](const std::function<void()>& f) {
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
      const std::clock_t t0 = std::clock();
      for (int i = 0; i < 4; ++i) f();
      best = std::min(best, double(std::clock() - t0) / CLOCKS_PER_SEC / 4);
    }
    return best;
  };
  SamplingParams p;
  p.temperature = 1.f;
  Sampler s(p);
  const double step = best_of([&] { s.sample(logits, {}); });
  struct Cand {
    int32_t id;
    float logit;
  };
  std::vector<Cand> cands(logits.size());
  const double sort = best_of([&] {
    for (size_t i = 0; i < logits.size(); ++i) cands[i] = {int32_t(i), logits[i]};
    std::sort(cands.begin(), cands.end(), [](const Cand& a, const Cand& b) {
      return a.logit != b.logit ? a.logit > b.logit : a.id < b.id;
    });
  });
  std::printf("temperature 1 step %.2f ms, one sort %.2f ms\n", step * 1e3, sort * 1e3);
  EXPECT_LT(step, sort);
}

}  // namespace
}  // namespace pc
