// A hybrid (Gated DeltaNet) model served through the engine: greedy generation
// follows llama.cpp's, a prefix hit resumes from a recurrent-state snapshot stored
// with the prefix and gives bitwise the logits of a cold run at every kind of
// boundary (mid-part, end of part, end of prompt, end of reply), an approximate
// request is answered exactly and says why, PML modules are refused, and preempted
// sequences resume exactly (from the snapshot stored where they stopped).
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "engine/cache_admin.h"
#include "engine/engine.h"
#include "kv/page_pool.h"
#include "model/model.h"
#include "model/recurrent_state.h"
#include "kv/kv_plan.h"
#include "engine_test_peer.h"
#include "test_util.h"
#include "probe/engine_logits.h"

namespace pc {
namespace {

struct Fixture {
  std::string name = "qwen35-tiny";
  std::unique_ptr<Model> model = Model::load(test::shared_dir() + "/models/arch2/" + name + ".gguf");
  nlohmann::json cases = [] {
    std::ifstream in(test::shared_dir() + "/models/arch2/expected_llamacpp.json");
    return nlohmann::json::parse(in).at("qwen35-tiny");
  }();
  KvType kv_type = KvType::kF16;  // the attention layers' KV
  std::unique_ptr<Engine> engine(int64_t kv_bytes = 16 << 20, bool prefix_cache = true) {
    EngineOptions o;
    o.kv_type = kv_type;
    o.threads = 2;
    o.kv_memory_bytes = kv_bytes;
    o.prefix_cache = prefix_cache;
    return std::make_unique<Engine>(*model, o);
  }
  GenerateRequest request(const nlohmann::json& c, int32_t max_tokens = 16) {
    GenerateRequest r;
    r.prompt = c.at("prompt_ids").get<std::vector<int32_t>>();
    r.max_tokens = max_tokens;
    r.stop_at_eog = false;
    return r;
  }
  // llama.cpp's greedy ids up to its first near-tie (top-2 gap <= 0.05), where
  // a free-running continuation may legitimately go another way.
  static std::vector<int32_t> reliable_prefix(const nlohmann::json& c) {
    std::vector<int32_t> ids;
    for (const nlohmann::json& s : c.at("steps")) {
      const nlohmann::json& top = s.at("top");
      if (top[0][1].get<double>() - top[1][1].get<double>() <= 0.05) break;
      ids.push_back(s.at("id").get<int32_t>());
    }
    return ids;
  }
};

TEST(HybridEngine, GreedyGenerationFollowsLlamaCpp) {
  Fixture f;
  auto e = f.engine();
  for (const nlohmann::json& c : f.cases) {
    const std::vector<int32_t> want = Fixture::reliable_prefix(c);
    const GenerateResult r = e->generate(f.request(c));
    ASSERT_GE(r.tokens.size(), want.size());
    EXPECT_EQ(std::vector<int32_t>(r.tokens.begin(), r.tokens.begin() + want.size()), want)
        << c.at("prompt").get<std::string>().substr(0, 30);
    // The same prompt again: resumed from the snapshot one token before its end (the
    // last token is computed for logits), the same tokens.
    const GenerateResult again = e->generate(f.request(c));
    EXPECT_EQ(again.n_cached, r.n_prompt - 1);
    EXPECT_EQ(again.tokens, r.tokens);
  }
}

TEST(HybridEngine, ApproximateRequestIsAnsweredExactly) {
  Fixture f;
  auto e = f.engine();
  GenerateRequest exact = f.request(f.cases[4]);
  GenerateRequest approx = exact;
  approx.reuse.mode = CacheReuse::kApproximate;
  const GenerateResult a = e->generate(exact), b = e->generate(approx);
  EXPECT_EQ(a.approximate_unavailable, "");
  EXPECT_EQ(b.approximate_unavailable, "recurrent layers");
  EXPECT_EQ(b.n_approximate, 0);
  EXPECT_EQ(a.tokens, b.tokens);
}

TEST(HybridEngine, ModulesAreRefused) {
  Fixture f;
  auto e = f.engine();
  auto modules = std::make_shared<ModuleSet>(1);
  (*modules)[0].tokens = {9707, 1879};
  (*modules)[0].positions = {0, 1};
  (*modules)[0].cuts = {0, 2};
  (*modules)[0].digest = 1;
  KvPlan plan;
  plan.modules = modules;
  KvSpan m;
  m.kind = KvSpan::Kind::kModule;
  m.module = 0;
  m.begin = 0;
  m.end = 2;
  plan.spans.push_back(m);
  KvSpan tail;
  tail.kind = KvSpan::Kind::kCompute;
  tail.tokens = {264};
  tail.positions = {2};
  plan.spans.push_back(tail);
  GenerateRequest req;
  req.max_tokens = 1;
  EXPECT_THROW(e->generate_plan(plan, req), Error);
}

TEST(HybridEngine, PreemptedSequencesResumeExactly) {
  Fixture f;
  std::vector<GenerateRequest> reqs;
  for (int i : {2, 3, 4}) reqs.push_back(f.request(f.cases[i], 40));
  std::vector<std::vector<int32_t>> want;
  {
    auto big = f.engine();
    for (const GenerateRequest& r : reqs) want.push_back(big->generate(r).tokens);
  }
  // Room for the longest request alone (160 + 40 tokens) and two state snapshots, not
  // for all three.
  const ModelConfig& mc = f.model->config();
  const int64_t page = int64_t(mc.n_layer) * mc.n_kv_head * mc.head_dim * 2 * 2 * 16;
  const int64_t snapshot_pages = (RecurrentState(mc).bytes() + page - 1) / page;
  auto e = f.engine(page * (14 + 2 * snapshot_pages));
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
  // The preempted sequences stored their state where they stopped and resumed from it
  // (a reassembly is a prefix hit; the first assembly of each distinct prompt misses).
  const PrefixCounters c = e->cache().stats().prefix;
  EXPECT_GT(c.snapshots, 0);
}

// A sequence preempted while its KV stays cached resumes from the state where it
// stopped (a prefix hit), mid-prompt and while decoding, with the tokens of a run that
// never stopped.
TEST(HybridEngine, PreemptedSequenceResumesFromItsStateExactly) {
  Fixture f;
  GenerateRequest q = f.request(f.cases[4], 12);
  const std::vector<int32_t> want = f.engine(16 << 20, false)->generate(q).tokens;
  EngineOptions o;
  o.threads = 2;
  o.kv_memory_bytes = 16 << 20;
  o.max_batch_tokens = 16;  // the prompt takes several steps
  Engine e(*f.model, o);
  const int64_t id = e.add(q);
  e.step();  // 16 prompt tokens
  EngineTestPeer::preempt(e, id);
  for (int i = 0; i < 12; ++i) e.step();  // the rest of the prompt, then decoding
  EngineTestPeer::preempt(e, id);
  GenerateResult got;
  for (int guard = 0; guard < 1000; ++guard) {
    e.step();
    auto done = e.take_finished();
    if (!done.empty()) {
      got = std::move(done.front().second);
      break;
    }
  }
  EXPECT_EQ(got.n_preempted, 2);
  EXPECT_EQ(got.tokens, want);
  const PrefixCounters c = e.cache().stats().prefix;
  EXPECT_EQ(c.misses, 1);  // the first assembly
  EXPECT_EQ(c.hits, 2);    // both resumptions
  EXPECT_GE(c.hit_tokens, 16 + int64_t(q.prompt.size()));
}

// Logits of the prompt's last token, with the result (n_cached).
std::vector<float> last_logits(Engine& e, const std::vector<int32_t>& prompt, std::vector<KvBlock> blocks,
                               GenerateResult* r) {
  GenerateRequest q;
  q.prompt = prompt;
  q.blocks = std::move(blocks);
  q.max_tokens = 0;
  return request_logits(e, q, r, false);
}

std::vector<int32_t> cat(std::vector<int32_t> a, std::span<const int32_t> b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

void check_snapshot_hits(KvType kv_type) {
  Fixture f;
  f.kv_type = kv_type;
  auto cold = f.engine(16 << 20, /*prefix_cache=*/false);
  auto e = f.engine();
  // A first turn: a prompt of two parts and a reply. Snapshots: the parts' bounds
  // (12, 30), the end of the prompt and the token before it, the end of the reply.
  const std::vector<int32_t> p1 = f.cases[4].at("prompt_ids").get<std::vector<int32_t>>();
  ASSERT_GT(p1.size(), 40u);
  const int32_t n = int32_t(p1.size());
  GenerateRequest first;
  first.prompt = p1;
  first.blocks = {{0, 12}, {12, 30}};
  first.max_tokens = 6;
  first.stop_at_eog = false;
  const GenerateResult r1 = e->generate(first);
  ASSERT_EQ(r1.tokens.size(), 6u);
  const PrefixCounters after_first = e->cache().stats().prefix;
  EXPECT_EQ(after_first.snapshots, 5);  // 12, 30, n - 1, n, n + 5 (the reply's last token is not computed)
  EXPECT_GT(after_first.snapshot_bytes, 0);
  const std::vector<int32_t> tail = {264, 1879, 9707, 13, 576};
  struct Case {
    const char* kind;
    std::vector<int32_t> prompt;
    int32_t resumed_at;
  };
  const std::vector<int32_t> reply(r1.tokens.begin(), r1.tokens.begin() + 5);
  const std::vector<Case> cases = {
      {"mid-part (falls back to the part's start)", cat(std::vector<int32_t>(p1.begin(), p1.begin() + 22), tail), 12},
      {"end of part", cat(std::vector<int32_t>(p1.begin(), p1.begin() + 30), tail), 30},
      {"end of prompt", cat(p1, tail), n},
      {"end of reply", cat(cat(p1, reply), tail), n + 5},
      {"inside the reply (falls back to the end of the prompt)", cat(cat(p1, std::span(reply).first(3)), tail), n},
  };
  for (const Case& c : cases) {
    GenerateResult got, want;
    const std::vector<float> resumed = last_logits(*e, c.prompt, {}, &got);
    const std::vector<float> computed = last_logits(*cold, c.prompt, {}, &want);
    EXPECT_EQ(got.n_cached, c.resumed_at) << c.kind;
    EXPECT_EQ(want.n_cached, 0) << c.kind;
    ASSERT_EQ(resumed.size(), computed.size()) << c.kind;
    EXPECT_EQ(0, std::memcmp(resumed.data(), computed.data(), resumed.size() * sizeof(float))) << c.kind;
  }
}

TEST(HybridEngine, SnapshotHitsAreBitExactAtEveryBoundary) { check_snapshot_hits(KvType::kF16); }

// Quantized KV in the attention layers (the recurrent state stays F32): snapshot
// hits are bitwise the cold run with the same KV type.
TEST(HybridEngine, SnapshotHitsAreBitExactWithQuantizedKv) {
  for (KvType t : {KvType::kQ8_0, KvType::kQ4_0}) {
    SCOPED_TRACE(kv_type_name(t));
    check_snapshot_hits(t);
  }
}

TEST(HybridEngine, SnapshotsAreBoundedAndEvictedWithTheirPrefix) {
  Fixture f;
  EngineOptions o;
  o.threads = 2;
  o.kv_memory_bytes = 16 << 20;
  o.snapshots_per_sequence = 3;
  Engine e(*f.model, o);
  const std::vector<int32_t> p = f.cases[4].at("prompt_ids").get<std::vector<int32_t>>();
  GenerateRequest q;
  q.prompt = p;
  for (int32_t b = 0; b + 4 <= 40; b += 4) q.blocks.push_back({b, b + 4});
  q.max_tokens = 2;
  q.stop_at_eog = false;
  e.generate(q);
  PrefixCounters c = e.cache().stats().prefix;
  EXPECT_EQ(c.snapshots, 3);  // the latest: n_prompt - 1, n_prompt, the end of the reply
  const int64_t per_snapshot = c.snapshot_bytes / 3;
  EXPECT_GT(per_snapshot, 0);
  EXPECT_EQ(per_snapshot % int64_t(e.cache().stats().pool.page_bytes), 0);  // whole pages of the KV memory
  // The latest snapshots are the ones kept: a prompt diverging after token 36 finds no
  // snapshot at or before it (the block bounds' were dropped) and is computed whole.
  GenerateResult r;
  last_logits(e, cat(std::vector<int32_t>(p.begin(), p.begin() + 36), std::vector<int32_t>{264, 13}), {}, &r);
  EXPECT_EQ(r.n_cached, 0);
  // Evicting the cache frees the snapshots' pages with their entries.
  e.cache().evict(SIZE_MAX);
  c = e.cache().stats().prefix;
  EXPECT_EQ(c.snapshots, 0);
  EXPECT_EQ(c.snapshot_bytes, 0);
}

// As Admission.PreemptionAfterPlanningUnderStaggeredLoad and
// Admission.PreemptionWithoutPrefixCacheLeavesTheIndexEmpty do for attention models:
// requests sharing prefixes arrive over time in a KV memory too small for all of them
// (with or without the prefix cache), so sequences are preempted mid-prompt and while
// decoding and resume from a stored snapshot, their own state or a recomputation; every
// output equals the request run alone. On the dense hybrid and the MoE hybrid.
TEST(HybridEngine, PreemptionUnderStaggeredLoadResumesExactly) {
  for (const char* name : {"qwen35-tiny", "qwen35moe-tiny"}) {
    SCOPED_TRACE(name);
    Fixture f;
    f.name = name;
    f.model = Model::load(test::shared_dir() + "/models/arch2/" + f.name + ".gguf");
    const std::vector<int32_t> shared = f.cases[4].at("prompt_ids").get<std::vector<int32_t>>();
    std::vector<GenerateRequest> reqs;
    for (int i = 0; i < 6; ++i) {
      GenerateRequest r = f.request(f.cases[i % 4], 20 + 7 * (i % 3));
      if (i % 3 != 2) r.prompt.insert(r.prompt.begin(), shared.begin(), shared.begin() + 40 + 8 * i);
      reqs.push_back(std::move(r));
    }
    std::vector<std::vector<int32_t>> want;
    {
      auto big = f.engine(64 << 20, /*prefix_cache=*/false);
      for (const GenerateRequest& r : reqs) want.push_back(big->generate(r).tokens);
    }
    const ModelConfig& mc = f.model->config();
    const int64_t page = int64_t(mc.n_layer) * mc.n_kv_head * mc.head_dim * 2 * 2 * 16;
    const int64_t snapshot_pages = (RecurrentState(mc).bytes() + page - 1) / page;
    for (bool cache : {true, false}) {
      for (const auto& [pages, batch] : {std::pair{10, 8}, std::pair{12, 16}}) {
        SCOPED_TRACE(std::string(cache ? "prefix cache" : "no prefix cache") + ", pages " +
                     std::to_string(pages) + ", batch " + std::to_string(batch));
        EngineOptions o;
        o.threads = 2;
        o.kv_memory_bytes = page * (pages + 2 * snapshot_pages);
        o.max_batch_tokens = batch;
        o.prefix_cache = cache;
        Engine e(*f.model, o);
        std::map<int64_t, size_t> ids;
        std::map<size_t, GenerateResult> got;
        size_t next = 0;
        for (int step = 0; got.size() < reqs.size() && step < 200000; ++step) {
          if (next < reqs.size() && step % 2 == 0) {
            ids[e.add(reqs[next])] = next;
            ++next;
          }
          e.step();
          for (auto& [id, r] : e.take_finished()) got[ids.at(id)] = std::move(r);
        }
        ASSERT_EQ(got.size(), reqs.size());
        int64_t preempted = 0;
        for (size_t i = 0; i < reqs.size(); ++i) {
          EXPECT_EQ(got[i].finish_reason, FinishReason::kLength) << i << ": " << got[i].error;
          EXPECT_EQ(got[i].tokens, want[i]) << "request " << i;
          if (!cache) {
            EXPECT_EQ(got[i].n_cached, 0) << "request " << i;
          }
          preempted += got[i].n_preempted;
        }
        EXPECT_GT(preempted, 0);
        EngineTestPeer::page_pool(e).check_invariants();
      }
    }
  }
}

}  // namespace
}  // namespace pc
