// Every model in ../shared/models/arch against llama.cpp's recorded outputs
// (its README.md states the rule): teacher forcing prompt + llama.cpp's greedy
// continuation, at each of the 16 steps the top-1 id must be llama.cpp's where
// llama.cpp's top-2 gap exceeds 0.05 nats, and the log-probabilities of its
// top-5 tokens must be within 0.05. Prompts 4 and 5 are longer than the models'
// sliding windows (32 positions).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "model/model.h"
#include "model_test_util.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"
#include "probe/engine_logits.h"

namespace pc {
namespace {

const std::string& arch_dir() {
  static const std::string d = test::shared_dir() + "/models/arch";
  return d;
}

using test::log_softmax;

const nlohmann::json& expected() { return test::llamacpp_reference("arch"); }

// Compares one model with its reference; returns the largest log-prob error.
double check_model(const std::string& name, int chunk) {
  auto model = Model::load(arch_dir() + "/" + name + ".gguf");
  EngineOptions eo;
  eo.threads = 2;
  eo.kv_memory_bytes = 16 << 20;
  Engine engine(*model, eo);
  const size_t V = size_t(model->config().n_vocab);
  double worst = 0;
  for (const nlohmann::json& c : expected().at(name)) {
    const auto prompt = c.at("prompt_ids").get<std::vector<int32_t>>();
    const auto output = c.at("output_ids").get<std::vector<int32_t>>();
    EXPECT_EQ(model->tokenizer().encode(c.at("prompt").get<std::string>(), true, false), prompt)
        << name << ": tokenization of case " << c.at("prompt").get<std::string>().substr(0, 20);
    std::vector<int32_t> tokens = prompt;
    tokens.insert(tokens.end(), output.begin(), output.end() - 1);
    const std::vector<float> logits = prompt_logits(engine, tokens, chunk);
    EXPECT_EQ(logits.size(), tokens.size() * V);
    const nlohmann::json& steps = c.at("steps");
    for (size_t i = 0; i < steps.size(); ++i) {
      const size_t row = prompt.size() - 1 + i;
      const std::vector<double> lp = log_softmax(logits.data() + row * V, V);
      const nlohmann::json& top = steps[i].at("top");
      const double gap = top[0][1].get<double>() - top[1][1].get<double>();
      const int32_t ours = int32_t(std::max_element(lp.begin(), lp.end()) - lp.begin());
      if (gap > 0.05) {
        EXPECT_EQ(ours, top[0][0].get<int32_t>()) << name << " prompt " << prompt.size() << " tokens, step " << i;
      }
      for (const nlohmann::json& t : top) {
        const double err = std::fabs(lp[t[0].get<size_t>()] - t[1].get<double>());
        worst = std::max(worst, err);
        EXPECT_LE(err, 0.05) << name << " prompt " << prompt.size() << " tokens, step " << i << ", token "
                             << t[0].get<int>();
      }
    }
  }
  return worst;
}

// The reference covers every model file in the folder (a file added there
// without llama.cpp's numbers fails here).
TEST(ArchReference, CoversEveryFile) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(arch_dir())) {
    if (e.path().extension() != ".gguf") continue;
    ++n;
    EXPECT_TRUE(expected().contains(e.path().stem().string())) << e.path();
  }
  EXPECT_EQ(n, int(expected().size()));
}

class ArchReference : public ::testing::TestWithParam<const char*> {};

TEST_P(ArchReference, MatchesLlamaCpp) {
  // Whole prompts in one step, and in chunks of 7 that start and end inside
  // the sliding windows: the same numbers (batch invariance makes them equal).
  const double worst = check_model(GetParam(), 512);
  EXPECT_LE(worst, 0.05);
  EXPECT_EQ(worst, check_model(GetParam(), 7));
  std::printf("%s: largest log-prob difference from llama.cpp %.4f\n", GetParam(), worst);
}

INSTANTIATE_TEST_SUITE_P(Models, ArchReference,
                         ::testing::Values("gemma2-tiny", "gemma3-tiny", "phi3-tiny", "phi3-longrope-tiny",
                                           "llama-hd-tiny"),
                         [](const auto& info) {
                           std::string s = info.param;
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

// LongRoPE's factor set follows the context size the model is loaded for: a
// context within original_context_length (128) takes the short factors, which
// changes the logits (llama.cpp's numbers are the long set's) and the KV
// namespace (the model fingerprint).
TEST(ArchReference, LongRopeFactorSetFollowsContextSize) {
  const std::string path = arch_dir() + "/phi3-longrope-tiny.gguf";
  auto long_set = Model::load(path);
  auto short_set = Model::load(path, Residency::kMemory, 128);
  EXPECT_TRUE(long_set->config().longrope_long);
  EXPECT_FALSE(short_set->config().longrope_long);
  EXPECT_NE(long_set->fingerprint(), short_set->fingerprint());
  EXPECT_EQ(long_set->fingerprint(), Model::load(path, Residency::kMemory, 1024)->fingerprint());
  EngineOptions eo;
  eo.threads = 1;
  eo.kv_memory_bytes = 4 << 20;
  const std::vector<int32_t> prompt = {1, 9038, 2501, 263, 931};
  Engine a(*long_set, eo), b(*short_set, eo);
  const std::vector<float> la = prompt_logits(a, prompt, 5), lb = prompt_logits(b, prompt, 5);
  ASSERT_EQ(la.size(), lb.size());
  double most = 0;
  for (size_t i = 0; i < la.size(); ++i) most = std::max(most, double(std::fabs(la[i] - lb[i])));
  EXPECT_GT(most, 0.1);
}

// The per-layer description read from the files (llama.cpp's rules, model/config.cc).
TEST(ArchReference, LayerDescriptions) {
  auto g2 = Model::load(arch_dir() + "/gemma2-tiny.gguf");
  const ModelConfig& c2 = g2->config();
  ASSERT_EQ(c2.layers.size(), 4u);
  EXPECT_EQ(c2.layers[0].window, 32);
  EXPECT_EQ(c2.layers[1].window, 0);
  EXPECT_EQ(c2.layers[2].window, 32);
  EXPECT_EQ(c2.layers[3].window, 0);
  EXPECT_FLOAT_EQ(c2.layers[0].attn_softcap, 6.f);
  EXPECT_FLOAT_EQ(c2.final_softcap, 15.f);
  EXPECT_FLOAT_EQ(c2.embd_scale, std::sqrt(32.f));
  EXPECT_EQ(c2.layers[0].activation, Activation::kGeGluTanh);
  EXPECT_TRUE(c2.layers[0].post_attn_norm && c2.layers[0].post_ffn_norm);

  auto g3 = Model::load(arch_dir() + "/gemma3-tiny.gguf");
  const ModelConfig& c3 = g3->config();
  for (int l = 0; l < 6; ++l) {
    EXPECT_EQ(c3.layers[l].window, l < 5 ? 32 : 0) << l;
    EXPECT_FLOAT_EQ(c3.layers[l].rope_base, l < 5 ? 10000.f : 1e6f) << l;
    EXPECT_FLOAT_EQ(c3.layers[l].rope_freq_scale, l < 5 ? 1.f : 0.125f) << l;
    EXPECT_TRUE(c3.layers[l].qk_norm);
    EXPECT_EQ(c3.layers[l].attn_softcap, 0.f);
  }
  EXPECT_EQ(c3.final_softcap, 0.f);

  auto p3 = Model::load(arch_dir() + "/phi3-tiny.gguf");
  for (const LayerConfig& l : p3->config().layers) {
    EXPECT_EQ(l.window, 0);  // phi3's sliding_window key is ignored
    EXPECT_EQ(l.projections, Projections::kFused);
    EXPECT_EQ(l.rope_factors, RopeFactors::kNone);
  }
}

}  // namespace
}  // namespace pc
