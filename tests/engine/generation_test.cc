// End-to-end greedy generation with the shipped trained models, against the
// texts in ../shared/models/README.md.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "engine/engine.h"
#include "model/model.h"
#include "model_test_util.h"
#include "tokenizer/tokenizer.h"
#include "probe/engine_logits.h"

namespace pc {
namespace {

std::string greedy(const std::string& model_file, const std::string& prompt, int n,
                   std::vector<int32_t>* prompt_ids = nullptr, int threads = 2) {
  auto model = Model::load(test::shared_model(model_file));
  EngineOptions eo;
  eo.threads = threads;
  eo.kv_memory_bytes = 64 << 20;
  Engine engine(*model, eo);
  GenerateRequest req;
  req.prompt = prompt.empty() ? std::vector<int32_t>{model->tokenizer().bos()}
                              : model->tokenizer().encode(prompt, true, false);
  if (prompt_ids) *prompt_ids = req.prompt;
  req.max_tokens = n;
  GenerateResult r = engine.generate(req);
  EXPECT_EQ(r.tokens.size(), size_t(n));
  std::string text;
  StreamDecoder dec(model->tokenizer());
  for (int32_t id : r.tokens) text += dec.push(id);
  return text + dec.flush();
}

TEST(Generation, Stories260KFromBos) {
  EXPECT_EQ(greedy("stories260K.gguf", "", 60),
            " Once upon a time, there was a little girl named Lily. She loved to play outside in "
            "the park. One day, she saw a big, red ball. She wanted to play with it, but it was "
            "too high");
}

TEST(Generation, Stories260KSingleThread) {
  EXPECT_EQ(greedy("stories260K.gguf", "", 60, nullptr, 1),
            " Once upon a time, there was a little girl named Lily. She loved to play outside in "
            "the park. One day, she saw a big, red ball. She wanted to play with it, but it was "
            "too high");
}

TEST(Generation, TinyStories656KHello) {
  std::vector<int32_t> ids;
  EXPECT_EQ(greedy("TinyStories-656K-Q8_0.gguf", "Hello", 16, &ids),
            " and a girl were walking in the park. One day she saw a small bird flying in the sk");
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 80, 1288, 67}));
}

TEST(Generation, TinyStories656KOnceUponATime) {
  std::vector<int32_t> ids;
  EXPECT_EQ(greedy("TinyStories-656K-Q8_0.gguf", "Once upon a time", 32, &ids),
            ", a little girl named Lily lived in a small house. She loved to eat yummy food. One "
            "day, she saw a small bird on the ground. The bird was sad because it could not eat "
            "it.\nLily wanted to help the bird. She tried to eat the food and ");
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 80, 147, 201, 282, 57}));
}

// Logprobs are the log-softmax of the raw logits at each step, whatever the
// sampling settings, and cost nothing unless asked for.
TEST(Generation, LogprobsAreLogSoftmaxOfRawLogits) {
  auto model = Model::load(test::shared_model("stories260K.gguf"));
  EngineOptions eo;
  eo.kv_memory_bytes = 64 << 20;
  eo.prefix_cache = false;
  Engine engine(*model, eo);
  GenerateRequest req;
  req.prompt = model->tokenizer().encode("Once upon a time", true, false);
  req.max_tokens = 3;
  req.sampling.temperature = 0.7f;
  req.sampling.top_k = 2;
  req.sampling.repeat_penalty = 1.3f;
  req.logprobs = 4;
  const GenerateResult r = engine.generate(req);
  ASSERT_EQ(r.logprobs.size(), r.tokens.size());
  std::vector<int32_t> ids = req.prompt;
  for (size_t i = 0; i < r.tokens.size(); ++i) {
    const int64_t V = model->config().n_vocab;
    const std::vector<float> all = prompt_logits(engine, ids, 64);
    const float* l = all.data() + (ids.size() - 1) * V;
    double mx = l[0], sum = 0;
    for (int64_t v = 0; v < V; ++v) mx = std::max(mx, double(l[v]));
    for (int64_t v = 0; v < V; ++v) sum += std::exp(double(l[v]) - mx);
    const double lse = mx + std::log(sum);
    EXPECT_NEAR(r.logprobs[i].logprob, l[r.tokens[i]] - lse, 1e-5);
    ASSERT_EQ(r.logprobs[i].top.size(), 4u);
    EXPECT_EQ(r.logprobs[i].top[0].first, argmax(std::span<const float>(l, V)));
    for (const auto& [id, lp] : r.logprobs[i].top) EXPECT_NEAR(lp, l[id] - lse, 1e-5);
    ids.push_back(r.tokens[i]);
  }
  req.logprobs = -1;
  EXPECT_TRUE(engine.generate(req).logprobs.empty());
}

}  // namespace
}  // namespace pc
