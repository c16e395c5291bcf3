// Blocks in the disk tier through real `promptcache serve` processes: after a restart,
// a chat request whose messages moved reuses them approximately from --disk-cache (it
// asked for it), the listing shows the block entries, another namespace reuses nothing,
// and an exact request still answers as a cold server does.
#include <gtest/gtest.h>

#include "server_fixture.h"
#include "test_util.h"

namespace pc::test {
namespace {

json msg(const std::string& role, const std::string& content) { return {{"role", role}, {"content", content}}; }

const char* kSys = "You are a storyteller who tells short and happy stories about animals.";
const char* kA = "Tell me about a little dog named Max who liked to run in the big green park.";
const char* kB = "Now tell me about a small cat named Lily who loved to sleep in the warm sun.";
const char* kC = "Which of the two would you rather have as a friend, and why?";

std::vector<std::string> args(const std::string& dir) {
  return {"-m", shared_path("models/stories260K.gguf"), "--chat-template-file",
          shared_path("templates-2026/Qwen-Qwen2.5-7B-Instruct.jinja"), "--kv-memory", "64MiB", "--disk-cache", dir};
}

json body(const std::vector<json>& messages, const std::string& salt, bool approximate) {
  json b = {{"messages", json(messages)}, {"max_tokens", 3}, {"temperature", 0}, {"cache_salt", salt}};
  if (approximate) {
    b["cache_reuse"] = "approximate";
    b["cache_reuse_budget"] = 0.0;
  }
  return b;
}

TEST(ServerTierBlocks, RestartedServerReusesMovedMessagesFromDisk) {
  const std::string dir = temp_dir() + "/disk-cache";
  const std::vector<json> first = {msg("system", kSys), msg("user", kA), msg("user", kB), msg("user", kC)};
  const std::vector<json> moved = {msg("system", kSys), msg("user", kB), msg("user", kA), msg("user", kC)};
  std::string cold;
  {
    ServeProcess srv(args(dir));
    auto c = srv.client();
    const Reply r = post(c, "/v1/chat/completions", body(first, "s", false));
    ASSERT_EQ(r.status, 200) << r.raw;
    // A cold answer to the moved request, in a namespace nothing else uses.
    const Reply k = post(c, "/v1/chat/completions", body(moved, "cold", false));
    ASSERT_EQ(k.status, 200) << k.raw;
    cold = k.body["choices"][0]["message"]["content"];
  }  // SIGTERM: the tier writes finish first

  ServeProcess srv(args(dir));
  auto c = srv.client();
  // Another namespace finds none of them.
  const Reply other = post(c, "/v1/chat/completions", body(moved, "someone-else", true));
  ASSERT_EQ(other.status, 200) << other.raw;
  EXPECT_EQ(other.body["promptcache"]["approximate_tokens"], 0) << other.raw;

  const Reply r = post(c, "/v1/chat/completions", body(moved, "s", true));
  ASSERT_EQ(r.status, 200) << r.raw;
  const json& p = r.body["promptcache"];
  EXPECT_EQ(p["cache_reuse"]["mode"], "approximate");
  EXPECT_GT(p["approximate_tokens"].get<int64_t>(), 20) << r.raw;
  EXPECT_EQ(r.body["usage"]["prompt_tokens"].get<int64_t>(),
            p["cached_tokens"].get<int64_t>() + p["approximate_tokens"].get<int64_t>() +
                p["recomputed_tokens"].get<int64_t>() + p["fresh_tokens"].get<int64_t>());
  const Reply stats = get(c, "/v1/cache/stats");
  EXPECT_GE(stats.body["tiers"]["block_loads"].get<int64_t>(), 1) << stats.raw;

  // Block entries are listed as such (in the namespaces memory knows).
  const Reply list = get(c, "/v1/cache/entries");
  ASSERT_EQ(list.status, 200);
  int blocks = 0;
  for (const json& ns : list.body["namespaces"])
    for (const json& e : ns["entries"]) blocks += e.value("kind", "") == "block";
  EXPECT_GE(blocks, 1) << list.raw;

  // Exact requests never see approximately built KV.
  const Reply exact = post(c, "/v1/chat/completions", body(moved, "s", false));
  ASSERT_EQ(exact.status, 200);
  EXPECT_EQ(exact.body["promptcache"]["approximate_tokens"], 0);
  EXPECT_EQ(exact.body["choices"][0]["message"]["content"], cold);
}

}  // namespace
}  // namespace pc::test
