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
#include "engine_test_peer.h"
#include "probe/engine_logits.h"

namespace pc {
namespace {

struct Chain {
  std::unique_ptr<Model> model = Model::load(test::shared_model("stories260K.gguf"));
  std::vector<int32_t> sys = text(test::Story::kSys), a = text(test::Story::kA), b = text(test::Story::kB),
                       c = text(test::Story::kC), d = text(test::Story::kD);
  std::vector<int32_t> text(const std::string& s) { return model->tokenizer().encode(s, false, false); }
  std::unique_ptr<Engine> engine() { return test::block_engine(*model); }
  GenerateRequest request(const std::vector<std::vector<int32_t>>& parts, CacheReuse mode) {
    GenerateRequest r = test::block_request(model->tokenizer().bos(), parts, mode);
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
  const std::vector<float> l3 = request_logits(*e, turn3, &t3);
  EXPECT_EQ(t3.n_cached, t2.n_cached) << "the exact prefix is still the one before the swap";
  EXPECT_GE(t3.n_cached + t3.n_approximate, t2.n_prompt);
  EXPECT_LE(t3.n_computed, int64_t(f.d.size()) + 2);

  // Exact requests never see it: bitwise a cold engine's answer, from the exact prefix only.
  auto exact = turn3;
  exact.reuse.mode = CacheReuse::kExact;
  GenerateResult x;
  EXPECT_TRUE(bitwise(request_logits(*e, exact, &x), request_logits(*f.engine(), exact)));
  EXPECT_EQ(x.n_approximate, 0);
  EXPECT_EQ(x.n_cached, t2.n_cached);
  // Budget 1 is the exact result: it does not continue from approximate KV.
  auto all = turn3;
  all.reuse.budget = 1.0;
  EXPECT_TRUE(bitwise(request_logits(*e, all), request_logits(*f.engine(), turn3)));
  EngineTestPeer::page_pool(*e).check_invariants();
}

}  // namespace
}  // namespace pc
