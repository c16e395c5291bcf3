// Token-exact prefix reuse never changes the answer: logits with a cached
// prefix are bitwise equal to a run without the cache, whatever the prefix
// length (page boundaries or mid-page), after copy-on-write and under
// eviction pressure; and a greedy conversation continued from the cache is
// token-for-token the uncached one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "engine/engine.h"
#include "kv/radix_index.h"
#include "common/error.h"
#include "kv/page_pool.h"
#include "model/model.h"
#include "model_test_util.h"
#include "engine_test_peer.h"
#include "probe/engine_logits.h"

namespace pc {
namespace {

std::vector<int32_t> random_tokens(std::mt19937& rng, int64_t n_vocab, int n) {
  std::uniform_int_distribution<int32_t> d(3, int32_t(n_vocab) - 1);
  std::vector<int32_t> v(n);
  for (int32_t& t : v) t = d(rng);
  return v;
}

EngineOptions options(int64_t kv_bytes, bool cache, KvType kv_type = KvType::kF16) {
  EngineOptions o;
  o.threads = 2;
  o.kv_memory_bytes = kv_bytes;
  o.prefix_cache = cache;
  o.kv_type = kv_type;
  return o;
}

// Longest common prefix of p with any earlier prompt, capped at |p| - 1: what a
// token-exact cache with enough capacity must reuse.
int64_t ideal_hit(const std::vector<std::vector<int32_t>>& history, const std::vector<int32_t>& p) {
  int64_t best = 0;
  for (const auto& h : history) {
    int64_t n = 0;
    while (n < int64_t(h.size()) && n < int64_t(p.size()) && h[n] == p[n]) ++n;
    best = std::max(best, n);
  }
  return std::min<int64_t>(best, int64_t(p.size()) - 1);
}

// Runs prompts sharing prefixes of random lengths through a cached engine and
// compares every computed position with an uncached engine. With `roomy`
// capacity, every hit must be exactly the longest shared prefix; otherwise at
// most that. Returns the total number of cached tokens.
int64_t check_exact(const std::string& path, int64_t kv_bytes, int rounds, uint32_t seed,
                    bool roomy = true, KvType kv_type = KvType::kF16) {
  auto model = Model::load(path);
  const int64_t V = model->config().n_vocab;
  Engine cached(*model, options(kv_bytes, true, kv_type));
  Engine plain(*model, options(64 << 20, false, kv_type));
  std::mt19937 rng(seed);
  std::vector<std::vector<int32_t>> history;
  std::vector<int32_t> base{1};
  auto more = random_tokens(rng, V, 70);
  base.insert(base.end(), more.begin(), more.end());
  prompt_logits(cached, base, 64, true);
  history.push_back(base);
  int64_t total_cached = 0;
  for (int r = 0; r < rounds; ++r) {
    // Share a prefix of a random earlier prompt: lengths hit page boundaries
    // (multiples of 16), mid-page and 1.
    const auto& src = history[rng() % history.size()];
    const int shared = 1 + int(rng() % src.size());
    std::vector<int32_t> p(src.begin(), src.begin() + shared);
    const auto tail = random_tokens(rng, V, 1 + int(rng() % 40));
    p.insert(p.end(), tail.begin(), tail.end());
    const int chunk = 1 + int(rng() % 48);
    int64_t n_cached = 0;
    const std::vector<float> got = prompt_logits(cached, p, chunk, true, &n_cached);
    const std::vector<float> ref = prompt_logits(plain, p, int(p.size()));
    const int64_t ideal = ideal_hit(history, p);
    if (roomy) {
      EXPECT_EQ(n_cached, ideal) << "round " << r;
    } else {
      EXPECT_LE(n_cached, ideal) << "round " << r;
    }
    EXPECT_EQ(got.size(), (p.size() - n_cached) * V);
    for (size_t i = n_cached; i < p.size(); ++i)
      EXPECT_EQ(0, std::memcmp(&got[(i - n_cached) * V], &ref[i * V], V * sizeof(float)))
          << path << " round " << r << ": position " << i << " (cached " << n_cached
          << ", shared " << shared << ", chunk " << chunk << ")";
    total_cached += n_cached;
    history.push_back(p);
    EngineTestPeer::page_pool(cached).check_invariants();
    EngineTestPeer::index(cached).check_invariants();
  }
  return total_cached;
}

TEST(PrefixCache, ExactStories260K) {
  EXPECT_GT(check_exact(test::shared_model("stories260K.gguf"), 64 << 20, 25, 1), 0);
}

TEST(PrefixCache, ExactTinyStories656K) {
  EXPECT_GT(check_exact(test::shared_model("TinyStories-656K-Q8_0.gguf"), 64 << 20, 25, 2), 0);
}

TEST(PrefixCache, ExactGeneratedQwen3) {
  EXPECT_GT(check_exact(test::generated_model("qwen3", GgmlType::Q8_0), 64 << 20, 20, 3), 0);
}

// Sliding-window models (window 32): prompts of 70-110 tokens, so cached
// prefixes start and end inside and outside the local layers' windows.
TEST(PrefixCache, ExactGeneratedGemma2) {
  EXPECT_GT(check_exact(test::generated_model("gemma2", GgmlType::Q8_0), 64 << 20, 20, 6), 0);
}
TEST(PrefixCache, ExactGeneratedGemma3) {
  EXPECT_GT(check_exact(test::generated_model("gemma3", GgmlType::F16), 64 << 20, 20, 7), 0);
}
TEST(PrefixCache, ExactGeneratedPhi3) {
  EXPECT_GT(check_exact(test::generated_model("phi3", GgmlType::Q8_0), 64 << 20, 12, 8), 0);
}
TEST(PrefixCache, ExactPhi3LongRope) {
  EXPECT_GT(check_exact(test::shared_model("arch/phi3-longrope-tiny.gguf"), 64 << 20, 12, 9), 0);
}

TEST(PrefixCache, ExactUnderEvictionPressure) {
  // stories260K: 5 layers × 4 KV heads × 8 dims × 2 (K, V) × 2 bytes = 640 bytes
  // per token; 12 pages of 16 tokens hold less than two prompts, so entries are
  // evicted all the time and hits are partial.
  const std::string path = test::shared_model("stories260K.gguf");
  EXPECT_GT(check_exact(path, 12 * 16 * 640, 30, 4, /*roomy=*/false), 0);
}

void check_conversation(const std::string& path, KvType kv_type = KvType::kF16) {
  auto model = Model::load(path);
  Engine cached(*model, options(64 << 20, true, kv_type));
  Engine plain(*model, options(64 << 20, false, kv_type));
  std::mt19937 rng(9);
  std::vector<int32_t> conv{1};
  for (int turn = 0; turn < 6; ++turn) {
    const auto user = random_tokens(rng, model->config().n_vocab, 5 + int(rng() % 20));
    conv.insert(conv.end(), user.begin(), user.end());
    GenerateRequest req;
    req.prompt = conv;
    req.max_tokens = 12;
    req.stop_at_eog = false;
    const GenerateResult a = cached.generate(req);
    const GenerateResult b = plain.generate(req);
    ASSERT_EQ(a.tokens, b.tokens) << "turn " << turn;
    EXPECT_EQ(b.n_cached, 0);
    if (turn > 0) {
      // Everything but the new user message and the last token of the previous
      // reply (never fed back, so it has no KV) comes from the cache.
      EXPECT_EQ(a.n_cached, int64_t(conv.size() - user.size()) - 1) << "turn " << turn;
    }
    EXPECT_EQ(a.n_cached + a.n_computed, int64_t(conv.size()));
    conv.insert(conv.end(), a.tokens.begin(), a.tokens.end());
  }
}

TEST(PrefixCache, GreedyConversationMatchesUncached) {
  check_conversation(test::shared_model("TinyStories-656K-Q8_0.gguf"));
}

// Quantized KV (kernels/kv_quant.h): exactness holds within the type — a hit gives
// bitwise the logits of recomputing with the same KV type, at any prefix length and
// chunking, under eviction pressure, and through greedy conversations; on heads of
// 8 (stories260K), 16 (TinyStories, gemma3) and 32 dimensions (a generated model:
// GGUF's 32-value blocks).
TEST(PrefixCache, ExactWithinEachQuantizedKvType) {
  for (KvType t : {KvType::kQ8_0, KvType::kQ4_0}) {
    SCOPED_TRACE(kv_type_name(t));
    EXPECT_GT(check_exact(test::shared_model("stories260K.gguf"), 64 << 20, 12, 21, true, t), 0);
    EXPECT_GT(check_exact(test::shared_model("TinyStories-656K-Q8_0.gguf"), 64 << 20, 8, 22, true, t), 0);
    // stories260K in q8_0: 5 layers × 4 heads × 2 × 10 bytes = 400 bytes a token
    EXPECT_GT(check_exact(test::shared_model("stories260K.gguf"), 12 * 16 * 400, 12, 23, false, t), 0);
    check_conversation(test::shared_model("TinyStories-656K-Q8_0.gguf"), t);
    check_conversation(test::shared_model("arch/gemma3-tiny.gguf"), t);
  }
}

TEST(PrefixCache, ExactWithQuantizedKvOnWholeBlocks) {
  const std::string path = test::generated_model("qwen3", GgmlType::Q4_K);  // the "small" shape: heads of 64
  auto model = Model::load(path);
  ASSERT_EQ(model->config().head_dim % 32, 0) << "a generated model with heads of whole q8_0 blocks";
  for (KvType t : {KvType::kQ8_0, KvType::kQ4_0}) {
    SCOPED_TRACE(kv_type_name(t));
    EXPECT_GT(check_exact(path, 64 << 20, 8, 24, true, t), 0);
  }
}

// --kv-memory counts the type's real bytes: the same bytes hold 64/34 = 1.88x the
// tokens in q8_0 (34 bytes per 32 values against 64) and 64/18 = 3.56x in q4_0.
TEST(PrefixCache, QuantizedKvHoldsMoreTokensInTheSameMemory) {
  const std::string path = test::generated_model("qwen3", GgmlType::Q4_K);  // heads of 64
  auto model = Model::load(path);
  const int64_t bytes = 8 << 20;
  int64_t pages[3];
  const KvType types[3] = {KvType::kF16, KvType::kQ8_0, KvType::kQ4_0};
  for (int i = 0; i < 3; ++i) {
    Engine e(*model, options(bytes, true, types[i]));
    pages[i] = EngineTestPeer::page_pool(e).n_pages();
    EXPECT_LE(int64_t(EngineTestPeer::page_pool(e).page_bytes()) * pages[i], bytes);
  }
  EXPECT_GE(double(pages[1]) / double(pages[0]), 64.0 / 34 - 0.005);
  EXPECT_GE(double(pages[2]) / double(pages[0]), 64.0 / 18 - 0.01);
}

// The type is really used: q8_0 and q4_0 logits differ from F16's, slightly
// (the next token agrees at most positions).
TEST(PrefixCache, QuantizedKvLogitsAreCloseToF16) {
  auto model = Model::load(test::shared_model("TinyStories-656K-Q8_0.gguf"));
  const int64_t V = model->config().n_vocab;
  std::mt19937 rng(31);
  std::vector<int32_t> p{1};
  const auto more = random_tokens(rng, V, 120);
  p.insert(p.end(), more.begin(), more.end());
  Engine f16(*model, options(64 << 20, false));
  const std::vector<float> ref = prompt_logits(f16, p, int(p.size()));
  for (KvType t : {KvType::kQ8_0, KvType::kQ4_0}) {
    Engine q(*model, options(64 << 20, false, t));
    const std::vector<float> got = prompt_logits(q, p, int(p.size()));
    ASSERT_EQ(got.size(), ref.size());
    EXPECT_NE(0, std::memcmp(got.data(), ref.data(), ref.size() * sizeof(float))) << kv_type_name(t);
    int agree = 0;
    for (size_t i = 0; i < p.size(); ++i) {
      const float* a = &ref[i * V];
      const float* b = &got[i * V];
      agree += std::max_element(a, a + V) - a == std::max_element(b, b + V) - b;
    }
    EXPECT_GE(agree, int(p.size()) * (t == KvType::kQ8_0 ? 95 : 70) / 100) << kv_type_name(t);
  }
}

// A model whose heads the quantized types cannot store: a clear error naming the flag.
TEST(PrefixCache, QuantizedKvOnHeadsItCannotStoreIsAnError) {
  auto model = Model::load(test::shared_model("llama-2-tiny-random.gguf"));  // heads of 4
  try {
    Engine e(*model, options(8 << 20, true, KvType::kQ8_0));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--kv-type q8_0"), std::string::npos) << e.what();
  }
}

// Conversations of ~150 tokens over windows of 32: each turn reuses the whole
// history on the local layers too (all pages kept), token for token the
// uncached run.
TEST(PrefixCache, GreedyConversationSlidingWindow) {
  check_conversation(test::shared_model("arch/gemma2-tiny.gguf"));
  check_conversation(test::shared_model("arch/gemma3-tiny.gguf"));
  check_conversation(test::generated_model("phi3", GgmlType::Q8_0));
}

TEST(PrefixCache, TenantsDoNotShare) {
  auto model = Model::load(test::shared_model("stories260K.gguf"));
  Engine e(*model, options(64 << 20, true));
  std::mt19937 rng(5);
  std::vector<int32_t> p{1};
  const auto more = random_tokens(rng, model->config().n_vocab, 40);
  p.insert(p.end(), more.begin(), more.end());
  int64_t n = -1;
  prompt_logits(e, p, 64, true, &n, "alice");
  EXPECT_EQ(n, 0);
  prompt_logits(e, p, 64, true, &n, "bob");
  EXPECT_EQ(n, 0);
  prompt_logits(e, p, 64, true, &n, "alice");
  EXPECT_EQ(n, int64_t(p.size()) - 1);
}

// Runs the requests together (continuous batching) to completion; their
// results in request order (an empty result for one that did not finish).
std::vector<GenerateResult> run_together(Engine& e, const std::vector<GenerateRequest>& reqs) {
  std::vector<int64_t> ids;
  for (auto& r : reqs) ids.push_back(e.add(r));
  while (!e.idle()) e.step();
  std::vector<GenerateResult> out(reqs.size());
  for (auto& [id, r] : e.take_finished())
    for (size_t i = 0; i < ids.size(); ++i)
      if (id == ids[i]) out[i] = std::move(r);
  return out;
}

TEST(PrefixCache, ContinuousBatchingMatchesOneAtATime) {
  auto model = Model::load(test::shared_model("stories260K.gguf"));
  Engine batched(*model, options(64 << 20, true));
  Engine single(*model, options(64 << 20, false));
  std::mt19937 rng(3);
  std::vector<GenerateRequest> reqs(5);
  for (auto& r : reqs) {
    r.prompt = {1};
    const auto t = random_tokens(rng, model->config().n_vocab, 3 + int(rng() % 30));
    r.prompt.insert(r.prompt.end(), t.begin(), t.end());
    r.max_tokens = 10 + int(rng() % 10);
    r.stop_at_eog = false;
  }
  const std::vector<GenerateResult> done = run_together(batched, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    const GenerateResult ref = single.generate(reqs[i]);
    EXPECT_EQ(done[i].tokens, ref.tokens) << "request " << i;
  }
}

// Several sequences decoding together over contexts of 2-3 softmax segments:
// each step's attention is split per sequence and segment for all KV heads
// (Forward::plan_split, the decode case), and every token's log-probabilities
// are bitwise those of the sequence generated alone on one thread (F16
// weights: activations stay F32, so a changed bit of attention shows).
TEST(PrefixCache, LongContextBatchMatchesOneAtATimeBitwise) {
  auto model = Model::load(test::generated_model("llama", GgmlType::F16));
  Engine batched(*model, options(64 << 20, false));
  EngineOptions one = options(64 << 20, false);
  one.threads = 1;
  Engine single(*model, one);
  std::mt19937 rng(5);
  std::vector<GenerateRequest> reqs(4);
  for (size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].prompt = {1};
    const auto t = random_tokens(rng, model->config().n_vocab, 300 + 130 * int(i));
    reqs[i].prompt.insert(reqs[i].prompt.end(), t.begin(), t.end());
    reqs[i].max_tokens = 6;
    reqs[i].stop_at_eog = false;
    reqs[i].logprobs = 2;
  }
  const std::vector<GenerateResult> done = run_together(batched, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    const GenerateResult ref = single.generate(reqs[i]);
    const GenerateResult& r = done[i];
    ASSERT_EQ(r.tokens, ref.tokens) << "request " << i;
    ASSERT_EQ(r.logprobs.size(), ref.logprobs.size());
    for (size_t k = 0; k < r.logprobs.size(); ++k) {
      EXPECT_EQ(0, std::memcmp(&r.logprobs[k].logprob, &ref.logprobs[k].logprob, sizeof(float)))
          << "request " << i << " token " << k;
      ASSERT_EQ(r.logprobs[k].top.size(), ref.logprobs[k].top.size());
      for (size_t j = 0; j < r.logprobs[k].top.size(); ++j) {
        EXPECT_EQ(r.logprobs[k].top[j].first, ref.logprobs[k].top[j].first);
        EXPECT_EQ(0, std::memcmp(&r.logprobs[k].top[j].second, &ref.logprobs[k].top[j].second, sizeof(float)))
            << "request " << i << " token " << k;
      }
    }
  }
}

TEST(PrefixCache, OutOfMemoryIsAnErrorNotACrash) {
  auto model = Model::load(test::shared_model("stories260K.gguf"));
  Engine e(*model, options(2 * 16 * 640, true));
  GenerateRequest req;
  req.prompt.assign(100, 5);
  EXPECT_THROW(e.generate(req), Error);
  // The engine recovers: a request that fits still runs (one of the two pages: a
  // request may use the memory less one page, Engine::admission_tokens).
  req.prompt.assign(10, 5);
  req.max_tokens = 6;
  req.stop_at_eog = false;
  EXPECT_EQ(e.generate(req).tokens.size(), 6u);
  EngineTestPeer::page_pool(e).check_invariants();
}

}  // namespace
}  // namespace pc
