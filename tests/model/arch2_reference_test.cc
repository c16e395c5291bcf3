// The 2026 architectures in ../shared/models/arch2 (qwen3moe, qwen35, qwen35moe,
// gpt-oss) against llama.cpp's recorded outputs, under the rule of its
// README.md: teacher forcing prompt + llama.cpp's greedy continuation, at each
// of the 16 steps the top-1 id must be llama.cpp's where llama.cpp's top-2 gap
// exceeds 0.05 nats, and the log-probabilities of its top-5 tokens must be
// within 0.05. Prompts 4 and 5 (160 and 245 tokens) exceed gpt-oss's window
// (32) and run the DeltaNet recurrence over more than 150 tokens. (The engine's
// path for these models: hybrid_engine_test.cc.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kernels/thread_pool.h"
#include "kv/kv_storage.h"
#include "model/forward.h"
#include "model/model.h"
#include "model/recurrent_state.h"
#include "model_test_util.h"
#include "test_util.h"

namespace pc {
namespace {

const std::string& arch2_dir() {
  static const std::string d = test::shared_dir() + "/models/arch2";
  return d;
}

using test::log_softmax;

const nlohmann::json& expected() { return test::llamacpp_reference("arch2"); }

// Compares one model with its reference, prompts computed in chunks of
// `chunk` by the forward pass (logits only at the 16 steps); returns the
// largest log-prob error and (in *rows_out) the steps' logits, concatenated.
double check_model(const Model& m, const std::string& name, int chunk, std::vector<float>* rows_out) {
  const ModelConfig& c = m.config();
  constexpr int kPages = 32;  // 512 slots: every case fits
  KvStorage kv(KvShape{int(c.n_layer), int(c.n_kv_head), int(c.head_dim), 16}, kPages);
  ThreadPool pool(2);
  Forward fwd(m, kv, pool);
  std::vector<int32_t> pages(kPages);
  for (int32_t p = 0; p < kPages; ++p) pages[p] = p;
  const size_t V = size_t(c.n_vocab);
  double worst = 0;
  for (const nlohmann::json& cs : expected().at(name)) {
    const auto prompt = cs.at("prompt_ids").get<std::vector<int32_t>>();
    const auto output = cs.at("output_ids").get<std::vector<int32_t>>();
    std::vector<int32_t> tokens = prompt;
    tokens.insert(tokens.end(), output.begin(), output.end() - 1);
    // A fresh sequence: its slots from 0 (earlier cases' KV is never seen), a zero state.
    RecurrentState state = c.n_recurrent > 0 ? RecurrentState(c) : RecurrentState();
    SeqKv seq{pages.data(), kPages};
    if (!state.empty()) seq.state = &state;
    std::vector<float> logits;
    for (size_t done = 0; done < tokens.size(); done += size_t(chunk)) {
      std::vector<BatchEntry> batch;
      for (size_t t = done; t < std::min(tokens.size(), done + size_t(chunk)); ++t)
        batch.push_back(BatchEntry{tokens[t], int32_t(t), 0, int32_t(t), t + 1 >= prompt.size()});
      const float* l = fwd.run(batch, std::span<const SeqKv>(&seq, 1));
      size_t n_rows = 0;
      for (const BatchEntry& e : batch) n_rows += e.logits;
      logits.insert(logits.end(), l, l + n_rows * V);
    }
    EXPECT_EQ(logits.size(), output.size() * V);
    rows_out->insert(rows_out->end(), logits.begin(), logits.end());
    const nlohmann::json& steps = cs.at("steps");
    for (size_t i = 0; i < steps.size(); ++i) {
      const std::vector<double> lp = log_softmax(logits.data() + i * V, V);
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

TEST(Arch2Reference, CoversEveryFile) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(arch2_dir())) {
    if (e.path().extension() != ".gguf") continue;
    ++n;
    EXPECT_TRUE(expected().contains(e.path().stem().string())) << e.path();
  }
  EXPECT_EQ(n, int(expected().size()));
}

class Arch2Reference : public ::testing::TestWithParam<const char*> {};

TEST_P(Arch2Reference, MatchesLlamaCpp) {
  // Whole prompts in one step, and in chunks of 7 (inside the sliding windows,
  // across the DeltaNet recurrence): bitwise the same logits.
  auto model = Model::load(arch2_dir() + "/" + GetParam() + ".gguf");
  std::vector<float> whole, chunked;
  const double worst = check_model(*model, GetParam(), 512, &whole);
  EXPECT_LE(worst, 0.05);
  check_model(*model, GetParam(), 7, &chunked);
  ASSERT_EQ(whole.size(), chunked.size());
  EXPECT_EQ(0, std::memcmp(whole.data(), chunked.data(), whole.size() * sizeof(float)));
  std::printf("%s: largest log-prob difference from llama.cpp %.4f\n", GetParam(), worst);
}

INSTANTIATE_TEST_SUITE_P(Models, Arch2Reference,
                         ::testing::Values("qwen3moe-tiny", "qwen35-tiny", "qwen35moe-tiny", "gpt-oss-tiny"),
                         [](const auto& info) {
                           std::string s = info.param;
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

// The per-layer description read from the files (the README's facts).
TEST(Arch2Reference, LayerDescriptions) {
  auto q35 = Model::load(arch2_dir() + "/qwen35-tiny.gguf");
  const ModelConfig& c = q35->config();
  ASSERT_EQ(c.layers.size(), 6u);
  for (int l = 0; l < 6; ++l) {
    const bool full = l == 2 || l == 5;
    EXPECT_EQ(c.layers[l].mixer, full ? Mixer::kAttention : Mixer::kDeltaNet) << l;
    EXPECT_EQ(c.layers[l].attn_gate, full) << l;
    EXPECT_EQ(c.layers[l].ffn, Ffn::kDense) << l;
  }
  EXPECT_EQ(c.n_recurrent, 4);
  EXPECT_EQ(c.layers[4].state_index, 3);
  EXPECT_EQ(c.n_rot, 8);
  EXPECT_EQ(c.delta_net.channels(), 128);

  auto moe = Model::load(arch2_dir() + "/qwen35moe-tiny.gguf");
  EXPECT_EQ(moe->config().moe.n_ff_shared, 48);
  EXPECT_EQ(moe->config().layers[3].mixer, Mixer::kAttention);
  EXPECT_EQ(moe->config().layers[3].ffn, Ffn::kMoe);

  auto oss = Model::load(arch2_dir() + "/gpt-oss-tiny.gguf");
  const ModelConfig& o = oss->config();
  for (int l = 0; l < 4; ++l) {
    EXPECT_EQ(o.layers[l].window, l % 2 == 0 ? 32 : 0) << l;
    EXPECT_TRUE(o.layers[l].attn_sinks);
    EXPECT_EQ(o.layers[l].rope_factors, RopeFactors::kYarn);
  }
  EXPECT_EQ(o.moe.gating, MoeGating::kTopKSoftmax);
  EXPECT_EQ(o.moe.activation, Activation::kSwiGluClamped);
  EXPECT_NEAR(o.rope_attn_factor, 1.3465736f, 1e-6);
  // YaRN's ramp: pairs 0-2 extrapolate, 5-7 interpolate (factor 32), 3 and 4 between.
  const std::vector<float>& f = oss->rope_freq_factors(0);
  ASSERT_EQ(f.size(), 8u);
  EXPECT_FLOAT_EQ(f[0], 1.f);
  EXPECT_FLOAT_EQ(f[2], 1.f);
  EXPECT_FLOAT_EQ(f[3], float(1.0 / (2.0 / 3 + 1.0 / 3 / 32)));
  EXPECT_FLOAT_EQ(f[7], 32.f);
}

}  // namespace
}  // namespace pc
