// A hybrid (Gated DeltaNet) model with its disk and Redis tiers: the recurrent-state
// snapshots stored with a prefix travel with it (state entries beside its chain,
// docs/tiers.md "Recurrent state"), so a restarted server resumes a conversation from
// the disk and a second server from Redis without reprocessing it, with logits bitwise
// equal to a cold run; a corrupt state entry is dropped and the next earlier snapshot
// (or a recomputation) used instead, never a wrong state.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "engine/cache_admin.h"
#include "engine/engine.h"
#include "engine/kv_tiers.h"
#include "model/model.h"
#include "model/recurrent_state.h"
#include "probe/engine_logits.h"
#include "test_util.h"
#include "tier/entry.h"
#include "tier/tier_fixture.h"
#include "engine_test_peer.h"

namespace pc {
namespace {

namespace fs = std::filesystem;

struct HybridTiersTest : ::testing::Test {
  std::unique_ptr<Model> model = Model::load(test::shared_dir() + "/models/arch2/qwen35-tiny.gguf");
  std::string dir = test::temp_dir() + "/disk";
  std::vector<int32_t> p1;  // the first turn's prompt
  std::vector<int32_t> reply;
  const std::vector<int32_t> tail = {264, 1879, 9707, 13, 576};

  void SetUp() override {
    std::ifstream in(test::shared_dir() + "/models/arch2/expected_llamacpp.json");
    p1 = nlohmann::json::parse(in).at("qwen35-tiny")[4].at("prompt_ids").get<std::vector<int32_t>>();
    ASSERT_GT(p1.size(), 40u);
  }
  std::unique_ptr<Engine> engine(const std::string& disk, const std::string& redis = "", bool cache = true) {
    EngineOptions o;
    o.threads = 2;
    o.kv_memory_bytes = 16 << 20;
    o.prefix_cache = cache;
    o.tiers.disk_dir = disk;
    o.tiers.disk_fsync = false;
    o.tiers.redis_url = redis;
    return std::make_unique<Engine>(*model, o);
  }
  // The first turn: two parts and a 6-token reply. Snapshots at 12, 30 (the parts'
  // bounds), n - 1, n (the end of the prompt) and n + 5 (the end of the reply).
  void first_turn(Engine& e) {
    GenerateRequest q;
    q.prompt = p1;
    q.blocks = {{0, 12}, {12, 30}};
    q.max_tokens = 6;
    q.stop_at_eog = false;
    const GenerateResult r = e.generate(q);
    ASSERT_EQ(r.tokens.size(), 6u);
    reply.assign(r.tokens.begin(), r.tokens.begin() + 5);
    e.flush_tiers();
  }
  std::vector<int32_t> next_turn() const {
    std::vector<int32_t> p = p1;
    p.insert(p.end(), reply.begin(), reply.end());
    p.insert(p.end(), tail.begin(), tail.end());
    return p;
  }
  // The logits of the prompt's last token.
  static std::vector<float> logits(Engine& e, const std::vector<int32_t>& prompt, GenerateResult* r) {
    GenerateRequest q;
    q.prompt = prompt;
    q.max_tokens = 0;
    return request_logits(e, q, r, false);
  }
  // State entries on the disk by the position they follow.
  std::map<int32_t, fs::path> state_files() const {
    std::map<int32_t, fs::path> out;
    for (const auto& f : fs::directory_iterator(dir)) {
      if (f.path().extension() != ".kv") continue;
      std::ifstream in(f.path(), std::ios::binary);
      std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      const Decoded<EntryInfo> h = parse_entry_header(bytes, bytes.size());
      if (h.ok() && h.value.has_state()) out[h.value.link.start + h.value.n_tokens()] = f.path();
    }
    return out;
  }
};

void expect_bitwise(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  ASSERT_FALSE(a.empty()) << what;
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << what;
}

TEST_F(HybridTiersTest, ConversationResumesAfterARestartFromTheDisk) {
  {
    auto a = engine(dir);
    first_turn(*a);
    const TierCounters c = EngineTestPeer::tiers(*a)->stats();
    EXPECT_EQ(c.states_written, 5);
    EXPECT_GT(c.state_bytes_written, 5 * int64_t(RecurrentState(model->config()).bytes()));
  }
  EXPECT_EQ(state_files().size(), 5u);
  {  // the listing marks them, after a restart too (kind from the entry header)
    auto listed = engine(dir);
    int states = 0, links = 0;
    for (const TierEntryView& v : listed->cache().tier_entries(CacheScope())) {
      states += std::string(v.kind) == "state";
      links += std::string(v.kind) == "prefix";
    }
    EXPECT_EQ(states, 5);
    EXPECT_GT(links, 0);
  }
  const int32_t n = int32_t(p1.size());
  auto cold = engine("", "", false);
  struct Case {
    std::string kind;
    std::vector<int32_t> prompt;
    int32_t resumed_at;
  };
  std::vector<int32_t> mid(p1.begin(), p1.begin() + 30);
  mid.insert(mid.end(), tail.begin(), tail.end());
  const std::vector<Case> cases = {
      {"end of reply (the next turn)", next_turn(), n + 5},
      {"end of a part (mid-page)", mid, 30},
  };
  for (const Case& c : cases) {
    auto b = engine(dir);  // a restart: memory is empty
    GenerateResult got, want;
    const std::vector<float> resumed = logits(*b, c.prompt, &got);
    const std::vector<float> computed = logits(*cold, c.prompt, &want);
    EXPECT_EQ(got.n_cached, c.resumed_at) << c.kind;
    EXPECT_EQ(got.n_promoted, c.resumed_at) << c.kind;
    EXPECT_EQ(want.n_cached, 0) << c.kind;
    expect_bitwise(resumed, computed, c.kind);
    const TierCounters t = EngineTestPeer::tiers(*b)->stats();
    EXPECT_EQ(t.states_read, 1) << c.kind;
    EXPECT_GT(t.state_bytes_read, RecurrentState(model->config()).bytes()) << c.kind;
  }
  {  // the same greedy continuation, generated after a restart; the restarted servers
     // above wrote their own snapshots through (the end of that prompt but one)
    GenerateRequest q;
    q.prompt = next_turn();
    q.max_tokens = 8;
    q.stop_at_eog = false;
    const GenerateResult want = cold->generate(q);
    auto b = engine(dir);
    const GenerateResult got = b->generate(q);
    EXPECT_EQ(got.tokens, want.tokens);
    EXPECT_EQ(got.n_cached, int32_t(q.prompt.size()) - 1);
  }
}

TEST_F(HybridTiersTest, CorruptStateEntryIsDroppedAndAnEarlierOneUsed) {
  {
    auto a = engine(dir);
    first_turn(*a);
  }
  const int32_t n = int32_t(p1.size());
  std::map<int32_t, fs::path> files = state_files();
  ASSERT_TRUE(files.count(n + 5));
  {  // a byte of the state (the end of the entry) of the latest snapshot
    std::fstream io(files.at(n + 5), std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(-100, std::ios::end);
    io.put('\x5a');
  }
  auto cold = engine("", "", false);
  GenerateResult got, want;
  auto b = engine(dir);
  const std::vector<float> resumed = logits(*b, next_turn(), &got);
  expect_bitwise(resumed, logits(*cold, next_turn(), &want), "after a corrupt state entry");
  EXPECT_EQ(got.n_cached, n);  // the end of the prompt: the latest valid snapshot
  EXPECT_GE(EngineTestPeer::tiers(*b)->tier_stats()[0].corrupt_deleted, 1);
  EXPECT_FALSE(fs::exists(files.at(n + 5)));
  b->flush_tiers();
  // Every state entry corrupt: the prompt is computed from the start, exactly.
  for (const auto& [at, path] : state_files()) {
    std::fstream io(path, std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(-100, std::ios::end);
    io.put('\x5a');
  }
  b.reset();
  auto c = engine(dir);
  GenerateResult got2;
  expect_bitwise(logits(*c, next_turn(), &got2), logits(*cold, next_turn(), &want), "every state entry corrupt");
  EXPECT_EQ(got2.n_cached, 0);
}

// A prefix retained in the tiers (memory holds no retention here) keeps the state entry
// it resumes from as long: the disk writes its lifetime beside it.
TEST_F(HybridTiersTest, RetainedPrefixKeepsItsStateEntry) {
  EngineOptions o;
  o.threads = 2;
  o.kv_memory_bytes = 16 << 20;
  o.retention_share = 0;  // memory retains nothing: the tiers keep the prefix
  o.tiers.disk_dir = dir;
  o.tiers.disk_fsync = false;
  Engine e(*model, o);
  GenerateRequest q;
  q.prompt = p1;
  q.max_tokens = 2;
  q.stop_at_eog = false;
  q.retain = {RetainRequest{int32_t(p1.size()), 3600}};
  const GenerateResult r = e.generate(q);
  e.flush_tiers();
  EXPECT_EQ(r.retention.tier, "disk");
  const std::map<int32_t, fs::path> files = state_files();
  ASSERT_TRUE(files.count(int32_t(p1.size())));
  fs::path keep = files.at(int32_t(p1.size()));
  keep.replace_extension(".keep");
  EXPECT_TRUE(fs::exists(keep)) << keep;
  fs::path other = files.at(int32_t(p1.size()) - 1);  // not the resume point: no lifetime
  other.replace_extension(".keep");
  EXPECT_FALSE(fs::exists(other)) << other;
}

TEST_F(HybridTiersTest, TenantsDoNotShareStateEntries) {
  {
    auto a = engine(dir);
    first_turn(*a);
  }
  auto b = engine(dir);
  GenerateRequest q;
  q.prompt = next_turn();
  q.max_tokens = 0;
  q.scope = CacheScope("another-tenant");
  GenerateResult r;
  request_logits(*b, q, &r, false);
  EXPECT_EQ(r.n_cached, 0);
  EXPECT_EQ(EngineTestPeer::tiers(*b)->stats().states_read, 0);
}

TEST_F(HybridTiersTest, SecondServerResumesFromRedisAndCopiesToItsDisk) {
  test::RedisServer redis;
  ASSERT_TRUE(redis.available()) << "redis-server is not installed (scripts/setup.sh installs it)";
  ASSERT_TRUE(redis.running());
  auto a = engine("", redis.url());
  first_turn(*a);
  const int32_t n = int32_t(p1.size());
  auto cold = engine("", "", false);
  GenerateResult want;
  const std::vector<float> computed = logits(*cold, next_turn(), &want);
  {
    auto b = engine(dir, redis.url());  // another server: its memory and disk are empty
    GenerateResult got;
    expect_bitwise(logits(*b, next_turn(), &got), computed, "from Redis");
    EXPECT_EQ(got.n_cached, n + 5);
    const TierCounters t = EngineTestPeer::tiers(*b)->stats();
    EXPECT_EQ(t.states_read, 1);
    EXPECT_EQ(t.hits[1], 1);  // Redis supplied the chain and the state
  }
  // That server restarted without Redis: its disk got a copy of the snapshot at n + 5
  // (a prompt diverging after it resumes there).
  auto c = engine(dir);
  std::vector<int32_t> other = next_turn();
  other[size_t(n + 5)] = 100;
  GenerateResult got;
  expect_bitwise(logits(*c, other, &got), logits(*cold, other, &want), "from the disk copy");
  EXPECT_EQ(got.n_cached, n + 5);
}

// Redis restarting empty: the server holding the conversation writes its chain and the
// snapshots on it again, so another server resumes it from Redis as before.
TEST_F(HybridTiersTest, RedisRestartedEmptyGetsTheSnapshotsAgain) {
  test::RedisServer redis;
  ASSERT_TRUE(redis.available()) << "redis-server is not installed (scripts/setup.sh installs it)";
  ASSERT_TRUE(redis.running());
  auto a = engine("", redis.url());
  first_turn(*a);
  a->poll_tiers();  // reads the generation Redis has now
  a->flush_tiers();
  redis.kill();
  ASSERT_TRUE(redis.start());  // no persistence: empty
  for (int i = 0; i < 100 && EngineTestPeer::tiers(*a)->stats().tier_resets == 0; ++i) {
    a->poll_tiers();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(EngineTestPeer::tiers(*a)->stats().tier_resets, 1);
  a->flush_tiers();
  EXPECT_GE(EngineTestPeer::tiers(*a)->stats().states_written, 5 + 5);
  auto cold = engine("", "", false);
  auto b = engine("", redis.url());
  GenerateResult got, want;
  expect_bitwise(logits(*b, next_turn(), &got), logits(*cold, next_turn(), &want), "after Redis restarted");
  EXPECT_EQ(got.n_cached, int32_t(p1.size()) + 5);
}

}  // namespace
}  // namespace pc
