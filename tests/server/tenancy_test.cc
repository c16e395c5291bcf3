// Tenants that cannot touch or watch each other, and cache salts that cannot
// exhaust the server: cache-admin scope with --api-keys and --admin-tenant,
// per-tenant /v1/cache/stats, /metrics labels and --metrics-key, the cache_salt
// bound, and no state kept for a salt once its entries are gone. A real
// `promptcache serve` on loopback.
#include <gtest/gtest.h>

#include <fstream>

#include "server_fixture.h"
#include "test_util.h"

namespace pc::test {
namespace {

std::string story(int n) {
  std::string p;
  for (int i = 0; i < n; ++i) p += "Lily had a red ball and a big dog named Max. ";
  return p;
}

json completion(const std::string& prompt, const std::string& salt = "") {
  json r = {{"prompt", prompt}, {"max_tokens", 2}, {"temperature", 0}};
  if (!salt.empty()) r["cache_salt"] = salt;
  return r;
}

int cached(const Reply& r) { return r.body["usage"]["prompt_tokens_details"]["cached_tokens"]; }

size_t entry_count(const Reply& entries) {
  size_t n = 0;
  for (const json& ns : entries.body["namespaces"]) n += ns["entries"].size();
  return n;
}

// Keys for alice, bob and the operator (tenant "ops", --admin-tenant).
std::vector<std::string> keyed_args(const std::vector<std::string>& extra = {}) {
  const std::string keys = temp_dir() + "/tenancy-keys.txt";
  std::ofstream(keys) << "key-a alice\nkey-b bob\nkey-ops ops\n";
  std::vector<std::string> a = {"-m", shared_path("models/stories260K.gguf"), "--kv-memory", "64MiB",
                                "--api-keys", keys, "--admin-tenant", "ops"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

TEST(ServerTenancy, EvictAndPinActOnTheCallersNamespacesOnly) {
  ServeProcess srv(keyed_args());
  auto a = srv.client("key-a"), b = srv.client("key-b"), ops = srv.client("key-ops");
  ASSERT_EQ(post(a, "/v1/completions", completion(story(20))).status, 200);
  ASSERT_EQ(post(a, "/v1/completions", completion(story(20), "x")).status, 200);
  ASSERT_EQ(entry_count(get(a, "/v1/cache/entries")), 2u);

  // Bob's evict-everything frees nothing of alice's.
  Reply ev = post(b, "/v1/cache/evict", json::object());
  ASSERT_EQ(ev.status, 200) << ev.raw;
  EXPECT_EQ(ev.body["freed_bytes"], 0);
  EXPECT_FALSE(ev.body.contains("memory"));  // the shared pool is the admin's to see
  EXPECT_EQ(entry_count(get(a, "/v1/cache/entries")), 2u);
  EXPECT_GT(cached(post(a, "/v1/completions", completion(story(20)))), 100);
  // Bob cannot name alice's namespace, nor see or touch her entries by id.
  Reply pin = post(b, "/v1/cache/pin", {{"prompt", story(20)}, {"namespace", "alice"}});
  EXPECT_EQ(pin.status, 403) << pin.raw;
  EXPECT_EQ(pin.body["error"]["param"], "namespace");
  const Reply mine = get(a, "/v1/cache/entries");
  const std::string id = std::to_string(mine.body["namespaces"][0]["entries"][0]["id"].get<int>());
  EXPECT_EQ(post(b, "/v1/cache/entries/" + id + "/evict", json::object()).status, 404);
  EXPECT_EQ(post(b, "/v1/cache/entries/" + id + "/pin", json::object()).status, 404);
  EXPECT_EQ(entry_count(get(b, "/v1/cache/entries")), 0u);

  // Alice's own evict frees hers; the admin sees and evicts everyone's.
  ASSERT_EQ(post(a, "/v1/completions", completion(story(10))).status, 200);
  ASSERT_EQ(post(b, "/v1/completions", completion(story(12))).status, 200);
  Reply ea = post(a, "/v1/cache/evict", json::object());
  EXPECT_GT(ea.body["freed_bytes"].get<int64_t>(), 0) << ea.raw;
  EXPECT_EQ(entry_count(get(a, "/v1/cache/entries")), 0u);
  EXPECT_EQ(entry_count(get(b, "/v1/cache/entries")), 1u);
  Reply all = get(ops, "/v1/cache/entries");
  ASSERT_EQ(all.status, 200);
  EXPECT_EQ(entry_count(all), 1u);
  bool bob_listed = false;
  for (const json& ns : all.body["namespaces"]) bob_listed = bob_listed || ns["namespace"] == "bob";
  EXPECT_TRUE(bob_listed) << all.raw;
  EXPECT_EQ(post(ops, "/v1/cache/pin", {{"prompt", story(12)}, {"namespace", "bob"}}).status, 200);
  EXPECT_EQ(post(ops, "/v1/cache/unpin", {{"prompt", story(12)}, {"namespace", "bob"}}).status, 200);
  Reply eo = post(ops, "/v1/cache/evict", json::object());
  EXPECT_TRUE(eo.body.contains("memory"));
  EXPECT_EQ(entry_count(get(b, "/v1/cache/entries")), 0u);
}

TEST(ServerTenancy, StatsAreTheCallersOwn) {
  ServeProcess srv(keyed_args());
  auto a = srv.client("key-a"), b = srv.client("key-b"), ops = srv.client("key-ops");
  int64_t prompt = 0, hit = 0;
  for (int i = 0; i < 2; ++i) {
    Reply r = post(a, "/v1/completions", completion(story(20)));
    ASSERT_EQ(r.status, 200);
    prompt += r.body["usage"]["prompt_tokens"].get<int64_t>();
    hit += cached(r);
  }
  Reply sa = get(a, "/v1/cache/stats"), sb = get(b, "/v1/cache/stats"), so = get(ops, "/v1/cache/stats");
  ASSERT_EQ(sa.status, 200) << sa.raw;
  EXPECT_EQ(sa.body["tenant"], "alice");
  EXPECT_EQ(sa.body["engine"]["requests"], 2);
  EXPECT_EQ(sa.body["engine"]["prompt_tokens"], prompt);
  EXPECT_EQ(sa.body["engine"]["cached_tokens"], hit);
  EXPECT_DOUBLE_EQ(sa.body["engine"]["hit_rate"].get<double>(), double(hit) / double(prompt));
  EXPECT_EQ(sa.body["index"]["entries"], 1);
  EXPECT_GT(sa.body["index"]["bytes"].get<int64_t>(), 0);
  // Bob's figures do not move with alice's work; the global ones are not his to see.
  EXPECT_EQ(sb.body["engine"]["requests"], 0);
  EXPECT_EQ(sb.body["engine"]["prompt_tokens"], 0);
  EXPECT_EQ(sb.body["index"]["entries"], 0);
  EXPECT_FALSE(sb.body["memory"].contains("pages")) << sb.raw;
  EXPECT_FALSE(sb.body.contains("sequences"));
  // The admin tenant gets the server's figures.
  EXPECT_EQ(so.body["engine"]["prompt_tokens"], prompt);
  EXPECT_TRUE(so.body["memory"].contains("pages"));
  EXPECT_EQ(so.body["requests"]["requests"], 2);
}

TEST(ServerTenancy, MetricsHideTenantsAndSaltsAndCanNeedAKey) {
  ServeProcess srv(keyed_args({"--metrics-key", "scrape-secret"}));
  auto a = srv.client("key-a");
  ASSERT_EQ(post(a, "/v1/completions", completion(story(20), "salt-value-42")).status, 200);
  auto anon = srv.client();
  Reply denied = get(anon, "/metrics");
  EXPECT_EQ(denied.status, 401);
  EXPECT_EQ(denied.raw.find("promptcache_"), std::string::npos);
  auto scraper = srv.client("scrape-secret");
  auto m = scraper.Get("/metrics");
  ASSERT_TRUE(m);
  ASSERT_EQ(m->status, 200);
  EXPECT_EQ(m->body.find("salt-value-42"), std::string::npos);
  EXPECT_EQ(m->body.find("alice"), std::string::npos);
  // The label is the namespace's keyed hash, which the cache API gives its owner.
  const Reply e = get(a, "/v1/cache/entries");
  std::string label;
  for (const json& ns : e.body["namespaces"])
    if (ns["namespace"] == "alice/salt:salt-value-42") label = ns["metrics_label"];
  ASSERT_EQ(label.size(), 15u) << e.raw;  // "ns-" + 12 hex digits
  EXPECT_NE(m->body.find("promptcache_cache_bytes{namespace=\"" + label + "\",tier=\"memory\"}"), std::string::npos)
      << m->body.substr(0, 4000);
  // A key for the API is not the scrape key.
  EXPECT_EQ(get(a, "/metrics").status, 401);
}

// With API keys, the server's load (running, queued, Redis state, /metrics) is the
// operator's to see: a tenant's /health says only whether the server is up.
TEST(ServerTenancy, HealthAndMetricsDetailAreTheOperatorsWithKeys) {
  ServeProcess srv(keyed_args());
  auto a = srv.client("key-a"), anon = srv.client(), ops = srv.client("key-ops");
  ASSERT_EQ(post(a, "/v1/completions", completion(story(4))).status, 200);
  for (httplib::Client* c : {&a, &anon}) {
    const Reply h = get(*c, "/health");
    EXPECT_EQ(h.status, 200);
    EXPECT_EQ(h.body["status"], "ok");
    EXPECT_FALSE(h.body.contains("running")) << h.raw;
    EXPECT_FALSE(h.body.contains("queued")) << h.raw;
    const Reply m = get(*c, "/metrics");
    EXPECT_EQ(m.status, 401);
    EXPECT_EQ(m.raw.find("promptcache_"), std::string::npos);
  }
  const Reply h = get(ops, "/health");
  EXPECT_EQ(h.body["running"], 0) << h.raw;
  EXPECT_TRUE(h.body.contains("queued")) << h.raw;
  auto m = ops.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, 200);
  EXPECT_NE(m->body.find("promptcache_requests_total"), std::string::npos);
}

TEST(ServerTenancy, HealthDetailFullShowsLoadToAnyone) {
  ServeProcess srv(keyed_args({"--health-detail", "full"}));
  auto anon = srv.client();
  const Reply h = get(anon, "/health");
  EXPECT_EQ(h.body["running"], 0) << h.raw;
}

TEST(ServerTenancy, SaltLengthIsBoundedAndSaltsLeaveNoState) {
  ServeProcess srv({"-m", shared_path("models/stories260K.gguf"), "--kv-memory", "64MiB"});
  auto c = srv.client();
  Reply too_long = post(c, "/v1/completions", completion(story(4), std::string(257, 's')));
  EXPECT_EQ(too_long.status, 400);
  EXPECT_EQ(too_long.body["error"]["param"], "cache_salt");
  EXPECT_EQ(post(c, "/v1/completions", completion(story(4), std::string(256, 's'))).status, 200);
  Reply chat = post(c, "/v1/cache/pin", {{"prompt", story(4)}, {"cache_salt", std::string(300, 'p')}});
  EXPECT_EQ(chat.status, 400);
  EXPECT_EQ(chat.body["error"]["param"], "cache_salt");
  EXPECT_EQ(get(c, "/v1/schemas?cache_salt=" + std::string(257, 'q')).status, 400);

  // Distinct salts, then every entry evicted: no namespace, listing or series remains.
  for (int i = 0; i < 6; ++i)
    ASSERT_EQ(post(c, "/v1/completions", completion(story(4), "unique-salt-" + std::to_string(i))).status, 200);
  ASSERT_EQ(get(c, "/v1/schemas?cache_salt=listed-only").status, 200);
  EXPECT_EQ(get(c, "/v1/cache/entries").body["namespaces"].size(), 8u);  // "", 7 salts
  ASSERT_EQ(post(c, "/v1/cache/evict", json::object()).status, 200);
  Reply after = get(c, "/v1/cache/entries");
  ASSERT_EQ(after.body["namespaces"].size(), 1u) << after.raw;  // the shared one, empty
  EXPECT_EQ(after.body["namespaces"][0]["namespace"], "");
  Reply ns = get(c, "/v1/cache/namespaces");
  EXPECT_EQ(ns.body["namespaces"].size(), 0u) << ns.raw;
  auto m = c.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->body.find("promptcache_cache_bytes{namespace="), std::string::npos);
}

}  // namespace
}  // namespace pc::test
