// The KV tiers through real `promptcache serve` processes: a prompt cached before a
// restart hits from --disk-cache afterwards, and a prompt computed by one server is a
// hit on a second server sharing --redis; both give the same greedy text as a cold run.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "server_fixture.h"
#include "test_util.h"
#include "tier/tier_fixture.h"

namespace pc::test {
namespace {

const char* kModel = "models/stories260K.gguf";

json completion() {
  return {{"prompt",
           "Once upon a time, there was a little girl named Lily. She loved to play outside in the sun "
           "with her friends. One day, she saw a big red ball in the park and she wanted to play with it."},
          {"max_tokens", 12},
          {"temperature", 0}};
}

int64_t cached_tokens(const Reply& r) { return r.body["usage"]["prompt_tokens_details"]["cached_tokens"]; }

std::vector<std::string> args(std::vector<std::string> extra) {
  std::vector<std::string> a{"-m", shared_path(kModel), "--kv-memory", "64MiB"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

TEST(ServerTiers, DiskCacheSurvivesRestart) {
  const std::string dir = temp_dir() + "/disk-cache";
  std::string cold_text;
  {
    ServeProcess srv(args({"--disk-cache", dir, "--disk-cache-size", "1GiB"}));
    auto c = srv.client();
    const Reply r = post(c, "/v1/completions", completion());
    ASSERT_EQ(r.status, 200) << r.raw;
    EXPECT_EQ(cached_tokens(r), 0);
    cold_text = r.body["choices"][0]["text"];
  }  // SIGTERM: the engine finishes its tier writes before exiting
  ServeProcess srv(args({"--disk-cache", dir}));
  auto c = srv.client();
  const Reply r = post(c, "/v1/completions", completion());
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_GE(cached_tokens(r), 16);
  EXPECT_EQ(r.body["choices"][0]["text"], cold_text);

  // Visible in the cache API and the metrics.
  const Reply stats = get(c, "/v1/cache/stats");
  ASSERT_EQ(stats.status, 200);
  const json& t = stats.body["tiers"];
  EXPECT_GE(int64_t(t["disk"]["entries"]), 1) << t.dump();
  EXPECT_EQ(int64_t(t["disk"]["hits"]), 1) << t.dump();
  EXPECT_GE(int64_t(t["promoted_tokens"]), 16) << t.dump();
  EXPECT_EQ(t["disk"]["dir"], dir);
  const Reply entries = get(c, "/v1/cache/entries");
  int disk_entries = 0;
  for (const json& ns : entries.body["namespaces"])
    for (const json& e : ns["entries"]) disk_entries += e["tier"] == "disk";
  EXPECT_GE(disk_entries, 1) << entries.raw;
  const Reply metrics = get(c, "/metrics");
  EXPECT_NE(metrics.raw.find("promptcache_tier_ops{op=\"hits\",tier=\"disk\"} 1"), std::string::npos);
  std::string shared_label;
  for (const json& ns : entries.body["namespaces"])
    if (ns["namespace"] == "") shared_label = ns["metrics_label"];
  EXPECT_NE(metrics.raw.find("promptcache_cache_entries{namespace=\"" + shared_label + "\",tier=\"disk\"}"),
            std::string::npos);
  EXPECT_NE(metrics.raw.find("promptcache_kv_bytes{state=\"cached\",tier=\"disk\"}"), std::string::npos);
}

TEST(ServerTiers, TwoServersShareRedis) {
  RedisServer redis;
  ASSERT_TRUE(redis.available()) << "redis-server is not installed (scripts/setup.sh installs it)";
  ASSERT_TRUE(redis.running());
  ServeProcess a(args({"--redis", redis.url()}));
  ServeProcess b(args({"--redis", redis.url()}));
  auto ca = a.client();
  auto cb = b.client();
  const Reply ra = post(ca, "/v1/completions", completion());
  ASSERT_EQ(ra.status, 200) << ra.raw;
  EXPECT_EQ(cached_tokens(ra), 0);
  // A writes in the background: poll B until the entry is there (or give up).
  Reply rb;
  for (int i = 0; i < 50; ++i) {
    json other = completion();
    other["max_tokens"] = 1;
    other["prompt"] = std::string(other["prompt"]) + " Probe " + std::to_string(i);
    rb = post(cb, "/v1/completions", other);
    ASSERT_EQ(rb.status, 200) << rb.raw;
    if (cached_tokens(rb) > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_GE(cached_tokens(rb), 16) << "server B never found server A's prompt in Redis";
  const Reply same = post(cb, "/v1/completions", completion());
  ASSERT_EQ(same.status, 200);
  EXPECT_GE(cached_tokens(same), 16);
  EXPECT_EQ(same.body["choices"][0]["text"], ra.body["choices"][0]["text"]);
}

json tiers_stats(ServeProcess& srv);

// A hybrid (Gated DeltaNet) model: the prefix's recurrent-state snapshots travel with
// it, so the restarted server and a second one sharing Redis resume the prompt from a
// snapshot (cached tokens: all but the last) with the cold run's greedy text.
TEST(ServerTiers, HybridModelResumesAfterRestartAndOnASecondServer) {
  RedisServer redis;
  ASSERT_TRUE(redis.available()) << "redis-server is not installed (scripts/setup.sh installs it)";
  ASSERT_TRUE(redis.running());
  const std::string dir = temp_dir() + "/disk-cache";
  const auto hybrid = [&](std::vector<std::string> extra) {
    std::vector<std::string> a{"-m", shared_path("models/arch2/qwen35-tiny.gguf"), "--kv-memory", "64MiB"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  std::string cold_text;
  int64_t n_prompt = 0;
  {
    ServeProcess srv(hybrid({"--disk-cache", dir, "--redis", redis.url()}));
    auto c = srv.client();
    const Reply r = post(c, "/v1/completions", completion());
    ASSERT_EQ(r.status, 200) << r.raw;
    EXPECT_EQ(cached_tokens(r), 0);
    cold_text = r.body["choices"][0]["text"];
    n_prompt = r.body["usage"]["prompt_tokens"];
  }  // SIGTERM: the engine finishes its tier writes before exiting
  for (const auto& tier : {std::vector<std::string>{"--disk-cache", dir}, std::vector<std::string>{"--redis", redis.url()}}) {
    ServeProcess srv(hybrid(tier));
    auto c = srv.client();
    const Reply r = post(c, "/v1/completions", completion());
    ASSERT_EQ(r.status, 200) << r.raw;
    EXPECT_EQ(cached_tokens(r), n_prompt - 1) << tier[0];
    EXPECT_EQ(r.body["choices"][0]["text"], cold_text) << tier[0];
    const json t = tiers_stats(srv);
    EXPECT_EQ(int64_t(t["states_read"]), 1) << t.dump();
    EXPECT_GT(int64_t(t["state_bytes_read"]), 0) << t.dump();
  }
}

json tiers_stats(ServeProcess& srv) {
  auto c = srv.client();
  return get(c, "/v1/cache/stats").body["tiers"];
}

bool eventually(double seconds, const std::function<bool()>& ok) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    if (ok()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return ok();
}

// Redis restarting empty: server A writes again both entries it wrote for a prompt, the
// longest page-aligned prefix of prompt + reply (what the next turn probes) and of the
// prompt minus its last token (what a repeat of the prompt probes), so that a fresh
// server B repeating the prompt gets the prompt's pages from Redis.
TEST(ServerTiers, RedisRestartRewritesTheEntryARepeatedPromptProbes) {
  constexpr int64_t kPage = 16;  // the engine's default page size
  RedisServer redis;
  ASSERT_TRUE(redis.available()) << "redis-server is not installed (scripts/setup.sh installs it)";
  ASSERT_TRUE(redis.running());
  ServeProcess a(args({"--redis", redis.url()}));
  auto ca = a.client();
  json req = completion();
  req["max_tokens"] = 3 * kPage;  // the reply ends pages beyond the prompt's entry
  req["ignore_eos"] = true;
  const Reply ra = post(ca, "/v1/completions", req);
  ASSERT_EQ(ra.status, 200) << ra.raw;
  const int64_t n_prompt = ra.body["usage"]["prompt_tokens"];
  const int64_t expected = (n_prompt - 1) / kPage * kPage;
  ASSERT_GE(expected, kPage);
  ASSERT_TRUE(eventually(10, [&] {
    const json t = tiers_stats(a);
    return t.value("writes", 0) >= 2 && t.value("in_flight", 1) == 0;
  })) << tiers_stats(a).dump();
  redis.kill();
  ASSERT_TRUE(redis.start());
  ASSERT_TRUE(eventually(10, [&] {
    const json t = tiers_stats(a);
    return t.value("tier_resets", 0) >= 1 && t.value("in_flight", 1) == 0;
  })) << "server A did not notice the Redis restart: " << tiers_stats(a).dump();
  EXPECT_GE(tiers_stats(a).value("rewritten", 0), 2);
  ServeProcess b(args({"--redis", redis.url()}));
  auto cb = b.client();
  const Reply rb = post(cb, "/v1/completions", req);
  ASSERT_EQ(rb.status, 200) << rb.raw;
  EXPECT_GE(cached_tokens(rb), expected);
  EXPECT_EQ(rb.body["choices"][0]["text"], ra.body["choices"][0]["text"]);
}

TEST(ServerTiers, BadTierOptionsFailAtStartup) {
  const std::string out = temp_dir() + "/out.txt";
  const std::string cmd = promptcache_path() + " serve -m " + shared_path(kModel) +
                          " --port 0 --redis redis://127.0.0.1:notaport > " + out + " 2>&1";
  EXPECT_NE(std::system(cmd.c_str()), 0);
  EXPECT_NE(read_file(out).find("port"), std::string::npos) << read_file(out);
}

}  // namespace
}  // namespace pc::test
