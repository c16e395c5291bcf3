// MoE batch invariance: a token's logits never depend on which other tokens
// share its experts, the batch size or the thread count (model/moe.h). The
// same token alone, and in batches of 64 with two different sets of
// neighbours (each neighbour its own sequence), on 1 and 2 threads: bitwise
// equal logits.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "kernels/thread_pool.h"
#include "kv/kv_storage.h"
#include "model/forward.h"
#include "model/model.h"
#include "model/recurrent_state.h"
#include "test_util.h"

namespace pc {
namespace {

// Logits of `target` (sequence 0, a 3-token prompt) computed at batch index
// `at` among `neighbours` one-token sequences, on `threads` threads.
std::vector<float> target_logits(const Model& m, const std::vector<int32_t>& target,
                                 const std::vector<int32_t>& neighbours, size_t at, int threads) {
  const ModelConfig& c = m.config();
  const int32_t n_seq = int32_t(neighbours.size()) + 1;
  KvStorage kv(KvShape{int(c.n_layer), int(c.n_kv_head), int(c.head_dim), 16}, n_seq);
  ThreadPool pool(threads);
  Forward fwd(m, kv, pool);
  std::vector<int32_t> pages(static_cast<size_t>(n_seq));
  std::vector<RecurrentState> states;
  std::vector<SeqKv> seqs(static_cast<size_t>(n_seq));
  for (int32_t s = 0; s < n_seq; ++s) {
    pages[s] = s;
    states.emplace_back(c.n_recurrent > 0 ? RecurrentState(c) : RecurrentState());
  }
  for (int32_t s = 0; s < n_seq; ++s) {
    seqs[s] = SeqKv{&pages[s], 1};
    if (c.n_recurrent > 0) seqs[s].state = &states[s];
  }
  std::vector<BatchEntry> batch;
  for (size_t i = 0; i < neighbours.size(); ++i) {
    if (i == at)
      for (size_t t = 0; t < target.size(); ++t)
        batch.push_back(BatchEntry{target[t], int32_t(t), 0, int32_t(t), t + 1 == target.size()});
    batch.push_back(BatchEntry{neighbours[i], 0, int32_t(i + 1), 0, false});
  }
  if (at >= neighbours.size())
    for (size_t t = 0; t < target.size(); ++t)
      batch.push_back(BatchEntry{target[t], int32_t(t), 0, int32_t(t), t + 1 == target.size()});
  const float* l = fwd.run(batch, seqs);
  return std::vector<float>(l, l + c.n_vocab);
}

class MoeInvariance : public ::testing::TestWithParam<const char*> {};

TEST_P(MoeInvariance, TokenResultIgnoresNeighbours) {
  auto m = Model::load(test::shared_dir() + "/models/arch2/" + GetParam() + ".gguf");
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> id(0, int32_t(m->config().n_vocab) - 1);
  auto random_ids = [&](int n) {
    std::vector<int32_t> v;
    for (int i = 0; i < n; ++i) v.push_back(id(rng));
    return v;
  };
  const std::vector<int32_t> target = random_ids(3);
  const std::vector<float> alone = target_logits(*m, target, {}, 0, 1);
  const std::vector<int32_t> a = random_ids(63), b = random_ids(63);
  for (int threads : {1, 2}) {
    EXPECT_EQ(0, std::memcmp(alone.data(), target_logits(*m, target, a, 20, threads).data(),
                             alone.size() * sizeof(float)))
        << "neighbours a, threads " << threads;
    EXPECT_EQ(0, std::memcmp(alone.data(), target_logits(*m, target, b, 63, threads).data(),
                             alone.size() * sizeof(float)))
        << "neighbours b, threads " << threads;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, MoeInvariance, ::testing::Values("qwen3moe-tiny", "qwen35moe-tiny", "gpt-oss-tiny"),
                         [](const auto& info) {
                           std::string s = info.param;
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

}  // namespace
}  // namespace pc
