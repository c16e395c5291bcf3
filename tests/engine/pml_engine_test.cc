// PML prompts through the engine: the same logits whether the modules were
// already cached, encoded in this request, evicted and re-encoded, or cached
// by prompts importing other combinations; compact layout's relocated keys
// against keys computed directly at the new positions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>

#include "engine/engine.h"
#include "kv/module_store.h"
#include "kv/page_pool.h"
#include "kv/radix_index.h"
#include "gguf/quants.h"
#include "kernels/thread_pool.h"
#include "kv/kv_storage.h"
#include "model/forward.h"
#include "model/model.h"
#include "model/rope_shift.h"
#include "model_test_util.h"
#include "pml/compiled_plan.h"
#include "pml/pml.h"
#include "tokenizer/tokenizer.h"
#include "engine_test_peer.h"
#include "probe/engine_logits.h"

namespace pc {
namespace {

const char* kSchema = R"(<schema name="story">
  Once upon a time there was a
  <module name="dog">little dog named Max. He liked to run in the park with his ball.</module>
  <module name="cat">big cat named Tom. He liked to sleep in the sun all day long.</module>
  <module name="reply">The story is told in <parameter name="lang" length="10">English</parameter>, slowly.</module>
  <module name="fresh" cache="false">It was a new day.</module>
  <union>
    <module name="happy">Everyone was happy.</module>
    <module name="sad">Everyone was sad and cried.</module>
  </union>
</schema>)";

struct Fixture {
  explicit Fixture(const std::string& path = test::shared_model("stories260K.gguf"), KvType kv = KvType::kF16)
      : model(Model::load(path)), kv_type(kv) {}
  std::unique_ptr<Model> model;
  KvType kv_type;
  pml::Encoder enc = pml::Encoder::for_model(model->tokenizer(), model->file());
  pml::SchemaLayout schema = pml::compile_schema(kSchema, enc, "story.pml");
  pml::PromptPlan plan(const std::string& body, const std::string& attrs = "") {
    return pml::plan_prompt("<prompt schema=\"story\"" + attrs + ">" + body + "</prompt>", schema, enc,
                            "prompt.pml");
  }
  std::unique_ptr<Engine> engine(int64_t kv = 64 << 20) {
    EngineOptions o;
    o.kv_memory_bytes = kv;
    o.kv_type = kv_type;
    return std::make_unique<Engine>(*model, o);
  }
};

void expect_same(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size());
  ASSERT_FALSE(a.empty()) << what;
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << what;
}

void check_hit_or_miss(Fixture& f) {
  const auto p = f.plan("<dog/><happy/> One day Max saw a bird.");
  auto e = f.engine();
  const auto miss = plan_logits(*e, pml::kv_plan(p, f.schema));              // modules encoded in this request
  EXPECT_GT(EngineTestPeer::modules(*e).stats().entries, 0);
  const auto hit = plan_logits(*e, pml::kv_plan(p, f.schema));               // all modules cached
  expect_same(miss, hit, "cached vs encoded in the request");
  EXPECT_GT(EngineTestPeer::modules(*e).stats().hits, 0);
  EngineTestPeer::modules(*e).evict(size_t(1) << 40);                        // everything evicted
  EXPECT_EQ(EngineTestPeer::modules(*e).stats().entries, 0);
  const auto again = plan_logits(*e, pml::kv_plan(p, f.schema));
  expect_same(miss, again, "evicted and re-encoded");
  auto e2 = f.engine();                                       // other combinations first
  plan_logits(*e2, pml::kv_plan(f.plan("<cat/><sad/> The end."), f.schema));
  plan_logits(*e2, pml::kv_plan(f.plan("<happy/><dog/><cat/> Then"), f.schema));
  const auto other = plan_logits(*e2, pml::kv_plan(p, f.schema));
  expect_same(miss, other, "after other combinations");
}

TEST(PmlEngine, SameLogitsHitOrMiss) {
  Fixture f;
  check_hit_or_miss(f);
}

// Quantized KV: module hits are bitwise the misses' logits within the type, and
// compact layout's relocated keys (dequantized, rotated, requantized the same way
// on a hit and a miss) too.
TEST(PmlEngine, SameLogitsHitOrMissPerQuantizedKvType) {
  for (KvType t : {KvType::kQ8_0, KvType::kQ4_0}) {
    SCOPED_TRACE(kv_type_name(t));
    Fixture f(test::shared_model("stories260K.gguf"), t);
    check_hit_or_miss(f);
    const auto p = f.plan("<cat/><happy/> Then Tom", " layout=\"compact\"");
    auto e = f.engine();
    const auto a = plan_logits(*e, pml::kv_plan(p, f.schema));
    expect_same(a, plan_logits(*e, pml::kv_plan(p, f.schema)), "compact layout, relocated copies from the store");
    EngineTestPeer::modules(*e).evict(size_t(1) << 40);
    expect_same(a, plan_logits(*e, pml::kv_plan(p, f.schema)), "compact layout after eviction");
    Fixture g(test::shared_model("arch/gemma3-tiny.gguf"), t);
    check_hit_or_miss(g);
  }
}

// Sliding-window models (window 32 positions): the schema spans ~90 positions
// with gaps (the union, the parameter slot, the skipped modules), so the
// window is measured over position ids that are not slot indices; module hits
// are exactly the misses' logits, and compact layout relocates K with each
// layer's own RoPE (gemma3: local and global bases; phi3: LongRoPE factors,
// attention factor not applied twice).
class PmlEngineArch : public ::testing::TestWithParam<const char*> {};

TEST_P(PmlEngineArch, SameLogitsHitOrMiss) {
  Fixture f(test::shared_model(std::string("arch/") + GetParam()));
  check_hit_or_miss(f);
}

TEST_P(PmlEngineArch, CompactLayoutHitsAreExact) {
  Fixture f(test::shared_model(std::string("arch/") + GetParam()));
  const auto p = f.plan("<cat/><happy/> Then Tom", " layout=\"compact\"");
  auto e = f.engine();
  const auto a = plan_logits(*e, pml::kv_plan(p, f.schema));
  expect_same(a, plan_logits(*e, pml::kv_plan(p, f.schema)), "compact layout, relocated copies from the store");
  EngineTestPeer::modules(*e).evict(size_t(1) << 40);
  expect_same(a, plan_logits(*e, pml::kv_plan(p, f.schema)), "compact layout after eviction");
}

INSTANTIATE_TEST_SUITE_P(Models, PmlEngineArch,
                         ::testing::Values("gemma2-tiny.gguf", "gemma3-tiny.gguf", "phi3-longrope-tiny.gguf"),
                         [](const auto& info) {
                           std::string s = info.param;
                           s = s.substr(0, s.find('.'));
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

TEST(PmlEngine, PinnedModulesAreNotEvicted) {
  Fixture f;
  const char* schema = R"(<schema name="p"><module name="kept" pin="true">little dog named Max.</module>
    <module name="loose">big cat named Tom.</module></schema>)";
  const pml::SchemaLayout layout = pml::compile_schema(schema, f.enc, "p.pml");
  const auto p = pml::plan_prompt("<prompt schema=\"p\"><kept/><loose/> The end.</prompt>", layout, f.enc);
  auto e = f.engine();
  const auto want = plan_logits(*e, pml::kv_plan(p, layout));
  EngineTestPeer::modules(*e).evict(size_t(1) << 40);
  int pinned = 0;
  for (const auto& [key, entry] : EngineTestPeer::modules(*e).entries()) pinned += entry.pins > 0 && entry.path == "kept";
  EXPECT_EQ(pinned, 1);
  EXPECT_EQ(EngineTestPeer::modules(*e).entries().size(), 1u);  // only the pinned one stayed
  expect_same(want, plan_logits(*e, pml::kv_plan(p, layout)), "pinned module kept, the other re-encoded");
}

TEST(PmlEngine, ModuleTtlExpires) {
  Fixture f;
  const char* schema = R"(<schema name="t"><module name="brief" ttl="0.2">little dog named Max.</module>
    <module name="lasting">big cat named Tom.</module></schema>)";
  const pml::SchemaLayout layout = pml::compile_schema(schema, f.enc, "t.pml");
  const auto p = pml::plan_prompt("<prompt schema=\"t\"><brief/><lasting/> The end.</prompt>", layout, f.enc);
  auto e = f.engine();
  GenerateRequest req;
  req.max_tokens = 1;
  const GenerateResult first = e->generate_plan(pml::kv_plan(p, layout), req);
  EXPECT_EQ(e->generate_plan(pml::kv_plan(p, layout), req).n_module_misses, 0);  // both cached
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  const GenerateResult late = e->generate_plan(pml::kv_plan(p, layout), req);
  EXPECT_EQ(late.n_module_misses, 1);  // "brief" expired and was encoded again
  EXPECT_EQ(late.tokens, first.tokens);
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  EXPECT_GT(EngineTestPeer::modules(*e).evict_expired(ModuleEntry::Clock::now()), 0u);  // the sweep drops it too
}

TEST(PmlEngine, ArgumentsAndUncachedModules) {
  Fixture f;
  const auto p = f.plan("<reply lang=\"French\"/><fresh/><dog/> The end.");
  auto e = f.engine();
  const auto a = plan_logits(*e, pml::kv_plan(p, f.schema));
  const auto b = plan_logits(*e, pml::kv_plan(p, f.schema));
  expect_same(a, b, "argument and cache=false module, second run");
  auto e2 = f.engine();
  plan_logits(*e2, pml::kv_plan(f.plan("<reply/> x"), f.schema));  // placeholder version cached first
  expect_same(a, plan_logits(*e2, pml::kv_plan(p, f.schema)), "after the placeholder version was cached");
  // The uncached module is never stored.
  for (const auto& [key, entry] : EngineTestPeer::modules(*e).entries()) EXPECT_NE(entry.path, "fresh");
}

TEST(PmlEngine, GenerateReportsCachedModules) {
  Fixture f;
  const auto p = f.plan("<dog/><sad/> Then Max");
  auto e = f.engine();
  GenerateRequest req;
  req.max_tokens = 8;
  req.stop_at_eog = false;
  const GenerateResult first = e->generate_plan(pml::kv_plan(p, f.schema), req);
  EXPECT_EQ(first.n_cached, 0);
  EXPECT_GT(first.n_module_misses, 0);
  const GenerateResult second = e->generate_plan(pml::kv_plan(p, f.schema), req);
  EXPECT_EQ(second.tokens, first.tokens);
  EXPECT_EQ(second.n_module_misses, 0);
  EXPECT_GT(second.n_cached, 20);
  EXPECT_EQ(second.n_computed, p.n_computed_tokens);  // only the text after the imports
  EXPECT_EQ(second.n_cached + second.n_computed, second.n_prompt);
  EngineTestPeer::page_pool(*e).check_invariants();
}

TEST(PmlEngine, CompactLayoutRuns) {
  Fixture f;
  const auto p = f.plan("<cat/><happy/> Then Tom", " layout=\"compact\"");
  auto e = f.engine();
  const auto a = plan_logits(*e, pml::kv_plan(p, f.schema));
  int shifted = 0;
  for (const auto& [key, entry] : EngineTestPeer::modules(*e).entries()) shifted += key.shift != 0;
  EXPECT_GE(shifted, 1);  // the relocated copies are cached
  const int32_t pages = EngineTestPeer::page_pool(*e).n_in_use() + EngineTestPeer::page_pool(*e).n_cached();
  const auto b = plan_logits(*e, pml::kv_plan(p, f.schema));
  expect_same(a, b, "compact layout, second run (relocated copies from the store)");
  EXPECT_EQ(EngineTestPeer::page_pool(*e).n_in_use() + EngineTestPeer::page_pool(*e).n_cached(), pages);  // nothing relocated again
  for (float v : a) ASSERT_TRUE(std::isfinite(v));
  EngineTestPeer::modules(*e).evict(size_t(1) << 40);  // relocated again from re-encoded modules: same logits
  expect_same(a, plan_logits(*e, pml::kv_plan(p, f.schema)), "compact layout after eviction");
}

// Keys relocated by RoPE rotation vs keys computed directly at the new
// positions: the whole sequence shifted by the same amount, so every layer's
// K differs only by the rotation. Tolerance: F16 storage (2^-11 relative)
// through two roundings, plus float rotation error: 4e-3 of the row's scale.
void check_relocated_keys(Fixture& f) {
  const Model& m = *f.model;
  const ModelConfig& c = m.config();
  KvStorage kv(KvShape{int(c.n_layer), int(c.n_kv_head), int(c.head_dim), 16}, 8);
  ThreadPool pool(1);
  Forward fwd(m, kv, pool);
  const std::vector<int32_t> toks = m.tokenizer().encode("Once upon a time there was a dog", true, false);
  ASSERT_LE(toks.size(), 16u);
  const int32_t shift = 37;
  auto run_at = [&](int32_t page, int32_t pos0) {
    std::vector<BatchEntry> batch;
    for (size_t i = 0; i < toks.size(); ++i)
      batch.push_back(BatchEntry{toks[i], pos0 + int32_t(i), 0, int32_t(i), i + 1 == toks.size()});
    SeqKv s{&page, 1};
    fwd.run(batch, std::span<const SeqKv>(&s, 1));
  };
  run_at(0, 0);
  run_at(1, shift);
  shift_positions(m, kv, 0, int32_t(toks.size()), shift);
  double worst = 0;
  for (int l = 0; l < c.n_layer; ++l)
    for (int h = 0; h < c.n_kv_head; ++h)
      for (size_t s = 0; s < toks.size(); ++s) {
        const int P = kv.shape().page_size, hd = int(c.head_dim);
        auto key = [&](int32_t page, int d) {  // (kernels/k_layout.h)
          return double(fp16_to_fp32(kv.k(page, l)[size_t(h) * P * hd + k_index(P, hd, int(s), d)]));
        };
        double scale = 1e-6;
        for (int d = 0; d < hd; ++d) scale = std::max(scale, std::fabs(key(1, d)));
        for (int d = 0; d < hd; ++d) worst = std::max(worst, std::fabs(key(0, d) - key(1, d)) / scale);
      }
  EXPECT_LT(worst, 4e-3);
  for (size_t s = 0; s < toks.size(); ++s) EXPECT_EQ(kv.pos(0)[s], shift + int32_t(s));
}

TEST(PmlEngine, RelocatedKeysMatchDirectComputation) {
  Fixture f;
  check_relocated_keys(f);
}

// Per-layer RoPE: gemma3's local layers (base 1e4) and global ones (base 1e6,
// linear scaling 8), and phi3's LongRoPE factors with the attention factor the
// stored keys already carry (applying it again would be off by 31%).
TEST(PmlEngine, RelocatedKeysMatchDirectComputationPerLayerRope) {
  for (const char* name : {"arch/gemma3-tiny.gguf", "arch/phi3-longrope-tiny.gguf"}) {
    SCOPED_TRACE(name);
    Fixture f(test::shared_model(name));
    check_relocated_keys(f);
  }
}

TEST(PmlEngine, PromptMustEndWithText) {
  Fixture f;
  auto e = f.engine();
  EXPECT_THROW(plan_logits(*e, pml::kv_plan(f.plan("<dog/>"), f.schema)), Error);
}

}  // namespace
}  // namespace pc
