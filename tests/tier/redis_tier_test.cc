#include "tier/redis_tier.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "common/error.h"
#include "tier/tier_fixture.h"

namespace pc {
namespace {

using test::kv_image;
using test::small_ns;
using test::small_shape;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

struct RedisTierTest : ::testing::Test {
  test::RedisServer server;
  KvStorage kv{small_shape(), 16};
  void SetUp() override {
    ASSERT_TRUE(server.available()) << "redis-server not installed (scripts/setup.sh installs it)";
    ASSERT_TRUE(server.running()) << "redis-server did not start";
    std::vector<int32_t> all;
    for (int32_t p = 0; p < 16; ++p) all.push_back(p);
    test::fill_pattern(kv, all, 11);
  }
  std::vector<uint8_t> entry(int32_t n, int32_t seed = 100) {
    std::vector<int32_t> pages;
    for (int32_t i = 0; i < (n + 15) / 16; ++i) pages.push_back(i);
    return serialize_entry(kv, pages, test::token_run(n, seed), small_ns());
  }
  // The links of token_run(n) over pages 0, 1, ...
  std::vector<std::vector<uint8_t>> chain(int32_t n) {
    std::vector<int32_t> pages;
    for (int32_t i = 0; i < n / 16; ++i) pages.push_back(i);
    return serialize_chain(kv, pages, test::token_run(n), small_ns());
  }
  // The key of the link ending at token n of token_run.
  std::string link(int32_t n) const {
    return RedisTier::key_name(chain_links(small_ns(), small_shape(), test::token_run(n)).back().key);
  }
  std::string key(int32_t n, int32_t seed = 100) const {
    return RedisTier::key_name(entry_key(small_ns(), small_shape(), test::token_run(n, seed)));
  }
  RedisTierOptions fast(int ttl = 600) const {
    RedisTierOptions o;
    o.url = server.url();
    o.ttl_seconds = ttl;
    o.backoff_min_ms = 20;
    o.backoff_max_ms = 100;
    return o;
  }
};

TEST_F(RedisTierTest, TwoClientsShareEntriesBitwiseWithTtl) {
  RedisTier a(server.url(), 600);
  RedisTier b(server.url(), 600);
  for (const auto& l : chain(48)) ASSERT_EQ(a.put(l), TierStatus::kOk);
  TierChain r = b.read_prefix(small_ns(), small_shape(), test::token_run(50));
  ASSERT_TRUE(r.hit()) << r.message;
  ASSERT_EQ(r.tokens(), 48);
  std::vector<int32_t> out{10, 11, 12};
  for (size_t i = 0; i < 3; ++i) ASSERT_EQ(restore_entry(r.links[i], kv, std::span(out).subspan(i, 1)), EntryError::kOk);
  EXPECT_EQ(kv_image(kv, out, 48), kv_image(kv, {0, 1, 2}, 48));
  EXPECT_EQ(b.read_prefix(small_ns(), small_shape(), test::token_run(47)).tokens(), 32);
  EXPECT_EQ(b.read_prefix(small_ns(), small_shape(), test::token_run(15)).status, TierStatus::kMiss);
  EXPECT_EQ(b.read_prefix(small_ns("tenant"), small_shape(), test::token_run(50)).status, TierStatus::kMiss);
  EXPECT_TRUE(b.get(small_ns(), small_shape(), test::token_run(16)).hit());  // the root is a one-link chain
  std::vector<uint64_t> keys;
  for (const ChainLink& l : chain_links(small_ns(), small_shape(), test::token_run(64))) keys.push_back(l.key);
  EXPECT_EQ(b.has(keys), (std::vector<char>{1, 1, 1, 0}));
  EXPECT_GT(b.stats().bytes_read, 0);
  EXPECT_GT(a.stats().bytes_written, 3 * int64_t(small_shape().bytes_per_page()));

  const long long ttl = test::redis_int(server.port(), {"TTL", link(32)});
  EXPECT_GT(ttl, 590);
  EXPECT_LE(ttl, 600);
  EXPECT_EQ(b.erase(small_ns(), small_shape(), test::token_run(16)), TierStatus::kOk);
  EXPECT_EQ(test::redis_int(server.port(), {"EXISTS", key(16)}), 0);
  EXPECT_EQ(a.get(small_ns(), small_shape(), test::token_run(16)).status, TierStatus::kMiss);
  EXPECT_EQ(a.read_prefix(small_ns(), small_shape(), test::token_run(50)).status, TierStatus::kMiss);  // no root
  EXPECT_EQ(a.put(std::vector<uint8_t>{1, 2}), TierStatus::kInvalid);
  EXPECT_EQ(a.stats().puts, 3);
  EXPECT_EQ(b.stats().hits, 3);
}

// A hit re-arms the TTL only forward: an entry put with a longer lifetime keeps its own.
TEST_F(RedisTierTest, HitKeepsALongerOwnTtl) {
  RedisTier a(fast(100));
  ASSERT_EQ(a.put(entry(16), 7200), TierStatus::kOk);
  ASSERT_TRUE(a.get(small_ns(), small_shape(), test::token_run(16)).hit());
  EXPECT_GT(test::redis_int(server.port(), {"TTL", key(16)}), 7190);
  for (const auto& l : chain(32)) ASSERT_EQ(a.put(l, 3600), TierStatus::kOk);
  ASSERT_EQ(a.read_prefix(small_ns(), small_shape(), test::token_run(32)).tokens(), 32);
  EXPECT_GT(test::redis_int(server.port(), {"TTL", link(32)}), 3590);
}

TEST_F(RedisTierTest, HitRearmsTheTtl) {
  RedisTier a(fast(100));
  ASSERT_EQ(a.put(entry(16)), TierStatus::kOk);
  ASSERT_EQ(test::redis_int(server.port(), {"EXPIRE", key(16), "5"}), 1);
  ASSERT_TRUE(a.get(small_ns(), small_shape(), test::token_run(16)).hit());
  EXPECT_GT(test::redis_int(server.port(), {"TTL", key(16)}), 90);
}

// A lifetime longer than the tier's TTL is the entry's own TTL; a shorter one leaves
// the tier's.
TEST_F(RedisTierTest, LifetimeSetsTheEntrysTtl) {
  RedisTier a(fast(100));
  ASSERT_EQ(a.put(entry(16), 7200), TierStatus::kOk);
  const long long kept = test::redis_int(server.port(), {"TTL", key(16)});
  EXPECT_GT(kept, 7190);
  EXPECT_LE(kept, 7200);
  ASSERT_EQ(a.put(entry(32), 10), TierStatus::kOk);
  EXPECT_GT(test::redis_int(server.port(), {"TTL", key(32)}), 90);
}

TEST_F(RedisTierTest, CorruptLinkIsDeletedAndTheChainStopsThere) {
  RedisTier a(server.url(), 600);
  auto links = chain(48);
  links[1][links[1].size() - 3] ^= 4;  // the middle link's payload
  for (const auto& l : links) ASSERT_EQ(a.put(l), TierStatus::kOk);  // put only checks the header
  TierChain r = a.read_prefix(small_ns(), small_shape(), test::token_run(50));
  ASSERT_TRUE(r.hit());
  EXPECT_EQ(r.tokens(), 16);
  EXPECT_NE(r.message.find("checksum"), std::string::npos) << r.message;
  EXPECT_EQ(a.stats().corrupt_deleted, 1);
  EXPECT_EQ(test::redis_int(server.port(), {"EXISTS", link(32)}), 0);
  EXPECT_EQ(test::redis_int(server.port(), {"EXISTS", link(48)}), 1);
  // A missing middle link stops the walk the same way, and the pipeline stays in step.
  EXPECT_EQ(a.read_prefix(small_ns(), small_shape(), test::token_run(50)).tokens(), 16);
  EXPECT_TRUE(a.get(small_ns(), small_shape(), test::token_run(16)).hit());
}

TEST_F(RedisTierTest, DatabasesAreSeparate) {
  RedisTier db0(server.url(0), 600);
  RedisTier db1(server.url(1), 600);
  ASSERT_EQ(db1.put(entry(16)), TierStatus::kOk);
  EXPECT_EQ(db0.get(small_ns(), small_shape(), test::token_run(16)).status, TierStatus::kMiss);
  EXPECT_TRUE(db1.get(small_ns(), small_shape(), test::token_run(16)).hit());
}

TEST_F(RedisTierTest, KilledServerFailsFastAndReconnects) {
  RedisTier a(fast());
  ASSERT_EQ(a.put(entry(16)), TierStatus::kOk);
  server.kill();
  auto t0 = Clock::now();
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(a.get(small_ns(), small_shape(), test::token_run(16)).status, TierStatus::kUnavailable);
    EXPECT_EQ(a.put(entry(32)), TierStatus::kUnavailable);
    EXPECT_EQ(a.read_prefix(small_ns(), small_shape(), test::token_run(40)).status, TierStatus::kUnavailable);
  }
  EXPECT_LT(ms_since(t0), 1000) << "150 calls against a dead server";
  TierStats s = a.stats();
  EXPECT_GE(s.errors, 1);
  EXPECT_GT(s.counter("unavailable"), 100);
  EXPECT_FALSE(s.connected);

  ASSERT_TRUE(server.start());  // same port, empty (no persistence)
  TierStatus st = TierStatus::kUnavailable;
  t0 = Clock::now();
  while (st != TierStatus::kOk && ms_since(t0) < 3000) {
    st = a.put(entry(16));
    if (st != TierStatus::kOk) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(st, TierStatus::kOk);
  EXPECT_TRUE(a.get(small_ns(), small_shape(), test::token_run(16)).hit());
  EXPECT_EQ(a.stats().counter("connects"), 2);
  EXPECT_TRUE(a.stats().connected);
}

TEST_F(RedisTierTest, UnreachableFromTheStartNeverBlocks) {
  RedisTierOptions o = fast();
  server.kill();
  auto t0 = Clock::now();
  RedisTier a(o);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(a.get(small_ns(), small_shape(), test::token_run(16)).status, TierStatus::kUnavailable);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_LT(ms_since(t0), 1500);
  EXPECT_GE(a.stats().errors, 2);  // reconnection was attempted after back-offs
  EXPECT_EQ(a.stats().counter("connects"), 0);
}

TEST(RedisUrl, Parses) {
  RedisUrl u = parse_redis_url("redis://example.org:6380/2");
  EXPECT_EQ(u.host, "example.org");
  EXPECT_EQ(u.port, 6380);
  EXPECT_EQ(u.db, 2);
  u = parse_redis_url("redis://:secret@10.0.0.1");
  EXPECT_EQ(u.host, "10.0.0.1");
  EXPECT_EQ(u.port, 6379);
  EXPECT_EQ(u.password, "secret");
  u = parse_redis_url("localhost:7000");
  EXPECT_EQ(u.host, "localhost");
  EXPECT_EQ(u.port, 7000);
  EXPECT_THROW(parse_redis_url("http://x"), Error);
  EXPECT_THROW(parse_redis_url("redis://x:port"), Error);
  EXPECT_THROW(parse_redis_url("redis://x:99999"), Error);
  EXPECT_THROW(parse_redis_url("redis://x:1/db"), Error);
  EXPECT_THROW(RedisTier("redis://127.0.0.1:1/0", 0), Error);
}

}  // namespace
}  // namespace pc
