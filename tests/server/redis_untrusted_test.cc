// Redis as an untrusted peer, through real `promptcache serve` processes:
//  - a "Redis" answering every command with a hostile reply (a huge array or bulk
//    length) costs the server less than kRssBoundKb of peak RSS, and every request is
//    answered 200 within seconds (the tiers and the reply memory fall back to computing);
//  - reply memory values (pc:reply:*) with a flipped bit are dropped and counted, and
//    the request answers exactly as a server without reply memory does.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <chrono>
#include <thread>

#include "server_fixture.h"
#include "tier/fake_redis.h"
#include "tier/tier_fixture.h"

namespace pc::test {
namespace {

using Clock = std::chrono::steady_clock;

constexpr long kRssBoundKb = 64 * 1024;

std::vector<std::string> chat_args(const std::string& redis_url) {
  std::vector<std::string> a = {"-m", shared_path("models/stories260K.gguf"), "--chat-template-file",
                                shared_path("templates-2026/Qwen-Qwen2.5-7B-Instruct.jinja"), "--threads", "1",
                                "--kv-memory", "64MiB"};
  if (!redis_url.empty()) a.insert(a.end(), {"--redis", redis_url});
  return a;
}

json chat(const json& messages) {
  return {{"messages", messages}, {"max_tokens", 8}, {"temperature", 0}, {"ignore_eos", true}};
}

const json kTurn1 = json::array({{{"role", "user"}, {"content", "Tell me a story about a little dog and a ball."}}});

json turn2(const std::string& reply) {
  json m = kTurn1;
  m.push_back({{"role", "assistant"}, {"content", reply}});
  m.push_back({{"role", "user"}, {"content", "What happened to the ball after that?"}});
  return m;
}

std::string content(const Reply& r) { return r.body["choices"][0]["message"]["content"]; }

TEST(RedisUntrustedServer, HostileRedisCostsBoundedMemoryAndNoRequestFails) {
  for (const auto& [name, script] : hostile_scripts(size_t(64) << 20)) {
    if (name != "huge array" && name != "huge bulk length" && name != "trickle of a huge bulk") continue;
    SCOPED_TRACE(name);
    FakeRedis fake(script);
    ServeProcess srv(chat_args(fake.url()));
    const std::string pid = std::to_string(srv.pid());
    ASSERT_TRUE(reset_peak_rss(pid));
    const long before = rss_kb(pid);
    auto c = srv.client();
    c.set_read_timeout(30);
    for (int i = 0; i < 3; ++i) {
      const auto t0 = Clock::now();
      const Reply r = post(c, "/v1/chat/completions", chat(turn2("Once upon a time " + std::to_string(i))));
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      EXPECT_EQ(r.status, 200) << r.raw;
      EXPECT_LT(s, 5.0) << "request " << i;
    }
    EXPECT_GE(fake.connections(), 1) << "the server never asked the fake Redis";
    EXPECT_LT(peak_rss_kb(pid) - before, kRssBoundKb);
  }
}

// A plain hiredis connection of the test's own to a real redis-server.
struct RawRedis {
  redisContext* c;
  explicit RawRedis(int port) : c(redisConnect("127.0.0.1", port)) {}
  ~RawRedis() { redisFree(c); }
  std::vector<std::string> keys(const char* pattern) {
    std::vector<std::string> out;
    auto* r = static_cast<redisReply*>(redisCommand(c, "KEYS %s", pattern));
    for (size_t i = 0; r && i < r->elements; ++i) out.emplace_back(r->element[i]->str, r->element[i]->len);
    if (r) freeReplyObject(r);
    return out;
  }
  std::string get(const std::string& k) {
    auto* r = static_cast<redisReply*>(redisCommand(c, "GET %b", k.data(), k.size()));
    std::string v = r && r->type == REDIS_REPLY_STRING ? std::string(r->str, r->len) : "";
    if (r) freeReplyObject(r);
    return v;
  }
  void set(const std::string& k, const std::string& v) {
    auto* r = static_cast<redisReply*>(redisCommand(c, "SET %b %b", k.data(), k.size(), v.data(), v.size()));
    if (r) freeReplyObject(r);
  }
};

TEST(RedisUntrustedServer, FlippedReplyMemoryIsDroppedAndTheRequestAnswersAsWithoutMemory) {
  RedisServer redis;
  ASSERT_TRUE(redis.running()) << "redis-server did not start";
  // Server A answers turn 1 and stores its reply in Redis.
  ServeProcess a(chat_args(redis.url()));
  auto ca = a.client();
  const Reply r1 = post(ca, "/v1/chat/completions", chat(kTurn1));
  ASSERT_EQ(r1.status, 200) << r1.raw;
  const json second = chat(turn2(content(r1)));
  RawRedis raw(redis.port());
  std::vector<std::string> keys;
  for (int i = 0; i < 100 && keys.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    keys = raw.keys("pc:reply:*");
  }
  ASSERT_EQ(keys.size(), 1u) << "server A did not store its reply in Redis";
  const std::string original = raw.get(keys[0]);
  ASSERT_FALSE(original.empty());

  // The reference: a server without reply memory (no Redis, never saw turn 1).
  std::string expected;
  {
    ServeProcess ref(chat_args(""));
    auto cr = ref.client();
    const Reply r = post(cr, "/v1/chat/completions", second);
    ASSERT_EQ(r.status, 200) << r.raw;
    EXPECT_EQ(r.body["promptcache"].value("spliced_replies", -1), 0);
    expected = content(r);
  }

  // Server B sees turn 2 only: its one source for the reply is Redis, flipped there.
  ServeProcess b(chat_args(redis.url()));
  auto cb = b.client();
  constexpr int kFlips = 32;
  for (int i = 0; i < kFlips; ++i) {
    std::string v = original;
    const size_t byte = size_t(i) * 37 % v.size();
    v[byte] = char(v[byte] ^ (1 << (i % 8)));
    raw.set(keys[0], v);
    const Reply r = post(cb, "/v1/chat/completions", second);
    ASSERT_EQ(r.status, 200) << "flip " << i << " (byte " << byte << "): " << r.raw;
    EXPECT_EQ(content(r), expected) << "flip " << i << " (byte " << byte << ")";
    EXPECT_EQ(r.body["promptcache"].value("spliced_replies", -1), 0) << "flip " << i;
  }
  const json shared = get(cb, "/v1/cache/stats").body["conversation_memory"]["shared"];
  EXPECT_EQ(shared.value("corrupt", -1), kFlips) << shared.dump();
  EXPECT_TRUE(raw.get(keys[0]).empty()) << "the last corrupt value was not dropped";
  // The intact value is used: the path above was the reply memory's.
  raw.set(keys[0], original);
  const Reply ok = post(cb, "/v1/chat/completions", second);
  ASSERT_EQ(ok.status, 200) << ok.raw;
  EXPECT_EQ(ok.body["promptcache"].value("spliced_replies", -1), 1);
}

}  // namespace
}  // namespace pc::test
