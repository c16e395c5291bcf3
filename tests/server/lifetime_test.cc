// Cache lifetimes (docs/api.md "Lifetimes") against a real server: a prefix asked to
// live (prompt_cache_retention) survives LRU pressure that evicts its neighbours, is
// listed with the expiry its response reported, is re-armed by a hit, and goes to LRU
// when it lapses; beyond the memory share the disk tier keeps it with its own
// lifetime; admin eviction ends it. --test-time-scale 0.01 makes "5m" 3 s.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <thread>

#include "server_fixture.h"
#include "test_util.h"

namespace pc::test {
namespace {

const std::string kModel = "models/stories260K.gguf";

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// About 100 tokens; prompts with different `who` share no prefix beyond BOS.
std::string story(const std::string& who) {
  std::string p = who + " went to the park.";
  for (int i = 0; i < 7; ++i) p += " " + who + " had a red ball and a big dog named Max.";
  return p;
}

json completion(const std::string& prompt, const char* retention = nullptr) {
  json j = {{"prompt", prompt}, {"max_tokens", 4}, {"temperature", 0}};
  if (retention) j["prompt_cache_retention"] = retention;
  return j;
}

// -1 for a failed request (the assertion then shows its body).
int64_t cached(const Reply& r) {
  if (r.status != 200 || !r.body.contains("usage")) return -1;
  return r.body["usage"]["prompt_tokens_details"]["cached_tokens"];
}

// Memory entries of the shared namespace.
json memory_entries(httplib::Client& c) {
  const Reply r = get(c, "/v1/cache/entries");
  json out = json::array();
  for (const json& ns : r.body["namespaces"])
    if (ns["namespace"] == "")
      for (const json& e : ns["entries"])
        if (e["tier"] == "memory") out.push_back(e);
  return out;
}

void pressure(httplib::Client& c, const std::string& tag) {
  for (const char* who : {"Tom", "Sue", "Ben", "Mia", "Sam", "Zoe"}) {
    const Reply r = post(c, "/v1/completions", completion(story(std::string(who) + tag)));
    ASSERT_EQ(r.status, 200) << r.raw;
  }
}

TEST(ServerLifetime, RetainedPrefixSurvivesPressureIsReArmedAndLapses) {
  ServeProcess srv({"-m", shared_path(kModel), "--threads", "1", "--kv-memory", "240KiB",
                    "--test-time-scale", "0.01"});
  auto c = srv.client();
  const double t0 = unix_now();
  const Reply a = post(c, "/v1/completions", completion(story("Lily"), "in_memory"));
  ASSERT_EQ(a.status, 200) << a.raw;
  const int64_t n = a.body["usage"]["prompt_tokens"];
  const json& pa = a.body["promptcache"];
  EXPECT_EQ(pa["expires_tier"], "memory");
  EXPECT_EQ(pa["retained_tokens"], n);
  const double expires = pa["expires_at"];
  EXPECT_GT(expires, t0 + 2.5);  // 300 s × 0.01
  EXPECT_LT(expires, unix_now() + 3.01);

  const Reply b = post(c, "/v1/completions", completion(story("Anna")));
  ASSERT_EQ(b.status, 200) << b.raw;
  EXPECT_TRUE(b.body["promptcache"]["expires_at"].is_null());
  EXPECT_TRUE(b.body["promptcache"]["expires_tier"].is_null());

  // The listing shows the same expiry on A's entry and none on B's.
  int with_expiry = 0;
  for (const json& e : memory_entries(c)) {
    if (e["expires_at"].is_null()) continue;
    ++with_expiry;
    EXPECT_NEAR(e["expires_at"].get<double>(), expires, 0.05) << e.dump();
    EXPECT_EQ(e["retention"]["tokens"], n);
    EXPECT_DOUBLE_EQ(e["retention"]["seconds"].get<double>(), 3.0);
  }
  EXPECT_EQ(with_expiry, 1);

  // Pressure: six more prompts do not fit beside A and B.
  pressure(c, "");
  const json stats = get(c, "/v1/cache/stats").body;
  EXPECT_GT(stats["index"]["evicted"].get<int64_t>(), 0) << stats.dump();
  EXPECT_EQ(stats["index"]["retained"], 1);

  // A still hits (all but its last token) and the hit re-arms it; B was evicted.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const Reply a2 = post(c, "/v1/completions", completion(story("Lily")));
  ASSERT_EQ(a2.status, 200) << a2.raw;
  EXPECT_EQ(cached(a2), n - 1);
  const double rearmed = a2.body["promptcache"]["expires_at"];
  EXPECT_EQ(a2.body["promptcache"]["expires_tier"], "memory");
  EXPECT_GT(rearmed, expires + 0.2);
  const Reply b2 = post(c, "/v1/completions", completion(story("Anna")));
  EXPECT_LT(cached(b2), 8) << b2.raw;  // at most the start (BOS, a piece) other prompts share

  // Past the re-armed end the guarantee is gone: the listing shows none, and LRU
  // pressure evicts A like any other entry.
  const double wait = rearmed - unix_now() + 0.4;
  std::this_thread::sleep_for(std::chrono::duration<double>(std::max(0.0, wait)));
  for (const json& e : memory_entries(c)) EXPECT_TRUE(e["expires_at"].is_null()) << e.dump();
  pressure(c, "2");
  EXPECT_EQ(get(c, "/v1/cache/stats").body["index"]["retained"], 0);
  const Reply a3 = post(c, "/v1/completions", completion(story("Lily")));
  EXPECT_LT(cached(a3), 8) << a3.raw;
}

TEST(ServerLifetime, AdminEvictionEndsLifetimesAndSaysSo) {
  ServeProcess srv({"-m", shared_path(kModel), "--threads", "1", "--kv-memory", "240KiB"});
  auto c = srv.client();
  const Reply a = post(c, "/v1/completions", completion(story("Lily"), "24h"));
  ASSERT_EQ(a.status, 200) << a.raw;
  EXPECT_NEAR(a.body["promptcache"]["expires_at"].get<double>(), unix_now() + 86400, 5);
  const Reply ev = post(c, "/v1/cache/evict", json::object());
  ASSERT_EQ(ev.status, 200) << ev.raw;
  EXPECT_EQ(ev.body["retentions_ended"], 1);
  EXPECT_EQ(get(c, "/v1/cache/stats").body["index"]["entries"], 0);
  EXPECT_EQ(cached(post(c, "/v1/completions", completion(story("Lily")))), 0);

  const Reply bad = post(c, "/v1/completions", completion(story("Lily"), "forever"));
  EXPECT_EQ(bad.status, 400) << bad.raw;
  EXPECT_EQ(bad.body["error"]["param"], "prompt_cache_retention");
}

// With no memory share, the disk tier keeps the prefix: its entry carries the
// lifetime, survives the disk's own LRU while others go, and serves a hit after
// memory was emptied.
TEST(ServerLifetime, BeyondTheMemoryShareTheDiskKeepsIt) {
  const std::string dir = temp_dir() + "/lifetime-disk";
  ServeProcess srv({"-m", shared_path(kModel), "--threads", "1", "--kv-memory", "240KiB",
                    "--retention-share", "0", "--disk-cache", dir, "--disk-cache-size", "250KiB",
                    "--test-time-scale", "0.01"});
  auto c = srv.client();
  const Reply a = post(c, "/v1/completions", completion(story("Lily"), "in-memory"));
  ASSERT_EQ(a.status, 200) << a.raw;
  const int64_t n = a.body["usage"]["prompt_tokens"];
  const json& pa = a.body["promptcache"];
  ASSERT_EQ(pa["expires_tier"], "disk") << pa.dump();
  const int64_t kept = pa["retained_tokens"];
  EXPECT_EQ(kept, n / 16 * 16);  // whole pages of the prompt
  const double expires = pa["expires_at"];
  EXPECT_NEAR(expires, unix_now() + 3, 0.5);
  pressure(c, "");
  // The kept prefix is listed with its expiry (whole seconds: the disk keeps unix
  // seconds), as the chain of page links it is stored as (docs/tiers.md): their tokens
  // add up to it.
  auto disk_kept = [&] {
    json found;
    int64_t tokens = 0;
    const Reply listing = get(c, "/v1/cache/entries");
    for (const json& ns : listing.body["namespaces"])
      for (const json& e : ns["entries"])
        if (e["tier"] == "disk" && !e["expires_at"].is_null()) {
          found = e;
          tokens += e["tokens"].get<int64_t>();
        }
    if (!found.is_null()) found["tokens"] = tokens;
    return found;
  };
  json e = disk_kept();
  for (int i = 0; i < 40 && e.is_null(); ++i) {  // tier writes run in the background
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    e = disk_kept();
  }
  ASSERT_FALSE(e.is_null()) << get(c, "/v1/cache/entries").raw;
  EXPECT_EQ(e["tokens"], kept);
  EXPECT_NEAR(e["expires_at"].get<double>(), expires, 1.0);
  const json tiers = get(c, "/v1/cache/stats").body["tiers"];
  EXPECT_GT(tiers["disk"]["evicted"].get<int64_t>(), 0) << tiers.dump();
  // Memory emptied: the prompt comes back from the disk.
  ASSERT_EQ(post(c, "/v1/cache/evict", json::object()).status, 200);
  const Reply a2 = post(c, "/v1/completions", completion(story("Lily")));
  EXPECT_EQ(cached(a2), (n - 1) / 16 * 16) << a2.raw;  // a hit leaves the last token to compute
}

}  // namespace
}  // namespace pc::test
