// The block index: a block's KV is found by its tokens after it moved (another request
// placed it elsewhere), reported as reusable when an exact prefix stops before it,
// forgotten once its pages are evicted, and never found from another namespace.
#include <gtest/gtest.h>

#include <numeric>

#include "engine/cache_admin.h"
#include "engine/engine.h"
#include "kv/page_pool.h"
#include "kv/radix_index.h"
#include "model/model.h"
#include "model_test_util.h"

namespace pc {
namespace {

std::vector<int32_t> run(int32_t first, int32_t n) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

// A prompt of parts, each a block: returns the plan.
KvPlan parts_plan(const std::vector<std::vector<int32_t>>& parts) {
  std::vector<int32_t> tokens{1};  // BOS
  std::vector<KvBlock> blocks;
  for (const auto& p : parts) {
    blocks.push_back({int32_t(tokens.size()), int32_t(tokens.size() + p.size())});
    tokens.insert(tokens.end(), p.begin(), p.end());
  }
  KvPlan plan = KvPlan::prompt(tokens);
  plan.blocks = blocks;
  return plan;
}

TEST(BlockIndex, FindsMovedBlocksForgetsEvictedKeepsNamespacesApart) {
  std::unique_ptr<Model> model = Model::load(test::shared_model("stories260K.gguf"));
  EngineOptions o;
  o.kv_memory_bytes = 16 << 20;
  o.threads = 1;
  Engine e(*model, o);
  const auto sys = run(100, 40), tool1 = run(200, 30), tool2 = run(300, 25), user = run(400, 20);
  GenerateRequest req;
  req.max_tokens = 2;
  const GenerateResult a = e.generate_plan(parts_plan({sys, tool1, tool2, user}), req);
  EXPECT_EQ(a.n_reusable, 0);
  auto found = e.cache().find_block("", tool2);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->position, 1 + 40 + 30);
  EXPECT_EQ(found->slices.size() > 0, true);
  int32_t n = 0;
  for (const PageSlice& s : found->slices) n += s.size();
  EXPECT_EQ(n, 25);
  EXPECT_FALSE(e.cache().find_block("other-tenant", tool2));  // namespaces never mix
  EXPECT_FALSE(e.cache().find_block("", run(300, 24)));        // a block is its exact tokens

  // tool1 removed: the exact prefix stops after the system prompt; tool2 and the user
  // message are cached at other positions.
  const GenerateResult b = e.generate_plan(parts_plan({sys, tool2, user}), req);
  EXPECT_EQ(b.n_cached, 1 + 40);
  EXPECT_EQ(b.n_reusable, 25 + 20);
  found = e.cache().find_block("", tool2);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->position, 1 + 40);  // the most recent location: request b's

  // Evicting the pages forgets the blocks.
  e.cache().evict(size_t(1) << 40);
  EXPECT_FALSE(e.cache().find_block("", tool2));
  EXPECT_FALSE(e.cache().find_block("", user));
  e.page_pool().check_invariants();
  e.index().check_invariants();
}

TEST(BlockIndex, PinnedBlocksStayFindable) {
  std::unique_ptr<Model> model = Model::load(test::shared_model("stories260K.gguf"));
  EngineOptions o;
  o.kv_memory_bytes = 16 << 20;
  o.threads = 1;
  Engine e(*model, o);
  const auto sys = run(100, 40), doc = run(200, 50);
  GenerateRequest req;
  req.max_tokens = 1;
  const KvPlan p = parts_plan({sys, doc});
  e.generate_plan(p, req);
  std::vector<int32_t> prefix = p.spans[0].tokens;
  ASSERT_TRUE(e.cache().pin("", prefix));
  e.cache().evict(size_t(1) << 40);
  EXPECT_TRUE(e.cache().find_block("", doc));
}

}  // namespace
}  // namespace pc
