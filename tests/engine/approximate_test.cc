// Approximate reuse of moved blocks, for each recompute policy (engine/approximate/recompute_policy.h):
// only when asked; budget 1 is bitwise the full recomputation; the policy's recompute
// brings the next-token distribution closer to full recomputation than reusing
// everything (stories260K, a trained 5-layer model); approximately built KV is never
// published, so a later exact request is bitwise cold; relocated block KV matches KV
// computed at the new position. PML prompts asking for a policy let later modules
// attend to earlier ones, and their recomputed KV never enters the module store.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "engine/engine.h"
#include "engine/approximate/recompute_policy.h"
#include "engine/relocation.h"
#include "gguf/quants.h"
#include "kernels/k_layout.h"
#include "kernels/thread_pool.h"
#include "kv/kv_storage.h"
#include "kv/module_store.h"
#include "kv/page_pool.h"
#include "model/forward.h"
#include "model/model.h"
#include "model_test_util.h"
#include "pml/compiled_plan.h"
#include "pml/pml.h"
#include "tokenizer/tokenizer.h"
#include "engine_test_peer.h"
#include "probe/engine_logits.h"

namespace pc {
namespace {

const RecomputePolicy kPolicies[] = {RecomputePolicy::kPrefix, RecomputePolicy::kDeviation, RecomputePolicy::kImpact};

struct Fixture {
  std::unique_ptr<Model> model = Model::load(test::shared_model("stories260K.gguf"));
  std::vector<int32_t> sys = text(test::Story::kSys), a = text(test::Story::kA), b = text(test::Story::kB),
                       user = text(test::Story::kC);
  std::vector<int32_t> text(const std::string& s) { return model->tokenizer().encode(s, false, false); }
  KvType kv_type = KvType::kF16;
  std::unique_ptr<Engine> engine() {
    if (kv_type == KvType::kF16) return test::block_engine(*model);
    EngineOptions o;  // block_engine()'s, in another KV type
    o.kv_memory_bytes = 32 << 20;
    o.threads = 1;
    o.kv_type = kv_type;
    return std::make_unique<Engine>(*model, o);
  }
  GenerateRequest request(const std::vector<std::vector<int32_t>>& parts, CacheReuse mode = CacheReuse::kExact,
                          double budget = 0, RecomputePolicy policy = RecomputePolicy::kPrefix) {
    GenerateRequest r = test::block_request(model->tokenizer().bos(), parts, mode, budget);
    r.reuse.policy = policy;
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

void check_policies(KvType kv_type) {
  Fixture f;
  f.kv_type = kv_type;
  const auto first = f.request({f.sys, f.a, f.b, f.user});
  const std::vector<std::vector<int32_t>> moved = {f.sys, f.b, f.a, f.user};
  const std::vector<float> full = request_logits(*f.engine(), f.request(moved));

  auto warm = [&](CacheReuse mode, double budget, RecomputePolicy policy, GenerateResult* r) {
    auto e = f.engine();
    e->generate(first);
    return request_logits(*e, f.request(moved, mode, budget, policy), r);
  };
  // Exact (the default): nothing approximate, bitwise the full recomputation.
  GenerateResult exact;
  EXPECT_TRUE(bitwise(warm(CacheReuse::kExact, 0.5, RecomputePolicy::kDeviation, &exact), full));
  EXPECT_EQ(exact.n_approximate, 0);
  EXPECT_EQ(exact.n_checked, 0);
  EXPECT_GE(exact.n_cached, int64_t(1 + f.sys.size()));  // the prefix (and any token it shares with the next part)
  // Tokens of parts after the exact prefix whose KV the first request cached elsewhere;
  // the prompt's last token is always computed, so one fewer can be reused.
  const int64_t n_moved = exact.n_reusable - 1;
  EXPECT_GE(n_moved, int64_t(f.a.size() + f.user.size()) - 1);
  // Budget 0: every moved block reused, nothing checked; the counts add up.
  GenerateResult none;
  const std::vector<float> l0 = warm(CacheReuse::kApproximate, 0.0, RecomputePolicy::kDeviation, &none);
  EXPECT_EQ(none.n_approximate, n_moved);
  EXPECT_EQ(none.n_recomputed, 0);
  EXPECT_EQ(none.n_checked, 0);
  EXPECT_EQ(none.n_cached, exact.n_cached);
  EXPECT_EQ(none.n_computed, none.n_prompt - none.n_cached - none.n_approximate);
  const double kl0 = kl(full, l0);
  EXPECT_GT(kl0, 0);
  for (RecomputePolicy policy : kPolicies) {
    SCOPED_TRACE(recompute_policy_name(policy));
    // Budget 1: every found token recomputed, bitwise the full recomputation.
    GenerateResult all;
    EXPECT_TRUE(bitwise(warm(CacheReuse::kApproximate, 1.0, policy, &all), full));
    EXPECT_EQ(all.n_approximate, 0);
    EXPECT_EQ(all.n_recomputed, n_moved);
    EXPECT_EQ(all.n_checked, 0);  // nothing left to choose: no check pass
    // Budget 0.25: a quarter recomputed, closer to the full recomputation.
    GenerateResult some;
    const std::vector<float> l25 = warm(CacheReuse::kApproximate, 0.25, policy, &some);
    EXPECT_GT(some.n_recomputed, 0);
    EXPECT_LE(some.n_recomputed, int64_t(std::ceil(0.25 * double(n_moved))) + 4);  // per block: ceil of each
    EXPECT_EQ(some.n_approximate + some.n_recomputed, n_moved);
    EXPECT_EQ(some.n_computed, some.n_prompt - some.n_cached - some.n_approximate);
    if (policy != RecomputePolicy::kPrefix) {
      EXPECT_EQ(some.n_recomputed, int64_t(std::ceil(0.25 * double(n_moved))));
      EXPECT_GE(some.n_checked, n_moved);  // every candidate went through the check layer
      // kImpact also checks up to the prompt's end (its last token's query).
      if (policy == RecomputePolicy::kImpact) { EXPECT_EQ(some.n_checked, some.n_prompt - some.n_cached); }
    } else {
      EXPECT_EQ(some.n_checked, 0);
    }
    const double kl25 = kl(full, l25);
    std::printf("%s: KL(full || approximate): budget 0: %.6f, budget 0.25: %.6f\n", recompute_policy_name(policy),
                kl0, kl25);
    // q4_0 on this model's heads of 8 (16 levels a row; 63 % top-1 against F16 in
    // docs/benchmarks.md) leaves noise as large as what recomputing the first quarter
    // of the moved tokens blindly removes (KL 0.18-0.20 either way): the prefix policy
    // is held to budget 1's exactness above, the check-pass policies to getting closer.
    if (kv_type == KvType::kQ4_0 && policy == RecomputePolicy::kPrefix) continue;
    EXPECT_LT(kl25, kl0);
  }
}

TEST(Approximate, EachPolicyRecomputesTowardsFull) { check_policies(KvType::kF16); }

// With quantized KV: moved blocks' K rotated (dequantized, rotated, requantized), the
// check pass on the stored (dequantized) K/V, budget 1 bitwise the full recomputation
// in that type, and recomputing brings the logits closer to it.
TEST(Approximate, EachPolicyRecomputesTowardsFullWithQuantizedKv) {
  for (KvType t : {KvType::kQ8_0, KvType::kQ4_0}) {
    SCOPED_TRACE(kv_type_name(t));
    check_policies(t);
  }
}

// The check pass runs every token it checks through layer 0 in steps of up to
// max_batch_tokens, whatever the candidate boundaries: a token's scores do not depend on
// the tokens beside it in a step, so steps of 3 tokens choose the same tokens to recompute
// as steps of 512 (one step), and the answer is bitwise the same.
TEST(Approximate, CheckPassScoresDoNotDependOnItsSteps) {
  Fixture f;
  const auto first = f.request({f.sys, f.a, f.b, f.user});
  const std::vector<std::vector<int32_t>> moved = {f.sys, f.b, f.a, f.user};
  for (RecomputePolicy policy : {RecomputePolicy::kDeviation, RecomputePolicy::kImpact}) {
    SCOPED_TRACE(recompute_policy_name(policy));
    std::vector<float> logits[2];
    GenerateResult r[2];
    for (int i = 0; i < 2; ++i) {
      EngineOptions o;  // block_engine()'s, with steps of 512 or 3 tokens
      o.kv_memory_bytes = 32 << 20;
      o.threads = 1;
      o.max_batch_tokens = i == 0 ? 512 : 3;
      Engine e(*f.model, o);
      e.generate(first);
      logits[i] = request_logits(e, f.request(moved, CacheReuse::kApproximate, 0.25, policy), &r[i]);
    }
    EXPECT_GT(r[0].n_checked, 3);
    EXPECT_EQ(r[0].n_checked, r[1].n_checked);
    EXPECT_EQ(r[0].n_recomputed, r[1].n_recomputed);
    EXPECT_GT(r[0].n_recomputed, 0);
    EXPECT_TRUE(bitwise(logits[0], logits[1]));
  }
}

TEST(Approximate, ExactUnlessAsked) {
  Fixture f;
  const std::vector<std::vector<int32_t>> moved = {f.sys, f.b, f.a, f.user};
  const std::vector<float> cold = request_logits(*f.engine(), f.request(moved));
  auto e = f.engine();
  e->generate(f.request({f.sys, f.a, f.b, f.user}));
  GenerateRequest plain;  // the defaults, with blocks to find
  plain.prompt = f.request(moved).prompt;
  plain.blocks = f.request(moved).blocks;
  GenerateResult r;
  EXPECT_TRUE(bitwise(request_logits(*e, plain, &r), cold));
  EXPECT_EQ(r.n_approximate, 0);
  EXPECT_EQ(r.n_recomputed, 0);
  EXPECT_GT(r.n_reusable, 0);  // there was something approximate reuse could have taken
  // A policy and budget alone do not ask for approximate reuse.
  GenerateRequest policy_only = plain;
  policy_only.reuse.policy = RecomputePolicy::kDeviation;
  policy_only.reuse.budget = 0;
  EXPECT_TRUE(bitwise(request_logits(*e, policy_only, &r), cold));
  EXPECT_EQ(r.n_approximate, 0);
}

TEST(Approximate, NeverPublished) {
  Fixture f;
  const std::vector<std::vector<int32_t>> moved = {f.sys, f.b, f.a, f.user};
  const std::vector<float> cold = request_logits(*f.engine(), f.request(moved));
  GenerateResult reference;  // an exact request after the first one: its exact prefix
  {
    auto e = f.engine();
    e->generate(f.request({f.sys, f.a, f.b, f.user}));
    request_logits(*e, f.request(moved), &reference);
  }
  for (RecomputePolicy policy : kPolicies) {
    SCOPED_TRACE(recompute_policy_name(policy));
    auto e = f.engine();
    e->generate(f.request({f.sys, f.a, f.b, f.user}));
    GenerateRequest approx = f.request(moved, CacheReuse::kApproximate, 0.15, policy);
    approx.max_tokens = 4;
    const GenerateResult r = e->generate(approx);
    ASSERT_GT(r.n_approximate, 0);
    // The same prompt, exact: its KV must come only from exactly computed sequences.
    GenerateResult exact;
    EXPECT_TRUE(bitwise(request_logits(*e, f.request(moved), &exact), cold));
    EXPECT_EQ(exact.n_cached, reference.n_cached);
    EngineTestPeer::page_pool(*e).check_invariants();
  }
}

// A block's KV relocated by relocated_copy (slices starting mid-page, spanning pages, as
// the block index returns them) vs the same tokens computed directly at the new
// positions after the same context: every layer within the tolerance of
// PmlEngine.RelocatedKeysMatchDirectComputation (F16 twice plus float rotation: 4e-3 of
// the row's scale); V within the same, and bitwise at layer 0, which sees no context.
TEST(Approximate, RelocatedBlockMatchesDirectComputation) {
  Fixture f;
  const Model& m = *f.model;
  const ModelConfig& c = m.config();
  const int P = 16;
  KvStorage kv(KvShape{int(c.n_layer), int(c.n_kv_head), int(c.head_dim), P}, 32);
  PagePool pool(kv);
  ThreadPool threads(1);
  Forward fwd(m, kv, threads);
  std::vector<int32_t> toks = {m.tokenizer().bos()};
  toks.insert(toks.end(), f.sys.begin(), f.sys.end());
  const int32_t shift = 23;
  // The whole sequence at positions 0.. and at shift.., so the context is the same.
  auto run_at = [&](int32_t pos0) {
    PageTable t(pool);
    EXPECT_TRUE(t.prepare_append(int32_t(toks.size())));
    std::vector<int32_t> pages;
    for (const PageEntry& e : t.entries()) pages.push_back(e.page);
    std::vector<BatchEntry> batch;
    for (size_t i = 0; i < toks.size(); ++i) batch.push_back(BatchEntry{toks[i], pos0 + int32_t(i), 0, int32_t(i), false});
    SeqKv s{pages.data(), int32_t(pages.size())};
    fwd.run(batch, std::span<const SeqKv>(&s, 1));
    return t;
  };
  PageTable at0 = run_at(0), direct = run_at(shift);
  ASSERT_GT(toks.size(), size_t(P + 8));
  // The "block": tokens [5, n) — it starts mid-page and spans pages.
  const int32_t b0 = 5, n = int32_t(toks.size()) - b0;
  std::vector<PageSlice> all;
  for (const PageEntry& e : at0.entries()) all.push_back({e.page, 0, e.filled});
  PageTable moved(pool);
  ASSERT_TRUE(relocated_copy(pool, m, sub_slices(all, b0, n), shift, moved));
  ASSERT_EQ(moved.n_tokens(), n);
  const int hd = int(c.head_dim);
  auto at = [&](const PageTable& t, int32_t i) {  // (page, slot) of token i of a packed table
    return std::pair<int32_t, int>{t.entries()[size_t(i / P)].page, i % P};
  };
  double worst = 0, worst_v = 0;
  for (int l = 0; l < c.n_layer; ++l)
    for (int h = 0; h < c.n_kv_head; ++h)
      for (int32_t i = 0; i < n; ++i) {
        const auto [pm, sm] = at(moved, i);
        const auto [pd, sd] = at(direct, b0 + i);
        auto key = [&](int32_t page, int slot, int d) {
          return double(fp16_to_fp32(kv.k(page, l)[size_t(h) * P * hd + k_index(P, hd, slot, d)]));
        };
        double scale = 1e-6;
        for (int d = 0; d < hd; ++d) scale = std::max(scale, std::fabs(key(pd, sd, d)));
        for (int d = 0; d < hd; ++d) worst = std::max(worst, std::fabs(key(pm, sm, d) - key(pd, sd, d)) / scale);
        const uint16_t* vm = kv.v(pm, l) + (size_t(h) * P + sm) * hd;
        const uint16_t* vd = kv.v(pd, l) + (size_t(h) * P + sd) * hd;
        if (l == 0) {  // context-free and not rotated: the same bits
          EXPECT_EQ(0, std::memcmp(vm, vd, size_t(hd) * 2));
        } else {  // attention at other absolute positions: the same up to rounding
          double vscale = 1e-6;
          for (int d = 0; d < hd; ++d) vscale = std::max(vscale, std::fabs(double(fp16_to_fp32(vd[d]))));
          for (int d = 0; d < hd; ++d)
            worst_v = std::max(worst_v, std::fabs(double(fp16_to_fp32(vm[d])) - fp16_to_fp32(vd[d])) / vscale);
        }
        EXPECT_EQ(kv.pos(pm)[sm], shift + b0 + i);
      }
  EXPECT_GT(worst, 0);  // rotated, not recomputed: rounding differs somewhere
  EXPECT_LT(worst, 4e-3);
  EXPECT_LT(worst_v, 4e-3);
}

// Reused KV is copied into a sequence's own table after the tokens before it
// (Run::copied): relocated_copy appending to a table whose last page is partly filled
// rotates only the slots it writes. The earlier slots keep their bits, and the appended
// ones are bitwise what a copy into an empty table gives, wherever they land in a page.
TEST(Approximate, RelocatedAppendRotatesOnlyItsOwnSlots) {
  Fixture f;
  const Model& m = *f.model;
  const ModelConfig& c = m.config();
  const int P = 16;
  KvStorage kv(KvShape{int(c.n_layer), int(c.n_kv_head), int(c.head_dim), P}, 32);
  PagePool pool(kv);
  ThreadPool threads(1);
  Forward fwd(m, kv, threads);
  std::vector<int32_t> toks = {m.tokenizer().bos()};
  toks.insert(toks.end(), f.sys.begin(), f.sys.end());
  ASSERT_GT(toks.size(), size_t(P + 8));
  PageTable at0(pool);
  ASSERT_TRUE(at0.prepare_append(int32_t(toks.size())));
  std::vector<int32_t> pages;
  for (const PageEntry& e : at0.entries()) pages.push_back(e.page);
  std::vector<BatchEntry> batch;
  for (size_t i = 0; i < toks.size(); ++i) batch.push_back(BatchEntry{toks[i], int32_t(i), 0, int32_t(i), false});
  SeqKv sk{pages.data(), int32_t(pages.size())};
  fwd.run(batch, std::span<const SeqKv>(&sk, 1));
  std::vector<PageSlice> all;
  for (const PageEntry& e : at0.entries()) all.push_back({e.page, 0, e.filled});
  const int32_t head = 5, n = int32_t(toks.size()) - head, shift = 37;
  PageTable packed(pool), alone(pool);
  ASSERT_TRUE(relocated_copy(pool, m, sub_slices(all, 0, head), 0, packed));
  ASSERT_TRUE(relocated_copy(pool, m, sub_slices(all, head, n), shift, packed));
  ASSERT_TRUE(relocated_copy(pool, m, sub_slices(all, head, n), shift, alone));
  ASSERT_EQ(packed.n_tokens(), head + n);
  ASSERT_EQ(packed.entries()[0].filled, P);  // packed after the 5 tokens, not on a fresh page
  const int hd = int(c.head_dim);
  auto slot = [&](const PageTable& t, int32_t i) { return std::pair<int32_t, int>{t.entries()[size_t(i / P)].page, i % P}; };
  auto key = [&](std::pair<int32_t, int> at, int l, int h, int d) {
    return kv.k(at.first, l)[size_t(h) * P * hd + k_index(P, hd, at.second, d)];
  };
  for (int l = 0; l < c.n_layer; ++l)
    for (int h = 0; h < c.n_kv_head; ++h)
      for (int d = 0; d < hd; ++d) {
        for (int32_t i = 0; i < head; ++i) EXPECT_EQ(key(slot(packed, i), l, h, d), key(slot(at0, i), l, h, d));
        for (int32_t i = 0; i < n; ++i) EXPECT_EQ(key(slot(packed, head + i), l, h, d), key(slot(alone, i), l, h, d));
      }
  for (int32_t i = 0; i < head; ++i) EXPECT_EQ(kv.pos(slot(packed, i).first)[slot(packed, i).second], i);
  for (int32_t i = 0; i < n; ++i)
    EXPECT_EQ(kv.pos(slot(packed, head + i).first)[slot(packed, head + i).second], head + i + shift);
}

TEST(Approximate, SelectionRules) {
  std::vector<ReuseCandidate> cands = {{10, 20, {}, 0}, {30, 34, {}, 0}};
  // prefix: ceil(budget × size) of each, from its start.
  RecomputeMasks p = select_prefix(cands, 0.25);
  EXPECT_EQ(p[0], (std::vector<uint8_t>{1, 1, 1, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(p[1], (std::vector<uint8_t>{1, 0, 0, 0}));
  EXPECT_EQ(budget_tokens(cands, 0.25), 4);  // ceil(0.25 × 14)
  EXPECT_EQ(budget_tokens(cands, 0.0), 0);
  // deviation: the highest scores, exactly the budget in all.
  std::vector<std::vector<float>> scores = {{0, 9, 0, 0, 5, 0, 0, 0, 0, 7}, {0, 0, 8, 0}};
  RecomputeMasks d = select_by_score(cands, scores, 0.2, 1);  // ceil(2.8) = 3 tokens
  EXPECT_EQ(d[0], (std::vector<uint8_t>{0, 1, 0, 0, 0, 0, 0, 0, 0, 1}));
  EXPECT_EQ(d[1], (std::vector<uint8_t>{0, 0, 1, 0}));
  d = select_by_score(cands, scores, 0.3, 1);  // 5 tokens: then 5, then the first of the zeros
  EXPECT_EQ(d[0], (std::vector<uint8_t>{1, 1, 0, 0, 1, 0, 0, 0, 0, 1}));
  EXPECT_EQ(d[1], (std::vector<uint8_t>{0, 0, 1, 0}));
  // Windows of 4: means 2.25, 1.25, 3.5 (the last window of 2 tokens), then 2 — the
  // best window first, the budget cutting the last one taken.
  d = select_by_score(cands, scores, 0.25, 4);
  EXPECT_EQ(d[0], (std::vector<uint8_t>{1, 1, 0, 0, 0, 0, 0, 0, 1, 1}));
  EXPECT_EQ(d[1], (std::vector<uint8_t>{0, 0, 0, 0}));
  // Budget 1: everything.
  d = select_by_score(cands, scores, 1.0, 1);
  for (const auto& m : d)
    for (uint8_t x : m) EXPECT_EQ(x, 1);
  EXPECT_EQ(parse_recompute_policy("deviation"), RecomputePolicy::kDeviation);
  EXPECT_EQ(parse_recompute_policy("prefix"), RecomputePolicy::kPrefix);
  EXPECT_EQ(parse_recompute_policy("impact"), RecomputePolicy::kImpact);
  EXPECT_FALSE(parse_recompute_policy("block_prefix"));
}

// PML: modules never attend to each other; a prompt asking for approximate reuse has
// each module that did not see everything before it recomputed by the policy.
const char* kSchema = R"(<schema name="story">
  Once upon a time there was a
  <module name="dog">little dog named Max. He liked to run in the park with his ball and jump over the logs.</module>
  <module name="cat">big cat named Tom. He liked to sleep in the sun all day long and eat fish at night.</module>
</schema>)";

struct PmlFixture : Fixture {
  pml::Encoder enc = pml::Encoder::for_model(model->tokenizer(), model->file());
  pml::SchemaLayout schema = pml::compile_schema(kSchema, enc, "story.pml");
  KvPlan plan(const std::string& body) {
    return pml::kv_plan(pml::plan_prompt("<prompt schema=\"story\">" + body + "</prompt>", schema, enc, "p.pml"),
                        schema);
  }
  // The plan with module `name`'s spans computed instead (same tokens, same positions):
  // the full recomputation of a prompt whose other modules saw everything before them.
  static KvPlan computed(const KvPlan& p, const std::string& name) {
    KvPlan out;
    out.modules = p.modules;
    for (const KvSpan& s : p.spans) {
      if (s.kind != KvSpan::Kind::kModule || (*p.modules)[s.module].path != name) {
        out.spans.push_back(s);
        continue;
      }
      const ModuleSpec& m = (*p.modules)[s.module];
      KvSpan c;
      c.kind = KvSpan::Kind::kCompute;
      for (int32_t k = s.begin; k < s.end; ++k) {
        c.tokens.push_back(m.tokens[k]);
        c.positions.push_back(m.positions[k] + s.shift);
      }
      out.spans.push_back(std::move(c));
    }
    return out;
  }
};

TEST(ApproximatePml, LaterModulesAttendToEarlierOnes) {
  PmlFixture f;
  const std::string body = "<dog/><cat/> One day Max and Tom";
  const std::vector<float> full = plan_logits(*f.engine(), PmlFixture::computed(f.plan(body), "cat"));
  auto e = f.engine();
  const std::vector<float> exact = plan_logits(*e, f.plan(body));  // encodes the modules
  const size_t entries = EngineTestPeer::modules(*e).stats().entries;
  const double kl_exact = kl(full, exact);
  EXPECT_GT(kl_exact, 0);  // the cat never saw the dog
  for (RecomputePolicy policy : kPolicies) {
    SCOPED_TRACE(recompute_policy_name(policy));
    GenerateRequest req;
    req.reuse = {CacheReuse::kApproximate, policy, 0.25, 1};
    GenerateResult r;
    const std::vector<float> l25 = plan_logits(*e, f.plan(body), req, &r);
    EXPECT_GT(r.n_recomputed, 0);
    EXPECT_GT(r.n_approximate, 0);
    // The root text and the dog saw everything before them: exact, cached.
    EXPECT_GT(r.n_cached, 0);
    // The text after the imports is computed fresh: the usage identity leaves it over.
    EXPECT_GE(r.n_prompt - r.n_cached - r.n_approximate - r.n_recomputed, 1);
    const double kl25 = kl(full, l25);
    std::printf("PML %s: KL(full || modules): exact %.6f, budget 0.25 %.6f\n", recompute_policy_name(policy),
                kl_exact, kl25);
    EXPECT_LT(kl25, kl_exact);
    req.reuse.budget = 1.0;
    EXPECT_TRUE(bitwise(plan_logits(*e, f.plan(body), req, &r), full));
    EXPECT_EQ(r.n_approximate, 0);
    // Recomputed KV never enters the module store: the same entries, and an exact
    // prompt is bitwise what it was.
    EXPECT_EQ(EngineTestPeer::modules(*e).stats().entries, entries);
    EXPECT_TRUE(bitwise(plan_logits(*e, f.plan(body)), exact));
  }
  EngineTestPeer::page_pool(*e).check_invariants();
}

}  // namespace
}  // namespace pc
