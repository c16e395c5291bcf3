// A bounded red team: requests built to crash or exhaust the server, replayed against
// one real process on loopback. Each attack states the answer it must get; across all
// of them the server must stay up, answer no 5xx, and keep its peak resident memory
// (VmHWM) under kMaxRssMiB.
//
// The server runs with two tenants (--api-keys, clients `a` and `b`): b also attacks
// a's cache (evicting it, reading its figures, finding its tenant or salt in /metrics).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <iterator>
#include <sstream>

#include "server_fixture.h"
#include "test_util.h"

namespace pc::test {
namespace {

// Peak RSS bound. The 260K-parameter model, 64 MiB of KV pages and the largest payload
// below (a 40,000-module schema, ~1 MB, laid out and returned as JSON) peaked at 143 MiB;
// the attacks it guards against took gigabytes or the process.
constexpr int64_t kMaxRssMiB = 256;

// CPU seconds the process has used (user + system), from /proc/PID/stat.
double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), {});
  std::istringstream fields(stat.substr(stat.rfind(')') + 2));  // after "pid (comm) "
  std::string f;
  double ticks = 0;
  for (int i = 3; fields >> f && i <= 15; ++i)
    if (i == 14 || i == 15) ticks += std::stod(f);  // utime, stime
  return ticks / double(sysconf(_SC_CLK_TCK));
}

// The process's peak resident set (VmHWM), MiB; -1 when unreadable.
int64_t peak_rss_mib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) / 1024;
  return -1;
}

struct Answer {
  int status = 0;
  json body;
  std::string raw;
};

class RedTeam : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string keys = temp_dir() + "/redteam-keys.txt";
    std::ofstream(keys) << "key-a tenant-a\nkey-b tenant-b\n";
    srv_ = new ServeProcess({"-m", shared_path("models/stories260K.gguf"), "--threads", "1", "--kv-memory", "64MiB",
                             "--chat-template-file", shared_path("templates-2026/Qwen-Qwen2.5-7B-Instruct.jinja"),
                             "--api-keys", keys,
                             // ManyFlatModules stores a 40,000-module schema (the default
                             // per-tenant bound is 4,096 modules; tenant_bounds_test.cc).
                             "--tenant-max-schema-modules", "50000"});
  }
  static void TearDownTestSuite() {
    delete srv_;
    srv_ = nullptr;
  }
  static ServeProcess* srv_;
  httplib::Client a = srv_->client("key-a");
  httplib::Client b = srv_->client("key-b");
  std::vector<int> statuses_;  // every answer of the suite's attacks

  Answer send(httplib::Client& c, const std::string& method, const std::string& path, const std::string& body,
              const char* type = "application/json") {
    httplib::Result r = method == "PUT" ? c.Put(path.c_str(), body, type) : c.Post(path.c_str(), body, type);
    Answer out;
    if (r) {
      out.status = r->status;
      out.raw = r->body;
      out.body = json::parse(r->body, nullptr, false);
    }
    statuses_.push_back(out.status);
    return out;
  }

  void TearDown() override {
    for (int s : statuses_) {
      EXPECT_NE(s, 0) << "no answer: the connection failed (see " << srv_->log_path() << ")";
      EXPECT_LT(s, 500) << "a 5xx answer";
    }
    EXPECT_EQ(srv_->wait_exit(0), -1) << "the server exited (see " << srv_->log_path() << ")";
    EXPECT_EQ(get(a, "/health").status, 200);
    const int64_t rss = peak_rss_mib(srv_->pid());
    std::printf("server peak RSS so far: %lld MiB (bound %lld)\n", (long long)rss, (long long)kMaxRssMiB);
    EXPECT_GT(rss, 0);
    EXPECT_LT(rss, kMaxRssMiB) << "peak RSS " << rss << " MiB";
  }
};
ServeProcess* RedTeam::srv_ = nullptr;

// 400 with the error's param naming `field` (OpenAI shape) and its message mentioning it.
void expect_field_error(const Answer& r, const std::string& field, const std::string& what) {
  EXPECT_EQ(r.status, 400) << what << ": " << r.raw;
  if (r.body.is_object() && r.body.contains("error")) {
    EXPECT_NE(r.body["error"].value("message", "").find(field), std::string::npos) << what << ": " << r.raw;
    if (r.body["error"].contains("param")) {
      EXPECT_EQ(r.body["error"]["param"], field) << what << ": " << r.raw;
    }
  }
}

std::string nested(const std::string& open, const std::string& close, int depth, const std::string& inner) {
  std::string s;
  s.reserve((open.size() + close.size()) * depth + inner.size());
  for (int i = 0; i < depth; ++i) s += open;
  s += inner;
  for (int i = 0; i < depth; ++i) s += close;
  return s;
}

TEST_F(RedTeam, DeeplyNestedPml) {
  std::string modules;
  for (int i = 0; i < 7000; ++i) modules += "<module name=\"m" + std::to_string(i) + "\">";
  modules += "x";
  for (int i = 0; i < 7000; ++i) modules += "</module>";
  Answer r = send(a, "PUT", "/v1/schemas/deep", "<schema name=\"deep\">" + modules + "</schema>", "application/xml");
  EXPECT_EQ(r.status, 400) << r.raw.substr(0, 300);
  EXPECT_EQ(r.body["error"]["code"], "invalid_pml");
  EXPECT_NE(r.body["error"]["message"].get<std::string>().find("nest more than 64 levels"), std::string::npos);
  // A prompt naming no registered schema is parsed before the schema is looked up.
  const json req = {{"prompt", "<prompt schema=\"none\">" + nested("<a>", "</a>", 20000, "x") + "</prompt>"},
                    {"max_tokens", 1}};
  r = send(a, "POST", "/v1/pml/completions", req.dump());
  EXPECT_EQ(r.status, 400) << r.raw.substr(0, 300);
  EXPECT_EQ(r.body["error"]["param"], "prompt");
}

TEST_F(RedTeam, PmlPositionsOverflow) {
  Answer r = send(a, "PUT", "/v1/schemas/big",
                  "<schema name=\"big\"><module name=\"m\"><param name=\"p\" len=\"2147483647\"/></module></schema>",
                  "application/xml");
  EXPECT_EQ(r.status, 400) << r.raw;
  EXPECT_NE(r.raw.find("past 1073741824 positions"), std::string::npos) << r.raw;
  std::string eight = "<schema name=\"eight\"><module name=\"m\">";
  for (int i = 0; i < 8; ++i) eight += "<param name=\"p" + std::to_string(i) + "\" len=\"1073741824\"/>";
  r = send(a, "PUT", "/v1/schemas/eight", eight + "</module></schema>", "application/xml");
  EXPECT_EQ(r.status, 400) << r.raw;
  // Under the limit the schema is accepted; a prompt past the model's context is a 400.
  r = send(a, "PUT", "/v1/schemas/wide",
           "<schema name=\"wide\"><module name=\"m\">a<param name=\"p\" len=\"100000000\"/></module></schema>",
           "application/xml");
  EXPECT_EQ(r.status, 201) << r.raw;
  r = send(a, "POST", "/v1/pml/completions",
           json({{"prompt", "<prompt schema=\"wide\"><m p=\"hi\"/><user>go</user></prompt>"}, {"max_tokens", 1}}).dump());
  EXPECT_EQ(r.status, 400) << r.raw;
  EXPECT_EQ(r.body["error"]["code"], "context_length_exceeded") << r.raw;
}

TEST_F(RedTeam, ManyFlatModules) {
  std::string s = "<schema name=\"flat\">\n";
  for (int i = 0; i < 40000; ++i) s += "<module name=\"m" + std::to_string(i) + "\">m" + std::to_string(i) + "</module>";
  s += "</schema>";
  // The server's CPU time, not wall time: a loaded test machine stretches the latter.
  const double cpu0 = cpu_seconds(srv_->pid());
  Answer r = send(a, "PUT", "/v1/schemas/flat", s, "application/xml");
  const double secs = cpu_seconds(srv_->pid()) - cpu0;
  EXPECT_EQ(r.status, 201) << r.raw.substr(0, 300);
  EXPECT_EQ(r.body["modules"], 40000);
  EXPECT_LT(secs, 5.0) << "PUT of 40,000 modules took " << secs << " s of the server's CPU";
  r = send(a, "POST", "/v1/pml/completions",
           // Compact layout: the schema spans more positions than the model's context.
           json({{"prompt", "<prompt schema=\"flat\" layout=\"compact\"><m7/><m39999/><user>go</user></prompt>"},
                 {"max_tokens", 2},
                 {"temperature", 0}})
               .dump());
  EXPECT_EQ(r.status, 200) << r.raw.substr(0, 300);
}

TEST_F(RedTeam, NumbersOutOfRange) {
  const json chat = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 2}};
  struct Case {
    const char* path;
    std::string body;
    const char* field;
  };
  auto with = [](json j, const std::string& field, const std::string& raw) {
    j.erase(field);
    std::string s = j.dump();
    return s.substr(0, s.size() - 1) + ",\"" + field + "\":" + raw + "}";
  };
  const json completion = {{"prompt", "Once"}, {"max_tokens", 2}};
  const json anthropic = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 2}};
  const json pml = {{"prompt", "<prompt schema=\"none\"><user>x</user></prompt>"}, {"max_tokens", 2}};
  const Case cases[] = {
      {"/v1/completions", with(completion, "max_tokens", "1e400"), "max_tokens"},
      {"/v1/chat/completions", with(chat, "max_tokens", "1e400"), "max_tokens"},
      {"/v1/chat/completions", with(chat, "max_completion_tokens", "-1e400"), "max_completion_tokens"},
      {"/v1/completions", with(completion, "temperature", "1e400"), "temperature"},
      {"/v1/completions", with(completion, "seed", "1e400"), "seed"},
      {"/v1/completions", with(completion, "top_p", "0"), "top_p"},
      {"/v1/chat/completions", with(chat, "top_p", "0"), "top_p"},
      {"/v1/chat/completions", with(chat, "top_p", "1e-60"), "top_p"},
      {"/v1/completions", with(completion, "top_k", "-1"), "top_k"},
      {"/v1/completions", with(completion, "min_p", "1.5"), "min_p"},
      {"/v1/completions", with(completion, "repetition_penalty", "0"), "repetition_penalty"},
      {"/v1/completions", with(completion, "logprobs", "1e400"), "logprobs"},
      {"/v1/chat/completions", with(chat, "stream_options", "{\"include_usage\": 1e999}"),
       "stream_options.include_usage"},
      {"/v1/pml/completions", with(pml, "max_tokens", "1e400"), "max_tokens"},
      {"/v1/pml/completions", with(pml, "top_p", "0"), "top_p"},
      {"/v1/messages", with(anthropic, "max_tokens", "1e400"), "max_tokens"},
      {"/v1/messages", with(anthropic, "top_p", "0"), "top_p"},
      {"/v1/messages", with(anthropic, "top_k", "-5"), "top_k"},
  };
  for (const Case& c : cases) {
    const Answer r = send(a, "POST", c.path, c.body);
    expect_field_error(r, c.field, std::string(c.path) + " " + c.body);
  }
}

TEST_F(RedTeam, DeeplyNestedJson) {
  // The parser keeps its own stack, but error messages and templates walk values
  // recursively: bodies nest at most 256 levels.
  Answer r = send(a, "POST", "/v1/chat/completions",
                  "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"tool_choice\": " +
                      nested("[", "]", 100000, "1") + "}");
  EXPECT_EQ(r.status, 400) << r.raw.substr(0, 300);
  EXPECT_EQ(r.body["error"]["code"], "invalid_json");
  r = send(a, "POST", "/v1/completions",
           "{\"prompt\": \"Once\", \"max_tokens\": 1, \"metadata\": " + nested("{\"k\":", "}", 200, "1") + "}");
  EXPECT_EQ(r.status, 200) << r.raw.substr(0, 300);
}

// One tenant against the other: b's evict-everything, entry ids and figures never reach
// a's cache, and nothing public names a's tenant or salt.
TEST_F(RedTeam, TenantsCannotTouchOrWatchEachOther) {
  const std::string salt = "redteam-salt-7f3a";
  const json req = {{"prompt", "Once upon a time there was a little girl named Lily who loved to play in the park with her dog every day."},
                    {"max_tokens", 1}, {"cache_salt", salt}};
  ASSERT_EQ(send(a, "POST", "/v1/completions", req.dump()).status, 200);
  auto count = [](httplib::Client& c) {
    httplib::Result r = c.Get("/v1/cache/entries");
    size_t n = 0;
    if (!r || r->status != 200) return n;
    const json list = json::parse(r->body);
    for (const json& ns : list["namespaces"]) n += ns["entries"].size();
    return n;
  };
  const size_t mine = count(a);
  ASSERT_GT(mine, 0u);
  EXPECT_EQ(count(b), 0u);
  EXPECT_EQ(send(b, "POST", "/v1/cache/evict", "{}").status, 200);
  EXPECT_EQ(count(a), mine) << "b's evict freed a's entries";
  for (int id = 0; id < 64; ++id) {
    const Answer r = send(b, "POST", "/v1/cache/entries/" + std::to_string(id) + "/evict", "{}");
    EXPECT_NE(r.status, 200) << "b evicted entry " << id;
  }
  EXPECT_EQ(count(a), mine) << "b's evict by id freed a's entries";
  httplib::Result stats = b.Get("/v1/cache/stats");
  ASSERT_TRUE(stats);
  EXPECT_EQ(stats->body.find("tenant-a"), std::string::npos) << stats->body;
  EXPECT_EQ(json::parse(stats->body).value("prompt_tokens", int64_t(0)), 0) << stats->body;
  httplib::Result metrics = b.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->body.find("tenant-a"), std::string::npos);
  EXPECT_EQ(metrics->body.find(salt), std::string::npos);
}

}  // namespace
}  // namespace pc::test
