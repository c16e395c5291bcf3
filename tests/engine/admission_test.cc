// KV admission: requests that each fit alone all succeed when they run together in
// a KV memory too small for all of them (the youngest are preempted and resumed),
// with the greedy outputs of running them one at a time; one that cannot fit even
// alone is refused up front.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <numeric>
#include <tuple>

#include "engine/cache_admin.h"
#include "engine/engine.h"
#include "kv/kv_storage.h"
#include "kv/page_pool.h"
#include "model/model.h"
#include "model_test_util.h"
#include "pml/compiled_plan.h"
#include "pml/pml.h"
#include "tokenizer/tokenizer.h"
#include "engine_test_peer.h"

namespace pc {
namespace {

struct Fixture {
  std::unique_ptr<Model> model = Model::load(test::shared_model("stories260K.gguf"));
  int64_t page_bytes() const {
    const ModelConfig& c = model->config();
    return int64_t(KvShape{int(c.n_layer), int(c.n_kv_head), int(c.head_dim), 16}.bytes_per_page());
  }
  std::unique_ptr<Engine> engine(int64_t pages, int max_batch = 512, bool prefix_cache = true) {
    EngineOptions o;
    o.prefix_cache = prefix_cache;
    o.kv_memory_bytes = pages * page_bytes();
    o.threads = 1;
    o.max_batch_tokens = max_batch;
    return std::make_unique<Engine>(*model, o);
  }
  GenerateRequest request(const std::string& text, int32_t max_tokens) {
    GenerateRequest r;
    r.prompt = model->tokenizer().encode(text, true, false);
    r.max_tokens = max_tokens;
    r.stop_at_eog = false;
    return r;
  }
};

TEST(Admission, ConcurrentRequestsThatFitAloneAllSucceed) {
  Fixture f;
  const std::vector<std::string> texts = {"Once upon a time there was a little dog named Max.",
                                          "Lily wanted to play in the park with her red ball.",
                                          "The sun was hot and the big cat slept all day long.",
                                          "Tom and Sue found a shiny box under the old tree."};
  std::vector<GenerateRequest> reqs;
  for (const std::string& t : texts) reqs.push_back(f.request(t, 120));
  // One at a time, with room to spare.
  std::vector<std::vector<int32_t>> want;
  {
    auto big = f.engine(256);
    for (const GenerateRequest& r : reqs) want.push_back(big->generate(r).tokens);
  }
  // 16 pages = 256 tokens: each request (about 135 tokens) fits alone, two do not.
  auto e = f.engine(16);
  ASSERT_LE(int64_t(reqs[0].prompt.size()) + 120, e->admission_tokens());
  std::map<int64_t, size_t> ids;
  for (size_t i = 0; i < reqs.size(); ++i) ids[e->add(reqs[i])] = i;
  std::map<size_t, GenerateResult> got;
  for (int guard = 0; got.size() < reqs.size() && guard < 100000; ++guard) {
    e->step();
    for (auto& [id, r] : e->take_finished()) got[ids.at(id)] = std::move(r);
  }
  ASSERT_EQ(got.size(), reqs.size());
  int64_t preempted = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(got[i].finish_reason, FinishReason::kLength) << got[i].error;
    EXPECT_EQ(got[i].tokens, want[i]) << "request " << i;
    preempted += got[i].n_preempted;
  }
  EXPECT_GT(preempted, 0);
  EXPECT_EQ(e->stats().preemptions, preempted);
  EngineTestPeer::page_pool(*e).check_invariants();
}

// With --no-prefix-cache, preemption still frees and resumes sequences (a resume
// recomputes), and nothing ever enters the prefix index: the prefix cache is the only
// door to it, and a disabled one inserts nothing.
TEST(Admission, PreemptionWithoutPrefixCacheLeavesTheIndexEmpty) {
  Fixture f;
  const std::vector<std::string> texts = {"Once upon a time there was a little dog named Max.",
                                          "Lily wanted to play in the park with her red ball.",
                                          "The sun was hot and the big cat slept all day long."};
  std::vector<GenerateRequest> reqs;
  for (const std::string& t : texts) reqs.push_back(f.request(t, 120));
  std::vector<std::vector<int32_t>> want;
  {
    auto big = f.engine(256);
    for (const GenerateRequest& r : reqs) want.push_back(big->generate(r).tokens);
  }
  auto e = f.engine(16, 512, /*prefix_cache=*/false);
  std::map<int64_t, size_t> ids;
  for (size_t i = 0; i < reqs.size(); ++i) ids[e->add(reqs[i])] = i;
  std::map<size_t, GenerateResult> got;
  for (int guard = 0; got.size() < reqs.size() && guard < 100000; ++guard) {
    e->step();
    ASSERT_EQ(e->cache().counters().prefix.entries, 0) << "step " << guard;
    for (auto& [id, r] : e->take_finished()) got[ids.at(id)] = std::move(r);
  }
  ASSERT_EQ(got.size(), reqs.size());
  int64_t preempted = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(got[i].tokens, want[i]) << "request " << i;
    EXPECT_EQ(got[i].n_cached, 0) << "request " << i;
    preempted += got[i].n_preempted;
  }
  EXPECT_GT(preempted, 0);
  EXPECT_EQ(e->cache().counters().prefix.entries, 0);
  EXPECT_TRUE(e->cache().scopes().empty());
}

TEST(Admission, RequestThatCannotFitAloneIsRefused) {
  Fixture f;
  auto e = f.engine(8);  // 128 tokens
  GenerateRequest r = f.request("Once upon a time", 200);
  EXPECT_THROW(e->add(r), ContextLengthError);
  EXPECT_TRUE(e->idle());
  r.max_tokens = 60;
  EXPECT_EQ(e->generate(r).tokens.size(), 60u);
}

// A request that needs exactly the KV memory pinned entries leave is admitted and
// runs, with or without a hit on the pinned prefix (which ends inside a page).
TEST(Admission, RequestUsingAllUnpinnedMemoryRuns) {
  Fixture f;
  auto e = f.engine(8);  // 128 tokens
  GenerateRequest a = f.request("Once upon a time there was a little dog named Max.", 1);
  e->generate(a);
  ASSERT_TRUE(e->cache().pin("", a.prompt));
  const int64_t limit = e->admission_tokens();
  ASSERT_LT(limit, 128);
  for (const char* text : {"Lily wanted to play in the park.", "Once upon a time there was a little dog named Max. He"}) {
    GenerateRequest r = f.request(text, 0);
    r.max_tokens = int32_t(limit - int64_t(r.prompt.size()));
    const GenerateResult got = e->generate(r);
    EXPECT_EQ(got.finish_reason, FinishReason::kLength) << text << ": " << got.error;
    EXPECT_EQ(int64_t(got.tokens.size()), r.max_tokens) << text;
    EngineTestPeer::page_pool(*e).check_invariants();
  }
}

// While a long module is encoded (batched in steps), a decoding sequence keeps
// getting tokens: no step stalls it for the whole encoding.
TEST(Admission, ModuleEncodingDoesNotStallDecoding) {
  Fixture f;
  std::string doc;
  for (int i = 0; i < 120; ++i) doc += "The little dog ran to the park and played with a red ball. ";
  const std::string schema = "<schema name=\"m\">Story: <module name=\"doc\">" + doc + "</module></schema>";
  pml::Encoder enc = pml::Encoder::for_model(f.model->tokenizer(), f.model->file());
  const pml::SchemaLayout layout = pml::compile_schema(schema, enc, "m.pml");
  ASSERT_GT(layout.modules[1].tokens.size(), 1500u);
  auto e = f.engine(1024, 64);
  GenerateRequest dec = f.request("Once upon a time", 6000);
  const int64_t decoder = e->add(dec);
  while (e->stats().generated_tokens < 5) e->step();
  using Clock = std::chrono::steady_clock;
  auto median_step_ms = [&](int n) {
    std::vector<double> ms;
    for (int i = 0; i < n; ++i) {
      const auto t0 = Clock::now();
      e->step();
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  };
  const double alone = median_step_ms(15);
  GenerateRequest pr;
  pr.max_tokens = 1;
  e->add_plan(pml::kv_plan(pml::plan_prompt("<prompt schema=\"m\"><doc/> The end.</prompt>", layout, enc), layout), pr);
  // Steps until the plan's request finished: the decoder advanced on every one.
  int steps = 0;
  int64_t before = e->stats().generated_tokens;
  bool plan_done = false;
  std::vector<double> during;
  while (!plan_done) {
    const auto t0 = Clock::now();
    e->step();
    during.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    ++steps;
    for (auto& [id, r] : e->take_finished()) plan_done = plan_done || id != decoder;
  }
  const double encoding_ms = std::accumulate(during.begin(), during.end(), 0.0);
  const double longest = *std::max_element(during.begin(), during.end());
  std::sort(during.begin(), during.end());
  const double with_encoding = during[during.size() / 2];
  std::printf("decode step: %.3f ms alone, %.3f ms (median, longest %.3f) while encoding %zu tokens in %d steps "
              "(%.1f ms)\n",
              alone, with_encoding, longest, layout.modules[1].tokens.size(), steps, encoding_ms);
  const int64_t decoded = e->stats().generated_tokens - before;
  // A decode step at the context the decoder reached (its attention grew with it):
  // what the engine keeps an encoding step within encode_stall_factor (2) of.
  const double after = median_step_ms(15);
  std::printf("decode step after the encoding: %.3f ms\n", after);
  EXPECT_GE(steps, int(layout.modules[1].tokens.size() / 64));  // encoding took many steps
  EXPECT_GE(decoded, steps - 1);                                 // and the decoder ran in each
  // No step holds the decoder for the whole encoding: the longest is a small part of
  // it, and the median step stays within the engine's stall factor of a decode step
  // (at the larger of the two contexts, with a millisecond for timer and load noise).
  EXPECT_LT(longest, encoding_ms / 4);
  EXPECT_LT(with_encoding, 2.0 * std::max(alone, after) + 1.0);
}

// Many requests with shared prefixes arriving over time in a small KV memory and a
// small step budget: decoding sequences planned into a step are preempted by older
// ones still computing their prompts (a parked sequence resumed), so a preempted
// table may hold slots prepared for a part that never ran. Only computed KV may be
// published, and every output equals the request run alone.
TEST(Admission, PreemptionAfterPlanningUnderStaggeredLoad) {
  Fixture f;
  const std::string shared = "Once upon a time there was a little dog named Max. He liked to run and play. ";
  const std::vector<std::string> tails = {"Lily", "The sun was hot", "Tom and Sue found a box",
                                          "One day the dog saw a big red ball in the park",
                                          "Max", "A bird sang", "The cat slept all day long under the tree",
                                          "Mom baked a cake", "The boy", "They went home"};
  std::vector<GenerateRequest> reqs;
  for (size_t i = 0; i < tails.size(); ++i)
    reqs.push_back(f.request((i % 3 == 2 ? "" : shared) + tails[i], int32_t(30 + 13 * (i % 5))));
  std::vector<std::vector<int32_t>> want;
  {
    auto big = f.engine(512);
    for (const GenerateRequest& r : reqs) want.push_back(big->generate(r).tokens);
  }
  // (KV pages, step budget, steps between arrivals): each of these preempted a
  // decoding sequence after its step was planned before the fix.
  for (const auto& [pages, batch, every] : {std::tuple{10, 4, 1}, std::tuple{12, 16, 1}, std::tuple{14, 8, 3}}) {
    SCOPED_TRACE("pages " + std::to_string(pages) + ", batch " + std::to_string(batch));
    auto e = f.engine(pages, batch);
    std::map<int64_t, size_t> ids;
    std::map<size_t, GenerateResult> got;
    size_t next = 0;
    for (int step = 0; got.size() < reqs.size() && step < 200000; ++step) {
      if (next < reqs.size() && step % every == 0) {
        ids[e->add(reqs[next])] = next;
        ++next;
      }
      e->step();
      for (auto& [id, r] : e->take_finished()) got[ids.at(id)] = std::move(r);
    }
    ASSERT_EQ(got.size(), reqs.size());
    int64_t preempted = 0;
    for (size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_EQ(got[i].finish_reason, FinishReason::kLength) << i << ": " << got[i].error;
      EXPECT_EQ(got[i].tokens, want[i]) << "request " << i;
      preempted += got[i].n_preempted;
    }
    EXPECT_GT(preempted, 0);
    EngineTestPeer::page_pool(*e).check_invariants();
  }
}

}  // namespace
}  // namespace pc
