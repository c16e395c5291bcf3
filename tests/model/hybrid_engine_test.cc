// A hybrid (Gated DeltaNet) model served through the engine: greedy generation
// follows llama.cpp's, every prompt is computed (no prefix reuse yet: a prefix's
// pages alone cannot resume recurrent layers), an approximate request is
// answered exactly and says why, PML modules are refused, and preempted
// sequences resume exactly (recomputed from their first token).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "kv/page_pool.h"
#include "model/model.h"
#include "kv/kv_plan.h"
#include "test_util.h"

namespace pc {
namespace {

struct Fixture {
  std::string name = "qwen35-tiny";
  std::unique_ptr<Model> model = Model::load(test::shared_dir() + "/models/arch2/" + name + ".gguf");
  nlohmann::json cases = [] {
    std::ifstream in(test::shared_dir() + "/models/arch2/expected_llamacpp.json");
    return nlohmann::json::parse(in).at("qwen35-tiny");
  }();
  std::unique_ptr<Engine> engine(int64_t kv_bytes = 16 << 20) {
    EngineOptions o;
    o.threads = 2;
    o.kv_memory_bytes = kv_bytes;
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
    // The same prompt again: computed again (no prefix reuse), the same tokens.
    const GenerateResult again = e->generate(f.request(c));
    EXPECT_EQ(again.n_cached, 0);
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
  // Room for the longest request alone (160 + 40 tokens), not for all three.
  auto e = f.engine(int64_t(f.model->config().n_layer) * f.model->config().n_kv_head * f.model->config().head_dim *
                    2 * 2 * 16 * 14);
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
}

}  // namespace
}  // namespace pc
