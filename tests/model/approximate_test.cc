// Approximate reuse of moved blocks: only when asked; budget 1 is bitwise the full
// recomputation; the policy's recompute brings the next-token distribution closer to
// full recomputation than reusing everything (stories260K, a trained 5-layer model);
// approximately built KV is never published, so a later exact request is bitwise cold.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "engine/engine.h"
#include "kv/page_pool.h"
#include "model/model.h"
#include "model_test_util.h"
#include "tokenizer/tokenizer.h"

namespace pc {
namespace {

struct Fixture {
  std::unique_ptr<Model> model = Model::load(test::shared_model("stories260K.gguf"));
  std::vector<int32_t> sys = text(" Once upon a time there was a little girl named Lily who loved to play outside.");
  std::vector<int32_t> a = text(" One day she found a big red ball in the park and kicked it very high into the sky.");
  std::vector<int32_t> b = text(" Her friend Tom had a small dog named Max who liked to run and bark at the birds.");
  std::vector<int32_t> user = text(" Then they all went home and had a nice warm dinner together.");
  std::vector<int32_t> text(const std::string& s) { return model->tokenizer().encode(s, false, false); }
  std::unique_ptr<Engine> engine() {
    EngineOptions o;
    o.kv_memory_bytes = 32 << 20;
    o.threads = 1;
    return std::make_unique<Engine>(*model, o);
  }
  GenerateRequest request(const std::vector<std::vector<int32_t>>& parts, CacheReuse mode = CacheReuse::kExact,
                          double budget = 0) {
    GenerateRequest r;
    r.prompt = {model->tokenizer().bos()};
    for (const auto& p : parts) {
      r.blocks.push_back({int32_t(r.prompt.size()), int32_t(r.prompt.size() + p.size())});
      r.prompt.insert(r.prompt.end(), p.begin(), p.end());
    }
    r.reuse.mode = mode;
    r.reuse.budget = budget;
    return r;
  }
};

double kl(const std::vector<float>& p_logits, const std::vector<float>& q_logits) {
  auto softmax = [](const std::vector<float>& l) {
    const float m = *std::max_element(l.begin(), l.end());
    std::vector<double> p(l.size());
    double s = 0;
    for (size_t i = 0; i < l.size(); ++i) s += p[i] = std::exp(double(l[i]) - m);
    for (double& x : p) x /= s;
    return p;
  };
  const auto p = softmax(p_logits), q = softmax(q_logits);
  double d = 0;
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] > 0) d += p[i] * std::log(p[i] / std::max(q[i], 1e-300));
  return d;
}

bool bitwise(const std::vector<float>& x, const std::vector<float>& y) {
  return !x.empty() && x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

TEST(Approximate, ReorderedBlocks) {
  Fixture f;
  const auto first = f.request({f.sys, f.a, f.b, f.user});
  const std::vector<std::vector<int32_t>> moved = {f.sys, f.b, f.a, f.user};
  const std::vector<float> full = f.engine()->request_logits(f.request(moved));

  auto warm = [&](CacheReuse mode, double budget, GenerateResult* r) {
    auto e = f.engine();
    e->generate(first);
    return e->request_logits(f.request(moved, mode, budget), r);
  };
  // Exact (the default): nothing approximate, bitwise the full recomputation.
  GenerateResult exact;
  EXPECT_TRUE(bitwise(warm(CacheReuse::kExact, 0.5, &exact), full));
  EXPECT_EQ(exact.n_approximate, 0);
  EXPECT_GE(exact.n_cached, int64_t(1 + f.sys.size()));  // the prefix (and any token it shares with the next part)
  // Tokens of parts after the exact prefix whose KV the first request cached elsewhere.
  const int64_t n_moved = exact.n_reusable;
  EXPECT_GE(n_moved, int64_t(f.a.size() + f.user.size()));
  // Budget 1: every found token recomputed, bitwise the full recomputation.
  GenerateResult all;
  EXPECT_TRUE(bitwise(warm(CacheReuse::kApproximate, 1.0, &all), full));
  EXPECT_EQ(all.n_approximate, 0);
  EXPECT_EQ(all.n_recomputed, n_moved);
  // Budget 0: every moved block reused; the counts add up.
  GenerateResult none;
  const std::vector<float> l0 = warm(CacheReuse::kApproximate, 0.0, &none);
  EXPECT_EQ(none.n_approximate, n_moved - 1);  // the prompt's last token is always computed
  EXPECT_EQ(none.n_recomputed, 0);
  EXPECT_EQ(none.n_cached, exact.n_cached);
  EXPECT_EQ(none.n_computed, none.n_prompt - none.n_cached - none.n_approximate);
  // The policy's recompute gets closer to the full recomputation.
  GenerateResult some;
  const std::vector<float> l25 = warm(CacheReuse::kApproximate, 0.25, &some);
  EXPECT_GT(some.n_recomputed, 0);
  EXPECT_EQ(some.n_approximate + some.n_recomputed, n_moved - 1);
  const double kl0 = kl(full, l0), kl25 = kl(full, l25);
  std::printf("KL(full || approximate): budget 0: %.6f, budget 0.25: %.6f\n", kl0, kl25);
  EXPECT_GT(kl0, 0);
  EXPECT_LT(kl25, kl0);
}

TEST(Approximate, NeverPublished) {
  Fixture f;
  const std::vector<std::vector<int32_t>> moved = {f.sys, f.b, f.a, f.user};
  const std::vector<float> cold = f.engine()->request_logits(f.request(moved));
  GenerateResult reference;  // an exact request after the first one: its exact prefix
  {
    auto e = f.engine();
    e->generate(f.request({f.sys, f.a, f.b, f.user}));
    e->request_logits(f.request(moved), &reference);
  }
  auto e = f.engine();
  e->generate(f.request({f.sys, f.a, f.b, f.user}));
  GenerateRequest approx = f.request(moved, CacheReuse::kApproximate, 0.0);
  approx.max_tokens = 4;
  const GenerateResult r = e->generate(approx);
  ASSERT_GT(r.n_approximate, 0);
  // The same prompt, exact: its KV must come only from exactly computed sequences.
  GenerateResult exact;
  EXPECT_TRUE(bitwise(e->request_logits(f.request(moved), &exact), cold));
  EXPECT_EQ(exact.n_cached, reference.n_cached);
  e->page_pool().check_invariants();
}

}  // namespace
}  // namespace pc
