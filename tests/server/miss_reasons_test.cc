// Miss reasons over the HTTP API: when a chat request's exact prefix stops short of the
// request before it, `promptcache.miss` says what changed (tools, system prompt, which
// message and how, a template re-render, an unknown reply, eviction) and what it cost.
// Each case runs in its own cache_salt namespace.
#include <gtest/gtest.h>

#include "server_fixture.h"

namespace pc::test {
namespace {

class MissReasons : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    srv_ = new ServeProcess({"-m", shared_path("models/stories260K.gguf"), "--chat-template-file",
                             shared_path("templates-2026/Qwen-Qwen2.5-7B-Instruct.jinja"), "--kv-memory", "64MiB"});
    qwen3_ = new ServeProcess({"-m", shared_path("models/stories260K.gguf"), "--chat-template-file",
                               shared_path("templates-2026/Qwen-Qwen3-0.6B.jinja"), "--kv-memory", "64MiB"});
  }
  static void TearDownTestSuite() {
    delete srv_;
    delete qwen3_;
  }
  static ServeProcess* srv_;
  static ServeProcess* qwen3_;
  httplib::Client c = srv_->client();

  static json msg(const std::string& role, const std::string& content) { return {{"role", role}, {"content", content}}; }
  static json tool(const std::string& name, const std::string& what) {
    return {{"type", "function"},
            {"function", {{"name", name}, {"description", what}, {"parameters", {{"type", "object"}, {"properties", json::object()}}}}}};
  }
  Reply chat(httplib::Client& cl, const std::string& salt, const std::vector<json>& messages,
             const std::vector<json>& tools = {}) {
    json body = {{"messages", json(messages)}, {"max_tokens", 3}, {"temperature", 0}, {"cache_salt", salt}};
    if (!tools.empty()) body["tools"] = json(tools);
    Reply r = post(cl, "/v1/chat/completions", body);
    EXPECT_EQ(r.status, 200) << r.raw;
    return r;
  }
  // The change's cost is the tokens of unchanged parts after the divergence; each of
  // those parts is a block the first request cached, so it is also what reusing moved
  // blocks could save. The exact prefix stops exactly at the divergence.
  static void expect_structural(const Reply& r, const std::string& reason) {
    json p = r.body["promptcache"];  // a copy: missing fields read as null
    ASSERT_TRUE(p["miss"].is_object()) << r.raw;
    EXPECT_EQ(p["miss"]["reason"], reason) << r.raw;
    EXPECT_EQ(p["reason"], reason);
    EXPECT_EQ(p["cached_tokens"], p["diverged_at"]) << r.raw;
    EXPECT_GT(p["miss"]["tokens"].get<int64_t>(), 0) << r.raw;
    EXPECT_EQ(p["miss"]["tokens"], p["reusable_tokens"]) << r.raw;
    EXPECT_LT(p["miss"]["tokens"].get<int64_t>(), p["fresh_tokens"].get<int64_t>()) << r.raw;
  }
};
ServeProcess* MissReasons::srv_ = nullptr;
ServeProcess* MissReasons::qwen3_ = nullptr;

const char* kSys = "You are a helpful assistant who tells short stories about animals.";
const char* kA = "Tell me about a little dog named Max who liked to run.";
const char* kB = "Now tell me about a big cat named Tom who slept all day.";
const char* kC = "And one about a bird that sang in the morning sun.";

TEST_F(MissReasons, ToolsChanged) {
  const json t0 = tool("get_weather", "Weather for a city"), t1 = tool("get_time", "The time in a city");
  chat(c, "tools", {msg("user", kA)}, {t0, t1});
  const Reply r = chat(c, "tools", {msg("user", kA)}, {tool("get_weather", "Weather for a town"), t1});
  expect_structural(r, "tools_changed");
  EXPECT_EQ(r.body["promptcache"]["miss"]["tool"], 0);
}

TEST_F(MissReasons, SystemChanged) {
  chat(c, "system", {msg("system", kSys), msg("user", kA)});
  const Reply r = chat(c, "system", {msg("system", "You are a terse assistant."), msg("user", kA)});
  expect_structural(r, "system_changed");
  EXPECT_EQ(r.body["promptcache"]["miss"]["message"], 0);
}

TEST_F(MissReasons, MessagesEditedInsertedRemovedReordered) {
  struct Case {
    const char* salt;
    std::vector<json> second;
    const char* change;
    int message;
  };
  const std::vector<json> first = {msg("system", kSys), msg("user", kA), msg("user", kB), msg("user", kC)};
  const std::vector<Case> cases = {
      {"edit", {msg("system", kSys), msg("user", "Tell me about a puppy."), msg("user", kB), msg("user", kC)}, "edited", 1},
      {"insert", {msg("system", kSys), msg("user", "Hello!"), msg("user", kA), msg("user", kB), msg("user", kC)}, "inserted", 1},
      {"remove", {msg("system", kSys), msg("user", kB), msg("user", kC)}, "removed", 1},
      {"reorder", {msg("system", kSys), msg("user", kB), msg("user", kA), msg("user", kC)}, "reordered", 1},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.change);
    chat(c, k.salt, first);
    const Reply r = chat(c, k.salt, k.second);
    expect_structural(r, "messages_changed");
    EXPECT_EQ(r.body["promptcache"]["miss"]["change"], k.change) << r.raw;
    EXPECT_EQ(r.body["promptcache"]["miss"]["message"], k.message);
  }
}

// Qwen3 drops an earlier turn's reasoning once a later user message follows: the same
// message renders differently.
TEST_F(MissReasons, TemplateRerender) {
  httplib::Client q = qwen3_->client();
  const json a1 = msg("assistant", "<think>\nThe user wants a dog story.\n</think>\n\nMax ran fast.");
  chat(q, "rerender", {msg("user", kA), a1});
  const Reply r = chat(q, "rerender", {msg("user", kA), a1, msg("user", kB)});
  json p = r.body["promptcache"];
  EXPECT_EQ(p["reason"], "template_rerender") << r.raw;
  EXPECT_EQ(p["cached_tokens"], p["diverged_at"]) << r.raw;
  EXPECT_EQ(p["miss"]["message"], json(nullptr));
  EXPECT_GE(p["miss"]["tokens"].get<int64_t>(), 0);
}

TEST_F(MissReasons, UnknownReply) {
  chat(c, "unknown", {msg("user", kA)});
  const Reply r = chat(c, "unknown", {msg("user", kA), msg("assistant", "A reply this server never wrote."), msg("user", kB)});
  json p = r.body["promptcache"];
  EXPECT_EQ(p["reason"], "unknown_reply") << r.raw;
  EXPECT_GT(p["miss"]["tokens"].get<int64_t>(), 0) << r.raw;
  EXPECT_LT(p["miss"]["tokens"].get<int64_t>(), p["fresh_tokens"].get<int64_t>());
}

// The next turn should hit the whole previous turn; after eviction it costs exactly
// what a control conversation (same turns, not evicted) hits.
TEST_F(MissReasons, Evicted) {
  const Reply first = chat(c, "evicted", {msg("user", kA)});
  const std::string reply = first.body["choices"][0]["message"]["content"];
  const std::vector<json> second = {msg("user", kA), msg("assistant", reply), msg("user", kB)};
  chat(c, "control", {msg("user", kA)});
  const Reply control = chat(c, "control", second);
  ASSERT_EQ(control.body["promptcache"]["reason"], json(nullptr)) << control.raw;
  ASSERT_EQ(post(c, "/v1/cache/evict", json::object()).status, 200);
  const Reply r = chat(c, "evicted", second);
  json p = r.body["promptcache"];
  EXPECT_EQ(p["reason"], "evicted") << r.raw;
  EXPECT_EQ(p["cached_tokens"], 0);
  EXPECT_EQ(p["miss"]["tokens"], control.body["promptcache"]["cached_tokens"]) << r.raw;
  const Reply metrics = get(c, "/metrics");
  EXPECT_NE(metrics.raw.find("promptcache_cache_miss_tokens_total{reason=\"evicted\"}"), std::string::npos);
}

// Approximate reuse happens only when asked, says so, and its usage adds up; an exact
// request afterwards answers as a cold server does. Bad values are 400s naming the field.
TEST_F(MissReasons, ApproximateReuseOnlyWhenAsked) {
  const std::vector<json> first = {msg("system", kSys), msg("user", kA), msg("user", kB), msg("user", kC)};
  const std::vector<json> moved = {msg("system", kSys), msg("user", kB), msg("user", kA), msg("user", kC)};
  const Reply cold = chat(c, "approx-cold", moved);
  chat(c, "approx", first);
  json body = {{"messages", json(moved)}, {"max_tokens", 3}, {"temperature", 0}, {"cache_salt", "approx"},
               {"cache_reuse", "approximate"}, {"cache_reuse_budget", 0.0}};
  const Reply r = post(c, "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.raw;
  json p = r.body["promptcache"];
  EXPECT_EQ(p["cache_reuse"]["mode"], "approximate") << r.raw;
  EXPECT_EQ(p["cache_reuse"]["budget"], 0.0);
  EXPECT_GT(p["approximate_tokens"].get<int64_t>(), 0) << r.raw;
  const int64_t prompt = r.body["usage"]["prompt_tokens"];
  EXPECT_EQ(prompt, p["cached_tokens"].get<int64_t>() + p["approximate_tokens"].get<int64_t>() +
                        p["recomputed_tokens"].get<int64_t>() + p["fresh_tokens"].get<int64_t>());
  const Reply exact = chat(c, "approx", moved);
  json q = exact.body["promptcache"];
  EXPECT_EQ(q["cache_reuse"]["mode"], "exact");
  EXPECT_EQ(q["approximate_tokens"], 0);
  EXPECT_EQ(exact.body["choices"][0]["message"]["content"], cold.body["choices"][0]["message"]["content"]);
  body["cache_reuse"] = "fast";
  Reply bad = post(c, "/v1/chat/completions", body);
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.body["error"]["param"], "cache_reuse");
  body["cache_reuse"] = "approximate";
  body["cache_reuse_budget"] = 2;
  bad = post(c, "/v1/chat/completions", body);
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.body["error"]["param"], "cache_reuse_budget");
}

// The recompute policy is chosen per request and reported; an unknown one is a 400
// naming the field.
TEST_F(MissReasons, ReusePolicyField) {
  const std::vector<json> first = {msg("system", kSys), msg("user", kA), msg("user", kB), msg("user", kC)};
  const std::vector<json> moved = {msg("system", kSys), msg("user", kB), msg("user", kA), msg("user", kC)};
  chat(c, "policy", first);
  json body = {{"messages", json(moved)}, {"max_tokens", 2}, {"temperature", 0}, {"cache_salt", "policy"},
               {"cache_reuse", "approximate"}, {"cache_reuse_policy", "deviation"}, {"cache_reuse_budget", 0.2}};
  const Reply r = post(c, "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.raw;
  const json p = r.body["promptcache"];
  EXPECT_EQ(p["cache_reuse"]["policy"], "deviation") << r.raw;
  EXPECT_GT(p["recomputed_tokens"].get<int64_t>(), 0) << r.raw;
  EXPECT_GT(p["checked_tokens"].get<int64_t>(), 0) << r.raw;
  body["cache_reuse_policy"] = "cacheblend";
  const Reply bad = post(c, "/v1/chat/completions", body);
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.body["error"]["param"], "cache_reuse_policy") << bad.raw;
}

}  // namespace
}  // namespace pc::test
