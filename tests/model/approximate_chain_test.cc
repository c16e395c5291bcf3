// Approximately built KV is published where only approximate requests look: the next
// turn of an approximate conversation continues from it (instead of recomputing
// everything after the change again), the counts say it was approximate, and exact
// requests still answer bitwise as a cold engine does.
#include <gtest/gtest.h>

#include <cstring>

#include "engine/engine.h"
#include "kv/page_pool.h"
#include "model/model.h"
#include "model_test_util.h"
#include "tokenizer/tokenizer.h"

namespace pc {
namespace {

struct Chain {
  std::unique_ptr<Model> model = Model::load(test::shared_model("stories260K.gguf"));
  std::vector<int32_t> sys = text(" Once upon a time there was a little girl named Lily who loved to play outside.");
  std::vector<int32_t> a = text(" One day she found a big red ball in the park and kicked it very high into the sky.");
  std::vector<int32_t> b = text(" Her friend Tom had a small dog named Max who liked to run and bark at the birds.");
  std::vector<int32_t> c = text(" Then they all went home and had a nice warm dinner together.");
  std::vector<int32_t> d = text(" The next morning the sun was bright and the birds sang in the tall green trees.");
  std::vector<int32_t> text(const std::string& s) { return model->tokenizer().encode(s, false, false); }
  std::unique_ptr<Engine> engine() {
    EngineOptions o;
    o.kv_memory_bytes = 32 << 20;
    o.threads = 1;
    return std::make_unique<Engine>(*model, o);
  }
  GenerateRequest request(const std::vector<std::vector<int32_t>>& parts, CacheReuse mode) {
    GenerateRequest r;
    r.prompt = {model->tokenizer().bos()};
    for (const auto& p : parts) {
      r.blocks.push_back({int32_t(r.prompt.size()), int32_t(r.prompt.size() + p.size())});
      r.prompt.insert(r.prompt.end(), p.begin(), p.end());
    }
    r.reuse.mode = mode;
    r.reuse.budget = 0;
    r.max_tokens = 1;
    return r;
  }
};

bool bitwise(const std::vector<float>& x, const std::vector<float>& y) {
  return !x.empty() && x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

TEST(ApproximateChain, NextTurnContinuesFromApproximateKv) {
  Chain f;
  auto e = f.engine();
  e->generate(f.request({f.sys, f.a, f.b}, CacheReuse::kExact));
  // Turn 2: a and b swapped, then c: approximate.
  const GenerateResult t2 = e->generate(f.request({f.sys, f.b, f.a, f.c}, CacheReuse::kApproximate));
  ASSERT_GT(t2.n_approximate, 0);
  // Turn 3 appends d: everything of turn 2's prompt but its last token comes from turn 2's
  // approximately built KV, which no exact cache holds.
  const auto turn3 = f.request({f.sys, f.b, f.a, f.c, f.d}, CacheReuse::kApproximate);
  GenerateResult t3;
  const std::vector<float> l3 = e->request_logits(turn3, &t3);
  EXPECT_EQ(t3.n_cached, t2.n_cached) << "the exact prefix is still the one before the swap";
  EXPECT_GE(t3.n_cached + t3.n_approximate, t2.n_prompt);
  EXPECT_LE(t3.n_computed, int64_t(f.d.size()) + 2);

  // Exact requests never see it: bitwise a cold engine's answer, from the exact prefix only.
  auto exact = turn3;
  exact.reuse.mode = CacheReuse::kExact;
  GenerateResult x;
  EXPECT_TRUE(bitwise(e->request_logits(exact, &x), f.engine()->request_logits(exact)));
  EXPECT_EQ(x.n_approximate, 0);
  EXPECT_EQ(x.n_cached, t2.n_cached);
  e->page_pool().check_invariants();
}

}  // namespace
}  // namespace pc
