// The Gated DeltaNet recurrence does not depend on where a computation started
// or how the prompt was chunked: a state saved after any token and restored
// into a fresh sequence continues bit for bit as a run that never stopped
// (model/recurrent_state.h), and the forward pass refuses entries that do not
// continue a sequence's state.
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

struct Fixture {
  std::unique_ptr<Model> m;
  std::unique_ptr<KvStorage> kv;
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<Forward> fwd;
  std::vector<int32_t> pages;
  explicit Fixture(const std::string& name, int threads = 2) {
    m = Model::load(test::shared_dir() + "/models/arch2/" + name + ".gguf");
    const ModelConfig& c = m->config();
    kv = std::make_unique<KvStorage>(KvShape{int(c.n_layer), int(c.n_kv_head), int(c.head_dim), 16}, 16);
    pool = std::make_unique<ThreadPool>(threads);
    fwd = std::make_unique<Forward>(*m, *kv, *pool);
    for (int32_t p = 0; p < 16; ++p) pages.push_back(p);
  }
  // Tokens [from, to) of `toks` continuing `state`; returns their logits.
  std::vector<float> run(const std::vector<int32_t>& toks, int32_t from, int32_t to, RecurrentState& state) {
    std::vector<BatchEntry> batch;
    for (int32_t t = from; t < to; ++t) batch.push_back(BatchEntry{toks[t], t, 0, t, true});
    SeqKv s{pages.data(), int32_t(pages.size())};
    s.state = &state;
    const float* l = fwd->run(batch, std::span<const SeqKv>(&s, 1));
    return std::vector<float>(l, l + int64_t(to - from) * m->config().n_vocab);
  }
};

std::vector<int32_t> random_tokens(int64_t n_vocab, int n) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int32_t> d(0, int32_t(n_vocab) - 1);
  std::vector<int32_t> v;
  for (int i = 0; i < n; ++i) v.push_back(d(rng));
  return v;
}

class RecurrentResume : public ::testing::TestWithParam<const char*> {};

TEST_P(RecurrentResume, SnapshotResumesBitExact) {
  Fixture f(GetParam());
  const ModelConfig& c = f.m->config();
  ASSERT_GT(c.n_recurrent, 0);
  const int32_t n = 70;
  const std::vector<int32_t> toks = random_tokens(c.n_vocab, n);
  RecurrentState cold(c);
  const std::vector<float> ref = f.run(toks, 0, n, cold);
  EXPECT_EQ(cold.n_tokens(), n);
  const size_t V = size_t(c.n_vocab);
  for (int32_t cut : {1, 5, 16, 37, 64, 69}) {
    // Up to `cut` in chunks of 3, snapshot, then the rest from a restored copy.
    RecurrentState first(c);
    for (int32_t t = 0; t < cut; t += 3) f.run(toks, t, std::min(cut, t + 3), first);
    const RecurrentState snap = first.snapshot();
    first.reset();  // the snapshot is a deep copy
    RecurrentState resumed;
    if (cut % 2 == 0) {
      resumed.restore(snap);
    } else {  // through its raw floats, as a tier would store it
      ASSERT_TRUE(RecurrentState::from_data(c, snap.n_tokens(), snap.data(), &resumed));
    }
    EXPECT_EQ(resumed.n_tokens(), cut);
    const std::vector<float> rest = f.run(toks, cut, n, resumed);
    EXPECT_EQ(0, std::memcmp(rest.data(), ref.data() + size_t(cut) * V, rest.size() * sizeof(float)))
        << "resumed after token " << cut;
  }
}

TEST_P(RecurrentResume, RefusesEntriesThatSkipTokens) {
  Fixture f(GetParam());
  const ModelConfig& c = f.m->config();
  const std::vector<int32_t> toks = random_tokens(c.n_vocab, 8);
  RecurrentState s(c);
  f.run(toks, 0, 4, s);
  EXPECT_THROW(f.run(toks, 5, 8, s), Error);  // token 4 missing
  EXPECT_THROW(f.run(toks, 0, 2, s), Error);  // already absorbed
  RecurrentState none;
  EXPECT_THROW(f.run(toks, 0, 2, none), Error);
  EXPECT_FALSE(RecurrentState::from_data(c, 0, std::vector<float>(3), &none));
}

INSTANTIATE_TEST_SUITE_P(Models, RecurrentResume, ::testing::Values("qwen35-tiny", "qwen35moe-tiny"),
                         [](const auto& info) {
                           std::string s = info.param;
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

}  // namespace
}  // namespace pc
