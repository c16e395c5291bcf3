// Promotion and demotion with a real engine: KV saved from one engine and restored into
// a fresh one (a restart from disk, or a second server through Redis) gives logits
// bitwise equal to computing everything.
#include "tier/prefix_transfer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <random>

#include "engine/engine.h"
#include "model/model.h"
#include "test_util.h"
#include "tier/disk_tier.h"
#include "tier/redis_tier.h"
#include "tier/tier_fixture.h"
#include "engine_test_peer.h"
#include "probe/engine_logits.h"

namespace pc {
namespace {

EngineOptions options() {
  EngineOptions o;
  o.threads = 2;
  o.kv_memory_bytes = 32 << 20;
  return o;
}

struct PrefixTransferTest : ::testing::Test {
  std::unique_ptr<Model> model = Model::load(test::shared_dir() + "/models/stories260K.gguf");
  std::vector<int32_t> prompt;
  std::vector<float> want;  // logits of every prompt position, no cache
  int64_t V = 0;
  void SetUp() override {
    V = model->config().n_vocab;
    std::mt19937 rng(7);
    std::uniform_int_distribution<int32_t> d(3, int32_t(V) - 1);
    prompt.push_back(1);
    for (int i = 0; i < 69; ++i) prompt.push_back(d(rng));
    Engine plain(*model, options());
    want = prompt_logits(plain, prompt, 64);
  }
  // Logits of positions [from, n) must equal `want`'s rows bitwise.
  void expect_rows_equal(const std::vector<float>& got, int64_t from) {
    ASSERT_EQ(int64_t(got.size()), (int64_t(prompt.size()) - from) * V);
    EXPECT_EQ(std::memcmp(got.data(), want.data() + from * V, got.size() * sizeof(float)), 0);
  }
  std::span<const int32_t> query() const { return std::span(prompt).first(prompt.size() - 1); }
};

// The chain links of the cached whole pages of `tokens`, as write-through stores them.
std::vector<std::vector<uint8_t>> save_chain(Engine& e, std::span<const int32_t> tokens) {
  PagePool& pool = EngineTestPeer::page_pool(e);
  PrefixSnapshot snap = EngineTestPeer::prefix(e).snapshot(e.ns(""), tokens, true);
  if (snap.empty()) return {};
  auto links = serialize_chain(*pool.store(), snap.pages, snap.tokens, e.ns(""));
  snap.table.release();
  return links;
}

// An entry of the cached prefix of `tokens` (page-aligned), serialized as a tier write
// would: the prefix cache's snapshot, then the entry bytes. Empty when nothing is cached.
std::vector<uint8_t> save_prefix(Engine& e, std::span<const int32_t> tokens, const SerializeOptions& opt = {}) {
  PagePool& pool = EngineTestPeer::page_pool(e);
  PrefixSnapshot snap = EngineTestPeer::prefix(e).snapshot(e.ns(""), tokens, true);
  if (snap.empty()) return {};
  std::vector<uint8_t> bytes = serialize_entry(*pool.store(), snap.pages, snap.tokens, e.ns(""), opt);
  snap.table.release();
  return bytes;
}

TEST_F(PrefixTransferTest, RestartFromDiskIsBitwiseEqual) {
  const std::string dir = test::temp_dir() + "/disk";
  {
    Engine a(*model, options());
    prompt_logits(a, prompt, 16, true);  // computed and cached in memory
    DiskTier disk(dir, 64 << 20);
    for (size_t len : {16, 64})  // two prefixes: the shorter one's link is the longer one's root
      for (const auto& link : save_chain(a, std::span(prompt).first(len))) ASSERT_EQ(disk.put(link), TierStatus::kOk);
  }
  Engine b(*model, options());  // "restarted": empty memory cache
  DiskTier disk(dir, 64 << 20);
  EXPECT_EQ(disk.stats().entries, 4);
  const KvShape shape = EngineTestPeer::page_pool(b).shape();
  TierChain r = disk.read_prefix(b.ns(""), shape, query());
  ASSERT_TRUE(r.hit()) << r.message;
  EXPECT_EQ(r.tokens(), 64);
  EXPECT_EQ(EngineTestPeer::prefix(b).restore_chain(b.ns(""), query().first(64), 0, r.links), 64);
  EngineTestPeer::page_pool(b).check_invariants();
  EngineTestPeer::index(b).check_invariants();
  int64_t n_cached = -1;
  std::vector<float> got = prompt_logits(b, prompt, 16, true, &n_cached);
  EXPECT_EQ(n_cached, 64);
  expect_rows_equal(got, 64);
  // Restoring again adds nothing new to the index.
  EXPECT_EQ(EngineTestPeer::prefix(b).restore_chain(b.ns(""), query().first(64), 0, r.links), 0);
  // Another tenant's namespace does not see it.
  EXPECT_EQ(disk.read_prefix(b.ns("other"), shape, query()).status, TierStatus::kMiss);
}

TEST_F(PrefixTransferTest, CorruptLinkIsDroppedAndRecomputedBitwise) {
  const std::string dir = test::temp_dir() + "/disk";
  std::vector<uint64_t> keys;
  {
    Engine a(*model, options());
    prompt_logits(a, prompt, 16, true);
    DiskTier disk(dir, 64 << 20);
    for (const auto& link : save_chain(a, std::span(prompt).first(64))) ASSERT_EQ(disk.put(link), TierStatus::kOk);
    for (const ChainLink& l : chain_links(a.ns(""), EngineTestPeer::page_pool(a).shape(), std::span(prompt).first(64)))
      keys.push_back(l.key);
  }
  const std::string path = dir + "/" + key_hex(keys[2]) + ".kv";  // the third of four links
  std::vector<uint8_t> bytes;
  {
    std::ifstream f(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), {});
  }
  bytes[bytes.size() / 2] ^= 0x10;
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  Engine b(*model, options());
  DiskTier disk(dir, 64 << 20);
  TierChain r = disk.read_prefix(b.ns(""), EngineTestPeer::page_pool(b).shape(), query());
  EXPECT_EQ(r.tokens(), 32);  // stops before the corrupt link, which is deleted
  EXPECT_EQ(disk.stats().corrupt_deleted, 1);
  ASSERT_EQ(EngineTestPeer::prefix(b).restore_chain(b.ns(""), query().first(32), 0, r.links), 32);
  int64_t n_cached = -1;
  std::vector<float> got = prompt_logits(b, prompt, 16, true, &n_cached);
  EXPECT_EQ(n_cached, 32);  // the rest recomputed from the corrupt link on
  expect_rows_equal(got, 32);
}

TEST_F(PrefixTransferTest, SecondServerThroughRedisIsBitwiseEqual) {
  test::RedisServer server;
  ASSERT_TRUE(server.available()) << "redis-server not installed (scripts/setup.sh installs it)";
  ASSERT_TRUE(server.running()) << "redis-server did not start";
  Engine a(*model, options());
  Engine b(*model, options());
  RedisTier ra(server.url(), 600);
  RedisTier rb(server.url(), 600);
  prompt_logits(a, prompt, 7, true);
  for (const auto& link : save_chain(a, std::span(prompt).first(48))) ASSERT_EQ(ra.put(link), TierStatus::kOk);
  TierChain r = rb.read_prefix(b.ns(""), EngineTestPeer::page_pool(b).shape(), query());
  ASSERT_TRUE(r.hit()) << r.message;
  EXPECT_EQ(r.tokens(), 48);
  ASSERT_EQ(EngineTestPeer::prefix(b).restore_chain(b.ns(""), query().first(48), 0, r.links), 48);
  int64_t n_cached = -1;
  expect_rows_equal(prompt_logits(b, prompt, 5, true, &n_cached), 48);
  EXPECT_EQ(n_cached, 48);
}

TEST_F(PrefixTransferTest, SnapshotHoldsPagesAndAligns) {
  Engine a(*model, options());
  PagePool& pool = EngineTestPeer::page_pool(a);
  EXPECT_TRUE(EngineTestPeer::prefix(a).snapshot(a.ns(""), prompt, true).empty());
  EXPECT_TRUE(save_prefix(a, prompt).empty());
  prompt_logits(a, std::vector<int32_t>(prompt.begin(), prompt.begin() + 40), 16, true);
  // Cached: 40 tokens. Asking for 70 gives the page-aligned 32; asking for 40, all 40.
  PrefixSnapshot s = EngineTestPeer::prefix(a).snapshot(a.ns(""), prompt, true);
  EXPECT_EQ(s.tokens.size(), 32u);
  EXPECT_EQ(s.pages.size(), 2u);
  for (int32_t p : s.pages) EXPECT_GT(pool.seq_refs(p), 0);
  PrefixSnapshot all = EngineTestPeer::prefix(a).snapshot(a.ns(""), std::span(prompt).first(40), true);
  EXPECT_EQ(all.tokens.size(), 40u);
  EXPECT_EQ(all.pages.size(), 3u);
  // While snapshots hold the pages, eviction cannot free them.
  EngineTestPeer::index(a).evict(size_t(1) << 40);
  for (int32_t p : all.pages) EXPECT_FALSE(pool.is_free(p));
  auto bytes = serialize_entry(*pool.storage(), all.pages, all.tokens, a.ns(""));
  s.table.release();
  all.table.release();
  pool.check_invariants();
  Decoded<Entry> d = deserialize_entry(bytes, EntryExpect{a.ns("").model, "f16", pool.shape()});
  ASSERT_TRUE(d.ok()) << d.message;
  // Restored into the now empty engine, the 40-token prefix (cut to 39) hits again.
  ASSERT_EQ(EngineTestPeer::prefix(a).restore(a.ns(""), d.value), 40);
  int64_t n_cached = -1;
  expect_rows_equal(prompt_logits(a, prompt, 16, true, &n_cached), 40);
  EXPECT_EQ(n_cached, 40);
}

}  // namespace
}  // namespace pc
