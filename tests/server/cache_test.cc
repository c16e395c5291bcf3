// Conversation-exact caching, template divergence, tenant isolation, the cache
// API and client disconnects, against a real `promptcache serve` process.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <thread>

#include "server_fixture.h"
#include "test_util.h"

namespace pc::test {
namespace {

const std::string kModel = "models/stories260K.gguf";

std::vector<std::string> chatml_args() {
  return {"-m", shared_path(kModel), "--chat-template-file",
          shared_path("templates-2026/Qwen-Qwen2.5-7B-Instruct.jinja"), "--kv-memory", "64MiB"};
}

json chat_request(const json& messages, int max_tokens) {
  return {{"messages", messages}, {"max_tokens", max_tokens}, {"temperature", 0}};
}

int cached(const Reply& r) { return r.body["usage"]["prompt_tokens_details"]["cached_tokens"]; }

double metric(httplib::Client& c, const std::string& name_and_labels) {
  auto r = c.Get("/metrics");
  const size_t at = r->body.find("\n" + name_and_labels + " ");
  if (at == std::string::npos) return 0;
  return std::stod(r->body.substr(at + name_and_labels.size() + 2));
}

// Turn k's cached tokens cover turns 1..k-1 whole, generated replies included.
TEST(ServerCache, TenTurnChatHitsAllHistory) {
  ServeProcess srv(chatml_args());
  auto c = srv.client();
  json messages = json::array({{{"role", "system"}, {"content", "You tell short stories."}}});
  int prev_prompt = 0, prev_completion = 0;
  for (int k = 1; k <= 10; ++k) {
    messages.push_back({{"role", "user"}, {"content", "Tell me about day " + std::to_string(k) + "."}});
    // Alternate streamed and whole turns, and max_tokens (some turns end at EOS).
    json req = chat_request(messages, k % 3 == 0 ? 40 : 12);
    std::string content;
    Reply r;
    if (k % 2 == 0) {
      req["stream"] = true;
      req["stream_options"] = {{"include_usage", true}};
      auto s = c.Post("/v1/chat/completions", req.dump(), "application/json");
      ASSERT_TRUE(s);
      for (auto& e : sse_events(s->body)) {
        if (e == "[DONE]") continue;
        json j = json::parse(e);
        if (j.contains("usage")) {
          r.body = j;
          continue;
        }
        if (j["choices"][0]["delta"].contains("content"))
          content += j["choices"][0]["delta"]["content"].get<std::string>();
      }
      r.status = s->status;
    } else {
      r = post(c, "/v1/chat/completions", req);
      content = r.body["choices"][0]["message"]["content"];
    }
    ASSERT_EQ(r.status, 200) << r.raw;
    const int prompt = r.body["usage"]["prompt_tokens"];
    const int completion = r.body["usage"]["completion_tokens"];
    if (k > 1) {
      // Every token of earlier turns is cached; only the last sampled token of the
      // previous reply may lack KV (it was never fed back to the model).
      EXPECT_GE(cached(r), prev_prompt + prev_completion - 1) << "turn " << k;
      EXPECT_LT(cached(r), prompt);
      EXPECT_EQ(r.body["promptcache"]["spliced_replies"], k - 1);
      EXPECT_TRUE(r.body["promptcache"]["reason"].is_null()) << r.body.dump();
    }
    prev_prompt = prompt;
    prev_completion = completion;
    messages.push_back({{"role", "assistant"}, {"content", content}});
  }
}

// Qwen3 renders an earlier assistant turn without the empty <think> block its
// generation prompt had: the cached conversation diverges there, is reported,
// and everything before still hits.
TEST(ServerCache, Qwen3DivergenceReportedAndPrefixStillHits) {
  ServeProcess srv({"-m", shared_path(kModel), "--chat-template-file",
                    shared_path("templates-2026/Qwen-Qwen3-0.6B.jinja")});
  auto c = srv.client();
  json messages = json::array({{{"role", "user"}, {"content", "Tell me a story about a cat."}}});
  json req = chat_request(messages, 16);
  req["chat_template_kwargs"] = {{"enable_thinking", false}};
  Reply t1 = post(c, "/v1/chat/completions", req);
  ASSERT_EQ(t1.status, 200) << t1.raw;
  messages.push_back({{"role", "assistant"}, {"content", t1.body["choices"][0]["message"]["content"]}});
  messages.push_back({{"role", "user"}, {"content", "And then?"}});
  req["messages"] = messages;
  Reply t2 = post(c, "/v1/chat/completions", req);
  ASSERT_EQ(t2.status, 200) << t2.raw;
  const json& pc = t2.body["promptcache"];
  EXPECT_EQ(pc["reason"], "template_rerender") << pc.dump();
  ASSERT_TRUE(pc["diverged_at"].is_number()) << pc.dump();
  const int at = pc["diverged_at"];
  EXPECT_GT(at, 10);
  EXPECT_LT(at, t1.body["usage"]["prompt_tokens"].get<int>());
  EXPECT_EQ(cached(t2), at);  // everything before the divergence hits
  EXPECT_EQ(pc["spliced_replies"], 1);
  EXPECT_GE(metric(c, "promptcache_cache_miss_total{reason=\"template_rerender\"}"), 1);
}

std::string long_prompt() {
  std::string p;
  for (int i = 0; i < 40; ++i) p += "Lily had a red ball and a big dog named Max. ";
  return p;
}

TEST(ServerCache, SaltsIsolateNamespaces) {
  ServeProcess srv(chatml_args());
  auto c = srv.client();
  json req = {{"prompt", long_prompt()}, {"max_tokens", 2}, {"temperature", 0}, {"cache_salt", "A"}};
  EXPECT_EQ(cached(post(c, "/v1/completions", req)), 0);
  EXPECT_GT(cached(post(c, "/v1/completions", req)), 400);
  req["cache_salt"] = "B";
  EXPECT_EQ(cached(post(c, "/v1/completions", req)), 0);
  req.erase("cache_salt");
  EXPECT_EQ(cached(post(c, "/v1/completions", req)), 0);
}

TEST(ServerCache, ApiKeysSelectTenants) {
  const std::string keys = temp_dir() + "/keys.txt";
  std::ofstream(keys) << "# key tenant\nkey-a alice\nkey-b bob\n";
  std::vector<std::string> args = chatml_args();
  args.insert(args.end(), {"--api-keys", keys});
  ServeProcess srv(args);
  auto anon = srv.client();
  json req = {{"prompt", long_prompt()}, {"max_tokens", 2}, {"temperature", 0}};
  Reply denied = post(anon, "/v1/completions", req);
  EXPECT_EQ(denied.status, 401);
  EXPECT_EQ(denied.body["error"]["code"], "invalid_api_key");
  auto wrong = srv.client("key-x");
  EXPECT_EQ(post(wrong, "/v1/completions", req).status, 401);
  EXPECT_EQ(get(anon, "/health").status, 200);

  auto a = srv.client("key-a"), b = srv.client("key-b");
  EXPECT_EQ(cached(post(a, "/v1/completions", req)), 0);
  EXPECT_EQ(cached(post(b, "/v1/completions", req)), 0);  // no cross-tenant hit
  EXPECT_GT(cached(post(a, "/v1/completions", req)), 400);
  // Each tenant lists only its own namespaces.
  Reply ea = get(a, "/v1/cache/entries");
  ASSERT_EQ(ea.status, 200) << ea.raw;
  ASSERT_EQ(ea.body["namespaces"].size(), 1u) << ea.raw;
  EXPECT_EQ(ea.body["namespaces"][0]["namespace"], "alice");
  EXPECT_FALSE(ea.body["namespaces"][0]["entries"].empty());
}

// --kv-type: /v1/cache/stats and /metrics report the type and its real bytes per
// token (stories260K: 5 layers × 4 KV heads × rows of 8 values; f16 16 bytes a row,
// q8_0 10, q4_0 6), the pool holds the tokens those bytes allow, and a repeated
// prompt still hits.
TEST(ServerCache, KvTypeIsReportedWithItsRealBytes) {
  for (auto [type, row] : {std::pair{"f16", 16}, std::pair{"q8_0", 10}, std::pair{"q4_0", 6}}) {
    std::vector<std::string> args = chatml_args();
    args.insert(args.end(), {"--kv-type", type});
    ServeProcess srv(args);
    auto c = srv.client();
    const Reply st = get(c, "/v1/cache/stats");
    ASSERT_EQ(st.status, 200) << st.raw;
    const int64_t per_token = 2 * 5 * 4 * row;
    EXPECT_EQ(st.body["memory"]["kv_type"], type);
    EXPECT_EQ(st.body["memory"]["bytes_per_token"][type], per_token) << st.raw;
    EXPECT_EQ(st.body["memory"]["page_bytes"], per_token * 16) << st.raw;
    json req = {{"prompt", long_prompt()}, {"max_tokens", 4}, {"temperature", 0}};
    const Reply first = post(c, "/v1/completions", req);
    ASSERT_EQ(first.status, 200) << first.raw;
    const Reply second = post(c, "/v1/completions", req);
    EXPECT_GT(cached(second), 100) << type;
    EXPECT_EQ(first.body["choices"][0]["text"], second.body["choices"][0]["text"]) << type;
    EXPECT_EQ(metric(c, std::string("promptcache_kv_bytes_per_token{kv_type=\"") + type + "\"}"), double(per_token));
  }
}

TEST(ServerCache, StatsEntriesPinUnpinEvict) {
  ServeProcess srv(chatml_args());
  auto c = srv.client();
  json req = {{"prompt", long_prompt()}, {"max_tokens", 4}, {"temperature", 0}};
  const int n = post(c, "/v1/completions", req).body["usage"]["prompt_tokens"];
  Reply st = get(c, "/v1/cache/stats");
  ASSERT_EQ(st.status, 200);
  EXPECT_GT(st.body["index"]["tokens"].get<int>(), n);
  EXPECT_EQ(st.body["memory"]["pages"]["in_use"], 0);
  EXPECT_GT(st.body["memory"]["bytes"]["cached"].get<int64_t>(), 0);
  Reply e = get(c, "/v1/cache/entries");
  ASSERT_EQ(e.status, 200) << e.raw;
  ASSERT_EQ(e.body["namespaces"].size(), 1u);
  ASSERT_EQ(e.body["namespaces"][0]["entries"].size(), 1u) << e.raw;
  const json& entry = e.body["namespaces"][0]["entries"][0];
  EXPECT_EQ(entry["tokens"], n + 3);
  EXPECT_EQ(entry["tier"], "memory");
  EXPECT_EQ(entry["hits"], 0);
  EXPECT_GE(entry["age_seconds"].get<double>(), 0.0);
  EXPECT_TRUE(entry["ttl_seconds"].is_null());
  EXPECT_FALSE(entry["pinned"].get<bool>());
  EXPECT_GT(entry["bytes"].get<int64_t>(), 0);

  Reply p = post(c, "/v1/cache/pin", {{"prompt", long_prompt()}});
  ASSERT_EQ(p.status, 200) << p.raw;
  // The pin split the entry at the prompt: the prompt's node and the generated tail.
  const json pinned = get(c, "/v1/cache/entries").body["namespaces"][0]["entries"][0];
  EXPECT_TRUE(pinned["pinned"].get<bool>()) << pinned.dump();
  EXPECT_EQ(pinned["tokens"], n + 3);
  Reply ev = post(c, "/v1/cache/evict", json::object());
  ASSERT_EQ(ev.status, 200) << ev.raw;
  // The unpinned generated tail is gone (its page may still back the prompt).
  EXPECT_EQ(get(c, "/v1/cache/stats").body["index"]["tokens"], n);
  EXPECT_EQ(cached(post(c, "/v1/completions", req)), n - 1);  // the pinned prompt survived

  EXPECT_EQ(post(c, "/v1/cache/unpin", {{"prompt", long_prompt()}}).status, 200);
  EXPECT_EQ(post(c, "/v1/cache/unpin", {{"prompt", long_prompt()}}).status, 404);
  post(c, "/v1/cache/evict", json::object());
  EXPECT_EQ(get(c, "/v1/cache/stats").body["index"]["entries"], 0);
  EXPECT_EQ(cached(post(c, "/v1/completions", req)), 0);
  EXPECT_EQ(post(c, "/v1/cache/pin", {{"prompt", "never seen"}}).status, 404);
}

// A TTL drops the entry (and what extends it) once it passes, at the engine
// thread's next sweep, with no request needed.
TEST(ServerCache, TtlExpiresEntries) {
  ServeProcess srv(chatml_args());
  auto c = srv.client();
  json req = {{"prompt", long_prompt()}, {"max_tokens", 4}, {"temperature", 0}, {"cache_salt", "ttl"}};
  EXPECT_EQ(cached(post(c, "/v1/completions", req)), 0);
  // Another namespace's entry without a TTL stays.
  json other = req;
  other["cache_salt"] = "keep";
  post(c, "/v1/completions", other);
  EXPECT_EQ(post(c, "/v1/cache/ttl", {{"prompt", "never seen"}, {"ttl_seconds", 1}, {"cache_salt", "ttl"}}).status,
            404);
  EXPECT_EQ(post(c, "/v1/cache/ttl", {{"prompt", long_prompt()}, {"ttl_seconds", -1}}).status, 400);
  const auto set_at = std::chrono::steady_clock::now();
  Reply t = post(c, "/v1/cache/ttl", {{"prompt", long_prompt()}, {"ttl_seconds", 1.0}, {"cache_salt", "ttl"}});
  ASSERT_EQ(t.status, 200) << t.raw;

  auto entries_of = [&](const std::string& ns) {
    const Reply r = get(c, "/v1/cache/entries");
    for (const json& n : r.body["namespaces"])
      if (n["namespace"] == ns) return n["entries"];
    return json::array();
  };
  const json before = entries_of("salt:ttl");
  ASSERT_EQ(before.size(), 1u) << get(c, "/v1/cache/entries").raw;
  EXPECT_LE(before[0]["ttl_seconds"].get<double>(), 1.0);
  EXPECT_GT(before[0]["ttl_seconds"].get<double>(), 0.0);
  json after = before;
  for (int i = 0; i < 100 && !after.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    after = entries_of("salt:ttl");
  }
  EXPECT_TRUE(after.empty()) << after.dump();
  EXPECT_GE(std::chrono::steady_clock::now() - set_at, std::chrono::milliseconds(900));
  EXPECT_EQ(entries_of("salt:keep").size(), 1u);
  EXPECT_EQ(cached(post(c, "/v1/completions", req)), 0);  // recomputed from scratch
  EXPECT_GT(cached(post(c, "/v1/completions", other)), 400);
}

TEST(ServerCache, NamespaceMetrics) {
  ServeProcess srv(chatml_args());
  auto c = srv.client();
  json req = {{"prompt", long_prompt()}, {"max_tokens", 2}, {"temperature", 0}, {"cache_salt", "A"}};
  post(c, "/v1/completions", req);
  req["prompt"] = "A different story about a cat.";
  post(c, "/v1/completions", req);
  req["cache_salt"] = "B";
  post(c, "/v1/completions", req);
  // The label is each namespace's keyed hash, never its name (the cache API gives it).
  std::map<std::string, std::string> label;
  const Reply listing = get(c, "/v1/cache/entries");
  for (const json& ns : listing.body["namespaces"])
    label[ns["namespace"].get<std::string>()] = ns["metrics_label"].get<std::string>();
  ASSERT_EQ(label.count("salt:A"), 1u) << listing.raw;
  ASSERT_EQ(label.count("salt:B"), 1u);
  EXPECT_NE(label["salt:A"], label["salt:B"]);
  const std::string a = "{namespace=\"" + label["salt:A"] + "\",tier=\"memory\"}";
  const std::string b = "{namespace=\"" + label["salt:B"] + "\",tier=\"memory\"}";
  EXPECT_EQ(c.Get("/metrics")->body.find("salt:A"), std::string::npos);
  EXPECT_EQ(metric(c, "promptcache_cache_entries" + a), 2);
  EXPECT_EQ(metric(c, "promptcache_cache_entries" + b), 1);
  const double bytes_a = metric(c, "promptcache_cache_bytes" + a);
  const double bytes_b = metric(c, "promptcache_cache_bytes" + b);
  EXPECT_GT(bytes_b, 0);
  EXPECT_GT(bytes_a, bytes_b);  // the long prompt
  // The per-namespace bytes add up to what the index holds.
  EXPECT_EQ(bytes_a + bytes_b, get(c, "/v1/cache/stats").body["index"]["bytes"].get<double>());
  // Existing series are still there.
  EXPECT_GT(metric(c, "promptcache_kv_bytes{state=\"cached\",tier=\"memory\"}"), 0);
  post(c, "/v1/cache/evict", json::object());
  auto r = c.Get("/metrics");
  EXPECT_EQ(r->body.find("promptcache_cache_entries" + a), std::string::npos) << r->body;
}

// Opens a raw connection, sends a streaming request, reads until the first event
// arrives and closes the socket.
void stream_and_hang_up(int port, const json& body) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const std::string b = body.dump();
  const std::string req = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                          "Content-Length: " + std::to_string(b.size()) + "\r\n\r\n" + b;
  ASSERT_EQ(write(fd, req.data(), req.size()), ssize_t(req.size()));
  std::string got;
  char buf[4096];
  while (got.find("data: ") == std::string::npos) {
    const ssize_t n = read(fd, buf, sizeof buf);
    ASSERT_GT(n, 0);
    got.append(buf, size_t(n));
  }
  close(fd);
}

TEST(ServerCache, ClientDisconnectCancelsAndFreesPages) {
  ServeProcess srv({"-m", shared_path(kModel), "--threads", "1", "--kv-memory", "64MiB"});
  auto c = srv.client();
  // Long enough that it is still generating when the client leaves.
  const json req = {{"prompt", "Once upon a time"}, {"max_tokens", 2000}, {"ignore_eos", true},
                    {"stream", true}, {"temperature", 0}};
  stream_and_hang_up(srv.port(), req);
  json st;
  // Up to 30 s: on a loaded machine the server notices the closed socket late.
  for (int i = 0; i < 1500; ++i) {
    st = get(c, "/v1/cache/stats").body;
    if (st["sequences"]["running"] == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(st["sequences"]["running"], 0);
  EXPECT_EQ(st["memory"]["pages"]["in_use"], 0) << st.dump();
  EXPECT_EQ(metric(c, "promptcache_client_disconnects_total"), 1);
  // Fewer tokens than asked were generated: the sequence was cut short.
  EXPECT_LT(st["engine"]["generated_tokens"].get<int>(), 2000);
}

// Sends a whole (non-streamed) request on a raw connection and returns the socket.
int send_raw(int port, const json& body) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return -1;
  const std::string b = body.dump();
  const std::string req = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                          "Content-Length: " + std::to_string(b.size()) + "\r\n\r\n" + b;
  if (write(fd, req.data(), req.size()) != ssize_t(req.size())) return -1;
  return fd;
}

TEST(ServerCache, WholeRequestClientDisconnectCancels) {
  ServeProcess srv({"-m", shared_path(kModel), "--threads", "1", "--kv-memory", "64MiB"});
  auto c = srv.client();
  const json req = {{"prompt", "Once upon a time"}, {"max_tokens", 2000}, {"ignore_eos", true},
                    {"temperature", 0}};
  const int fd = send_raw(srv.port(), req);
  ASSERT_GE(fd, 0);
  // Wait until it generates, then leave without reading anything.
  json st;
  for (int i = 0; i < 500; ++i) {
    st = get(c, "/v1/cache/stats").body;
    if (st["engine"]["generated_tokens"].get<int>() > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(st["sequences"]["running"], 1) << st.dump();
  close(fd);
  for (int i = 0; i < 1500; ++i) {
    st = get(c, "/v1/cache/stats").body;
    if (st["sequences"]["running"] == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(st["sequences"]["running"], 0);
  EXPECT_EQ(st["memory"]["pages"]["in_use"], 0) << st.dump();
  EXPECT_EQ(metric(c, "promptcache_client_disconnects_total"), 1);
  EXPECT_LT(st["engine"]["generated_tokens"].get<int>(), 2000);
  // What it generated before the client left is cached like any finished sequence.
  EXPECT_GT(st["index"]["tokens"].get<int>(), 0);
}

TEST(ServerCache, FullQueueAnswers503) {
  ServeProcess srv({"-m", shared_path(kModel), "--threads", "1", "--parallel", "1", "--queue", "0"});
  std::atomic<int> ok{0}, busy{0}, other{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 6; ++i) {
    ts.emplace_back([&] {
      auto c = srv.client();
      Reply r = post(c, "/v1/completions", {{"prompt", "Once"}, {"max_tokens", 1500}, {"ignore_eos", true}});
      if (r.status == 200) ++ok;
      else if (r.status == 503 && r.body["error"]["code"] == "server_overloaded") ++busy;
      else ++other;
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_GE(ok, 1);
  EXPECT_GE(busy, 1);
  EXPECT_EQ(other, 0);
}

TEST(ServerCache, ChatWithoutTemplateIs400) {
  ServeProcess srv({"-m", shared_path(kModel)});
  auto c = srv.client();
  Reply r = post(c, "/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body["error"]["code"], "no_chat_template");
}

}  // namespace
}  // namespace pc::test
