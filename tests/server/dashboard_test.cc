// The cache dashboard and what it reads: entries by id (pin, unpin, evict), the
// request history and list, the per-request log line and startup summary, and the
// page itself in headless chromium (tests/server/dashboard, puppeteer-core).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "server_fixture.h"
#include "test_util.h"

namespace pc::test {
namespace {

std::string story(int n) {
  std::string p;
  for (int i = 0; i < n; ++i) p += "Lily had a red ball and a big dog named Max. ";
  return p;
}

json completion(const std::string& prompt) { return {{"prompt", prompt}, {"max_tokens", 3}, {"temperature", 0}}; }

std::vector<std::string> keyed_args(const std::vector<std::string>& extra = {}) {
  const std::string keys = temp_dir() + "/dashboard-keys.txt";
  std::ofstream(keys) << "key-a alice\nkey-b bob\n";
  std::vector<std::string> a = {"-m", shared_path("models/stories260K.gguf"), "--kv-memory", "64MiB",
                                "--api-keys", keys};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

// The log written so far, once `pattern` appears in it (up to 5 s).
std::string log_with(const ServeProcess& srv, const std::regex& pattern) {
  std::string text;
  for (int i = 0; i < 100; ++i) {
    text = read_file(srv.log_path());
    if (std::regex_search(text, pattern)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return text;
}

TEST(ServerDashboard, EntriesById) {
  ServeProcess srv(keyed_args());
  auto a = srv.client("key-a"), b = srv.client("key-b");
  ASSERT_EQ(post(a, "/v1/completions", completion(story(20))).status, 200);
  const Reply e = get(a, "/v1/cache/entries");
  ASSERT_EQ(e.body["namespaces"][0]["entries"].size(), 1u) << e.raw;
  const std::string id = std::to_string(e.body["namespaces"][0]["entries"][0]["id"].get<int>());
  const std::string base = "/v1/cache/entries/" + id;

  Reply p = post(a, base + "/pin", json::object());
  ASSERT_EQ(p.status, 200) << p.raw;
  EXPECT_EQ(p.body["namespace"], "alice");
  EXPECT_TRUE(get(a, "/v1/cache/entries").body["namespaces"][0]["entries"][0]["pinned"].get<bool>());
  Reply refused = post(a, base + "/evict", json::object());
  EXPECT_EQ(refused.status, 409) << refused.raw;
  EXPECT_EQ(refused.body["error"]["code"], "entry_pinned");
  EXPECT_EQ(post(b, base + "/unpin", json::object()).status, 404);  // not bob's
  EXPECT_EQ(post(a, base + "/unpin", json::object()).status, 200);
  EXPECT_EQ(post(a, base + "/unpin", json::object()).status, 404);  // no pin left
  Reply ev = post(a, base + "/evict", json::object());
  ASSERT_EQ(ev.status, 200) << ev.raw;
  EXPECT_GT(ev.body["freed_bytes"].get<int64_t>(), 0);
  EXPECT_TRUE(get(a, "/v1/cache/entries").body["namespaces"][0]["entries"].empty());
  EXPECT_EQ(post(a, "/v1/cache/entries/nonsense/pin", json::object()).status, 404);
  EXPECT_EQ(post(a, base + "/evict", {{"namespace", "bob"}}).status, 403);
}

TEST(ServerDashboard, HistoryAndRequestsAreTheCallersOwn) {
  ServeProcess srv(keyed_args());
  auto a = srv.client("key-a"), b = srv.client("key-b");
  Reply first = post(a, "/v1/completions", completion(story(20)));
  Reply second = post(a, "/v1/completions", completion(story(20)));
  ASSERT_EQ(second.status, 200);
  const int64_t prompt = second.body["usage"]["prompt_tokens"];
  const int64_t hit = second.body["usage"]["prompt_tokens_details"]["cached_tokens"];
  ASSERT_GT(hit, 0);

  Reply r = get(a, "/v1/cache/requests?limit=10");
  ASSERT_EQ(r.status, 200) << r.raw;
  ASSERT_EQ(r.body["data"].size(), 2u);
  const json& last = r.body["data"][0];  // newest first
  EXPECT_EQ(last["route"], "/v1/completions");
  EXPECT_EQ(last["namespace"], "alice");
  EXPECT_EQ(last["prompt_tokens"], prompt);
  EXPECT_EQ(last["cached_tokens"], hit);
  EXPECT_EQ(last["computed_tokens"], prompt - hit);
  EXPECT_EQ(last["generated_tokens"], 3);
  EXPECT_GT(last["ttft_seconds"].get<double>(), 0);
  EXPECT_GE(last["total_seconds"].get<double>(), last["ttft_seconds"].get<double>());
  EXPECT_EQ(r.body["data"][1]["cached_tokens"], 0);

  Reply h = get(a, "/v1/cache/history?seconds=60");
  ASSERT_EQ(h.status, 200) << h.raw;
  EXPECT_EQ(h.body["totals"]["requests"], 2);
  EXPECT_EQ(h.body["totals"]["cached_tokens"], hit);
  EXPECT_EQ(h.body["totals"]["prompt_tokens"], 2 * prompt);
  EXPECT_DOUBLE_EQ(h.body["totals"]["hit_rate"].get<double>(), double(hit) / double(2 * prompt));
  EXPECT_FALSE(h.body["totals"]["ttft_p95"].is_null());
  EXPECT_GE(h.body["seconds"].size(), 1u);
  int64_t per_second = 0;
  for (const json& s : h.body["seconds"]) per_second += s["requests"].get<int64_t>();
  EXPECT_EQ(per_second, 2);

  EXPECT_TRUE(get(b, "/v1/cache/requests").body["data"].empty());
  EXPECT_EQ(get(b, "/v1/cache/history").body["totals"]["requests"], 0);
  Reply bad = get(a, "/v1/cache/history?seconds=0");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.body["error"]["param"], "seconds");
  EXPECT_EQ(get(a, "/v1/cache/requests?limit=abc").body["error"]["param"], "limit");
}

TEST(ServerDashboard, LogsStartupSummaryAndOneLinePerRequest) {
  ServeProcess srv({"-m", shared_path("models/stories260K.gguf"), "--kv-memory", "64MiB"});
  auto c = srv.client();
  Reply r = post(c, "/v1/completions", completion(story(8)));
  ASSERT_EQ(r.status, 200);
  const int64_t prompt = r.body["usage"]["prompt_tokens"];
  EXPECT_EQ(post(c, "/v1/completions", {{"prompt", 5}}).status, 400);
  ASSERT_EQ(get(c, "/health").status, 200);
  const std::regex line("POST /v1/completions 200 prompt=" + std::to_string(prompt) +
                        " cached=0 approximate=0 computed=" + std::to_string(prompt) +
                        " generated=3 ttft=[0-9.]+ms total=[0-9.]+ms");
  const std::string log = log_with(srv, line);
  EXPECT_TRUE(std::regex_search(log, line)) << log;
  EXPECT_TRUE(std::regex_search(log, std::regex("POST /v1/completions 400 total=[0-9.]+ms"))) << log;
  EXPECT_EQ(log.find("GET /health"), std::string::npos) << log;  // monitoring reads: debug
  // What is being loaded, said before the load, and the startup summary: model,
  // load time, architecture, context, KV capacity, template, tiers, threads, kernels.
  EXPECT_TRUE(std::regex_search(log, std::regex("promptcache: loading .*stories260K.gguf \\([0-9]+\\.[0-9]{2} MiB\\)"))) << log;
  EXPECT_TRUE(std::regex_search(log, std::regex("model stories260K \\(.*stories260K.gguf, loaded in [0-9]+\\.[0-9]{2} s\\), "
                                                "architecture llama, "
                                                "[0-9]+ layers, context [0-9]+ tokens, KV capacity [0-9]+ tokens "
                                                "\\(64 MiB, f16\\), template (none|gguf), tiers: memory, threads 2, "
                                                "kernels [a-z0-9_]+")))
      << log;
}

TEST(ServerDashboard, LogLevelSelectsLines) {
  ServeProcess quiet({"-m", shared_path("models/stories260K.gguf"), "--kv-memory", "64MiB", "--log-level", "warn"});
  auto q = quiet.client();
  ASSERT_EQ(post(q, "/v1/completions", completion(story(4))).status, 200);
  EXPECT_EQ(post(q, "/v1/completions", {{"prompt", 5}}).status, 400);
  const std::string qlog = log_with(quiet, std::regex("POST /v1/completions 400"));
  EXPECT_NE(qlog.find("POST /v1/completions 400"), std::string::npos) << qlog;
  EXPECT_EQ(qlog.find("POST /v1/completions 200"), std::string::npos) << qlog;
  EXPECT_EQ(qlog.find("architecture"), std::string::npos) << qlog;

  ServeProcess loud({"-m", shared_path("models/stories260K.gguf"), "--kv-memory", "64MiB", "--log-level", "debug"});
  auto l = loud.client();
  ASSERT_EQ(get(l, "/health").status, 200);
  const std::string llog = log_with(loud, std::regex("GET /health 200"));
  EXPECT_NE(llog.find("GET /health 200"), std::string::npos) << llog;
}

TEST(ServerDashboard, PageInHeadlessChromium) {
  const std::filesystem::path dir = std::filesystem::path(__FILE__).parent_path() / "dashboard";
  ASSERT_EQ(std::system("node --version > /dev/null 2>&1"), 0) << "node is not installed (scripts/setup.sh)";
  ASSERT_TRUE(std::filesystem::exists("/usr/bin/chromium")) << "chromium is not installed (scripts/setup.sh)";
  ASSERT_TRUE(std::filesystem::exists(dir / "node_modules" / "puppeteer-core"))
      << "run `npm ci` in " << dir.string() << " (scripts/test.sh does)";
  ServeProcess srv(keyed_args());
  // The page is public; everything it shows comes from the keyed JSON routes.
  auto anon = srv.client();
  auto page = anon.Get("/dashboard");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_NE(page->get_header_value("Content-Type").find("text/html"), std::string::npos);
  EXPECT_EQ(get(anon, "/v1/cache/entries").status, 401);
  // The screenshot is the test's artifact, beside the test binary (the build dir).
  const std::string shot =
      (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "dashboard.png").string();
  std::filesystem::remove(shot);
  const std::string cmd = "cd '" + dir.string() + "' && PC_SERVER_URL=" + srv.url() +
                          " PC_KEY_A=key-a PC_KEY_B=key-b PC_SCREENSHOT='" + shot +
                          "' timeout 120 node dashboard_test.mjs 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  EXPECT_GT(std::filesystem::exists(shot) ? std::filesystem::file_size(shot) : 0, 10000u) << shot;
}

}  // namespace
}  // namespace pc::test
