// Redis is a peer, not trusted memory (tier/redis_reply.h): against a fake Redis that
// answers every command with a hostile reply, each RedisTier call returns quickly,
// counts an error, drops the connection, and the process's peak RSS grows by less than
// kRssBoundKb (per reply the reader holds at most 2 × (expected bytes + 64 KiB) plus
// the reply's objects; here the expected bytes are a 16-token entry's, ~1 KiB).
#include <gtest/gtest.h>

#include <chrono>

#include "tier/fake_redis.h"
#include "tier/redis_tier.h"
#include "tier/tier_fixture.h"

namespace pc {
namespace {

using Clock = std::chrono::steady_clock;

constexpr long kRssBoundKb = 8 * 1024;
constexpr size_t kStreamBytes = size_t(16) << 20;  // what the fake sends after the head

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

RedisTierOptions options(const test::FakeRedis& fake) {
  RedisTierOptions o;
  o.url = fake.url();
  o.ttl_seconds = 60;
  return o;
}

// Runs `call` against each hostile reply; it must be answered kUnavailable within
// 1.5 s (command_timeout_ms is 200) and within the RSS bound.
template <class Call>
void against_hostile_replies(const Call& call) {
  for (const auto& [name, script] : test::hostile_scripts(kStreamBytes)) {
    SCOPED_TRACE(name);
    test::FakeRedis fake(script);
    RedisTier tier(options(fake));
    ASSERT_TRUE(test::reset_peak_rss());
    const long before = test::rss_kb();
    const auto t0 = Clock::now();
    EXPECT_EQ(call(tier), TierStatus::kUnavailable);
    EXPECT_LT(seconds_since(t0), 1.5);
    EXPECT_LT(test::peak_rss_kb() - before, kRssBoundKb);
    const TierStats s = tier.stats();
    EXPECT_GE(s.errors, 1);
    EXPECT_FALSE(s.connected) << "the connection is dropped after a hostile reply";
  }
}

TEST(RedisUntrusted, EntryLookupsRefuseHostileReplies) {
  const std::vector<int32_t> tokens = test::token_run(16);
  against_hostile_replies(
      [&](RedisTier& t) { return t.get(test::small_ns(), test::small_shape(), tokens).status; });
  against_hostile_replies(
      [&](RedisTier& t) { return t.read_prefix(test::small_ns(), test::small_shape(), tokens).status; });
}

TEST(RedisUntrusted, ValuesAndGenerationRefuseHostileReplies) {
  against_hostile_replies([](RedisTier& t) {
    std::vector<uint8_t> bytes;
    return t.get_value("pc:reply:x", &bytes, 4096);
  });
  against_hostile_replies([](RedisTier& t) {
    return t.generation() == 0 ? TierStatus::kUnavailable : TierStatus::kOk;
  });
}

// A reply of a legitimate size that trickles in is cut at its deadline
// (command_timeout_ms + its size at kMinBytesPerMs), though every read gets a byte.
TEST(RedisUntrusted, TricklingReplyMeetsItsDeadline) {
  test::FakeRedis fake({"$1000\r\n", "t", 0, 20, 6.0});
  RedisTier tier(options(fake));
  std::vector<uint8_t> bytes;
  const auto t0 = Clock::now();
  EXPECT_EQ(tier.get_value("pc:reply:x", &bytes, 4096), TierStatus::kUnavailable);
  EXPECT_LT(seconds_since(t0), 1.0);
  const TierStats s = tier.stats();
  EXPECT_GE(s.errors, 1);
  bool counted = false;
  for (const auto& [k, v] : s.counters) counted |= k == "reply_timeouts" && v == 1;
  EXPECT_TRUE(counted);
}

// The bounds are the caller's: a value longer than get_value's max_bytes is refused
// even from a well-behaved Redis; one within it is read.
TEST(RedisUntrusted, ValueBoundIsTheCallers) {
  test::RedisServer server;
  ASSERT_TRUE(server.running());
  RedisTierOptions o;
  o.url = server.url();
  o.ttl_seconds = 60;
  RedisTier tier(o);
  const std::vector<uint8_t> value(3000, 7);
  ASSERT_EQ(tier.set_value("pc:reply:big", value), TierStatus::kOk);
  std::vector<uint8_t> got;
  EXPECT_EQ(tier.get_value("pc:reply:big", &got, 2999), TierStatus::kUnavailable);
  bool counted = false;
  for (const auto& [k, v] : tier.stats().counters) counted |= k == "replies_refused" && v == 1;
  EXPECT_TRUE(counted);
  // The back-off passes; the next call reconnects and reads within the bound.
  for (int i = 0; i < 50 && tier.get_value("pc:reply:big", &got, 3000) != TierStatus::kOk; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(got, value);
}

}  // namespace
}  // namespace pc
