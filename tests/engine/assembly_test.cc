// The assembly plan (kv/kv_plan.h): what plain and PML prompts compile to, and the
// engine running plans made of prefix, module and computed spans — with the same
// logits whether their KV came from the caches or was computed now.
#include <gtest/gtest.h>

#include <cstring>

#include "engine/cache_admin.h"
#include "engine/engine.h"
#include "kv/module_store.h"
#include "kv/page_pool.h"
#include "model/model.h"
#include "model_test_util.h"
#include "pml/compiled_plan.h"
#include "pml/pml.h"
#include "tokenizer/tokenizer.h"
#include "engine_test_peer.h"
#include "probe/engine_logits.h"

namespace pc {
namespace {

const char* kSchema = R"(<schema name="s">
  Once upon a time there was a
  <module name="dog">little dog named Max. He liked to run in the park with his ball.</module>
  <module name="reply">The story is told in <parameter name="lang" length="10">English</parameter>, slowly.</module>
</schema>)";

struct Fixture {
  std::unique_ptr<Model> model = Model::load(test::shared_model("stories260K.gguf"));
  pml::Encoder enc = pml::Encoder::for_model(model->tokenizer(), model->file());
  pml::SchemaLayout schema = pml::compile_schema(kSchema, enc, "s.pml");
  pml::PromptPlan plan(const std::string& body, const std::string& attrs = "") {
    return pml::plan_prompt("<prompt schema=\"s\"" + attrs + ">" + body + "</prompt>", schema, enc, "p.pml");
  }
  std::unique_ptr<Engine> engine(int64_t kv = 64 << 20) {
    EngineOptions o;
    o.kv_memory_bytes = kv;
    o.threads = 1;
    return std::make_unique<Engine>(*model, o);
  }
  std::vector<int32_t> ids(const std::string& text, bool bos) { return model->tokenizer().encode(text, bos, false); }
};

void expect_same(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size());
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << what;
}

TEST(Assembly, PlainPromptIsOnePrefixSpan) {
  const KvPlan p = KvPlan::prompt({1, 5, 9, 2});
  ASSERT_EQ(p.spans.size(), 1u);
  EXPECT_EQ(p.spans[0].kind, KvSpan::Kind::kPrefix);
  EXPECT_EQ(p.spans[0].positions, (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_TRUE(p.is_prefix());
  EXPECT_EQ(p.n_tokens(), 4);
}

TEST(Assembly, PmlPlanCompilesToModuleAndComputeSpans) {
  Fixture f;
  const pml::PromptPlan pp = f.plan("<dog/><reply lang=\"French\"/> The end.");
  const KvPlan p = pml::kv_plan(pp, f.schema);
  ASSERT_TRUE(p.modules);
  EXPECT_EQ(p.modules->size(), f.schema.modules.size());
  EXPECT_FALSE(p.is_prefix());
  EXPECT_EQ(p.n_tokens(), pp.n_tokens());
  // Root text, the dog module, the reply module around its filled slot, the argument,
  // then the text after the imports.
  ASSERT_GE(p.spans.size(), 5u);
  EXPECT_EQ(p.spans[0].kind, KvSpan::Kind::kModule);
  EXPECT_EQ(p.spans[0].module, 0);
  EXPECT_EQ(p.spans.back().kind, KvSpan::Kind::kCompute);
  const int dog = f.schema.find("dog"), reply = f.schema.find("reply");
  int n_dog = 0, n_reply = 0, n_compute = 0;
  for (const KvSpan& s : p.spans) {
    if (s.kind == KvSpan::Kind::kCompute) ++n_compute;
    if (s.kind != KvSpan::Kind::kModule) continue;
    EXPECT_EQ(s.shift, 0);  // schema layout: KV used where it was computed
    const ModuleSpec& m = (*p.modules)[s.module];
    EXPECT_TRUE(std::binary_search(m.cuts.begin(), m.cuts.end(), s.begin));
    EXPECT_TRUE(std::binary_search(m.cuts.begin(), m.cuts.end(), s.end));
    n_dog += s.module == dog;
    n_reply += s.module == reply;
  }
  EXPECT_EQ(n_dog, 1);
  EXPECT_EQ(n_reply, 2);   // the placeholder's segment is left out
  EXPECT_GE(n_compute, 2); // the argument and the trailing text
  // Compact layout: the same spans, shifted where the plan moved them.
  const KvPlan c = pml::kv_plan(f.plan("<reply/> The end.", " layout=\"compact\""), f.schema);
  bool shifted = false;
  for (const KvSpan& s : c.spans) shifted = shifted || (s.kind == KvSpan::Kind::kModule && s.shift != 0);
  EXPECT_TRUE(shifted);
  EXPECT_THROW(pml::kv_plan(f.plan("<dog/>"), f.schema), Error);  // must end with text
}

// A prefix hit compiles to [cached prefix][computed rest]: the second run reuses
// all but the last token, with logits equal to a cold run.
TEST(Assembly, PrefixHitRunsCachedThenComputed) {
  Fixture f;
  const std::vector<int32_t> prompt = f.ids("Once upon a time there was a little dog", true);
  auto cold = f.engine();
  const std::vector<float> want = plan_logits(*cold, KvPlan::prompt(prompt));
  auto e = f.engine();
  GenerateRequest req;
  req.prompt = prompt;
  req.max_tokens = 0;
  EXPECT_EQ(e->generate(req).n_cached, 0);
  EXPECT_EQ(e->generate(req).n_cached, int64_t(prompt.size()) - 1);
  expect_same(want, plan_logits(*e, KvPlan::prompt(prompt)), "prefix hit");
}

// A mixed plan: a prefix the prefix cache holds, a module, computed text.
TEST(Assembly, MixedPlanPrefixModuleCompute) {
  Fixture f;
  const std::shared_ptr<const ModuleSet> set = pml::module_set(f.schema);
  const int dog = f.schema.find("dog");
  const ModuleSpec& m = (*set)[dog];
  // The prefix: the tokens the dog module's context is, at positions 0.. (the root
  // text before it), so the plan means the same as the PML prompt <dog/> + text.
  const ModuleSpec& root = (*set)[0];
  ASSERT_EQ(m.context.size(), 1u);
  const int32_t n_ctx = m.context[0].n_tokens;
  KvPlan plan;
  plan.modules = set;
  KvSpan pre;
  pre.kind = KvSpan::Kind::kPrefix;
  pre.tokens.assign(root.tokens.begin(), root.tokens.begin() + n_ctx);
  for (int32_t i = 0; i < n_ctx; ++i) pre.positions.push_back(root.positions[i]);
  KvSpan mod;
  mod.kind = KvSpan::Kind::kModule;
  mod.module = dog;
  mod.begin = 0;
  mod.end = int32_t(m.tokens.size());
  KvSpan text;
  text.kind = KvSpan::Kind::kCompute;
  text.tokens = f.ids(" One day", false);
  for (size_t i = 0; i < text.tokens.size(); ++i) text.positions.push_back(f.schema.length + int32_t(i));
  plan.spans = {pre, mod, text};
  EXPECT_FALSE(plan.is_prefix());

  auto cold = f.engine();
  const std::vector<float> want = plan_logits(*cold, plan);
  auto e = f.engine();
  // Cache the prefix first (a plain prompt of those tokens and one more).
  GenerateRequest req;
  req.prompt = pre.tokens;
  req.prompt.push_back(text.tokens[0]);
  req.max_tokens = 0;
  e->generate(req);
  GenerateRequest none;
  none.max_tokens = 0;
  const GenerateResult warm = e->generate_plan(plan, none);
  EXPECT_EQ(warm.n_prompt, plan.n_tokens());
  EXPECT_EQ(warm.n_module_misses, 2);               // dog and its context (the root) encoded
  EXPECT_GE(warm.n_cached, n_ctx);                  // the prefix came from the prefix cache
  expect_same(want, plan_logits(*e, plan), "prefix + module + text, all cached");
  EngineTestPeer::page_pool(*e).check_invariants();
}

// A compact-layout module copy grown by a second shift must not free the pages the
// store alone holds (ModuleStore::insert took the new references after dropping the
// old ones).
TEST(Assembly, CompactRelocationKeepsItsOwnPages) {
  Fixture f;
  const char* schema = R"(<schema name="c">Root text here.
    <module name="pad">one two three four</module>
    <module name="reply">Say <parameter name="lang" length="PADLEN">x</parameter> now.</module>
  </schema>)";
  // The parameter's length equals pad's token count, so both prompts below place the
  // reply module at shifts that grow one relocated entry.
  const pml::SchemaLayout probe = pml::compile_schema(
      std::string(schema).replace(std::string(schema).find("PADLEN"), 6, "4"), f.enc, "c.pml");
  const int32_t pad_len = int32_t(probe.modules[probe.find("pad")].tokens.size());
  std::string text(schema);
  text.replace(text.find("PADLEN"), 6, std::to_string(pad_len));
  const pml::SchemaLayout layout = pml::compile_schema(text, f.enc, "c.pml");
  auto e = f.engine();
  GenerateRequest req;
  req.max_tokens = 2;
  auto plan = [&](const std::string& body) {
    return pml::kv_plan(pml::plan_prompt("<prompt schema=\"c\" layout=\"compact\">" + body + "</prompt>", layout, f.enc),
                        layout);
  };
  EXPECT_NO_THROW(e->generate_plan(plan("<pad/><reply lang=\"French\"/> The end."), req));
  EXPECT_NO_THROW(e->generate_plan(plan("<reply/> The end."), req));
  EXPECT_NO_THROW(e->generate_plan(plan("<reply/> The end."), req));
  EngineTestPeer::page_pool(*e).check_invariants();
}

// Dropping a schema's modules drops every relocated copy too.
TEST(Assembly, DropModulesTakesRelocatedCopies) {
  Fixture f;
  auto e = f.engine();
  plan_logits(*e, pml::kv_plan(f.plan("<reply/> The end.", " layout=\"compact\""), f.schema));
  plan_logits(*e, pml::kv_plan(f.plan("<dog/> The end."), f.schema));
  int shifted = 0;
  for (const auto& [key, entry] : EngineTestPeer::modules(*e).entries()) shifted += key.shift != 0;
  ASSERT_GE(shifted, 1);
  std::set<uint64_t> digests;
  for (const pml::ModuleLayout& m : f.schema.modules) digests.insert(m.digest);
  EXPECT_GT(e->cache().drop_modules("", digests), shifted);
  EXPECT_TRUE(EngineTestPeer::modules(*e).entries().empty());
  EngineTestPeer::page_pool(*e).check_invariants();
}

}  // namespace
}  // namespace pc
