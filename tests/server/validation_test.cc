// Request decoding against a real server: wrong JSON types in any field of any route's
// body are a 4xx (never a 5xx), the same reuse fields are checked the same way on every
// route, tools and tool results are checked, and a body that cannot fit the context is
// rejected before it is rendered or tokenized (time and peak memory bounded).
#include <gtest/gtest.h>

#include <chrono>
#include <ctime>
#include <fstream>
#include <functional>
#include <iterator>
#include <sstream>
#include <unistd.h>

#include "server/chat/request_structure.h"
#include "server_fixture.h"
#include "test_util.h"

namespace pc::test {
namespace {

using Clock = std::chrono::steady_clock;

// The process's peak resident set (VmHWM), MiB; -1 when unreadable.
int64_t peak_rss_mib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) / 1024;
  return -1;
}

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

class Validation : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    srv_ = new ServeProcess({"-m", shared_path("models/stories260K.gguf"), "--threads", "1", "--kv-memory", "64MiB",
                             "--chat-template-file", shared_path("templates-2026/Qwen-Qwen2.5-7B-Instruct.jinja")});
  }
  static void TearDownTestSuite() {
    delete srv_;
    srv_ = nullptr;
  }
  void TearDown() override { EXPECT_EQ(srv_->wait_exit(0), -1) << "the server exited (see " << srv_->log_path() << ")"; }

  static ServeProcess* srv_;
  httplib::Client c = srv_->client();
};
ServeProcess* Validation::srv_ = nullptr;

// The error message of an OpenAI- or Anthropic-shaped error body.
std::string message_of(const Reply& r) {
  if (!r.body.is_object() || !r.body.contains("error") || !r.body["error"].is_object()) return "";
  const json& m = r.body["error"]["message"];
  return m.is_string() ? m.get<std::string>() : "";
}

// 400 whose message names `field` (and, OpenAI shape, whose param is it).
void expect_names(const Reply& r, const std::string& field, bool anthropic = false) {
  EXPECT_EQ(r.status, 400) << field << ": " << r.raw;
  EXPECT_NE(message_of(r).find(field), std::string::npos) << field << ": " << r.raw;
  if (!anthropic && r.body.is_object() && r.body.contains("error")) {
    EXPECT_EQ(r.body["error"]["param"], field) << r.raw;
  }
}

// Every value in `j` (objects and arrays included) as a JSON pointer.
void pointers(const json& j, const json::json_pointer& at, std::vector<json::json_pointer>& out) {
  out.push_back(at);
  if (j.is_object())
    for (auto it = j.begin(); it != j.end(); ++it) pointers(it.value(), at / it.key(), out);
  else if (j.is_array())
    for (size_t i = 0; i < j.size(); ++i) pointers(j[i], at / i, out);
}

// A valid body of each route, with every kind of part its decoder reads.
struct Route {
  std::string path;
  json body;
};

std::vector<Route> routes() {
  const json tools = json::array({{{"type", "function"},
                                   {"function", {{"name", "get"}, {"description", "d"},
                                                 {"parameters", {{"type", "object"}}}}}}});
  const json chat_messages = json::array(
      {{{"role", "system"}, {"content", "Be brief."}},
       {{"role", "user"}, {"content", json::array({{{"type", "text"}, {"text", "Hi"}}, {{"type", "text"}, {"text", "!"}}})}},
       {{"role", "assistant"},
        {"content", nullptr},
        {"tool_calls", json::array({{{"id", "call_1"}, {"type", "function"},
                                     {"function", {{"name", "get"}, {"arguments", "{\"a\": 1}"}}}}})}},
       {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "42"}},
       {{"role", "user"}, {"content", "Thanks"}}});
  const json chat = {{"messages", chat_messages}, {"tools", tools}, {"tool_choice", "auto"}, {"max_tokens", 1},
                     {"temperature", 0}, {"stop", json::array({"x"})}, {"stream_options", {{"include_usage", true}}},
                     {"chat_template_kwargs", {{"enable_thinking", false}}}, {"cache_reuse", "exact"},
                     {"cache_reuse_budget", 0.5}, {"cache_reuse_policy", "prefix"}, {"seed", 1}};
  const json anthropic = {
      {"model", "m"}, {"max_tokens", 1}, {"temperature", 0}, {"stop_sequences", json::array({"x"})},
      {"system", json::array({{{"type", "text"}, {"text", "Be brief."}, {"cache_control", {{"type", "ephemeral"}}}}})},
      {"tools", json::array({{{"name", "get"}, {"description", "d"}, {"input_schema", {{"type", "object"}}},
                              {"cache_control", {{"type", "ephemeral"}, {"ttl", "5m"}}}}})},
      {"tool_choice", {{"type", "auto"}}},
      {"cache_reuse", "exact"},
      {"messages",
       json::array({{{"role", "user"},
                     {"content", json::array({{{"type", "text"}, {"text", "Hi"}, {"cache_control", {{"type", "ephemeral"}}}}})}},
                    {{"role", "assistant"},
                     {"content", json::array({{{"type", "text"}, {"text", "Let me see."}},
                                              {{"type", "tool_use"}, {"id", "toolu_1"}, {"name", "get"},
                                               {"input", {{"a", 1}}}}})}},
                    {{"role", "user"},
                     {"content", json::array({{{"type", "tool_result"}, {"tool_use_id", "toolu_1"},
                                               {"content", json::array({{{"type", "text"}, {"text", "42"}}})}}})}}})}};
  return {
      {"/v1/chat/completions", chat},
      {"/v1/completions", {{"prompt", "Once"}, {"max_tokens", 1}, {"logprobs", 1}, {"stop", "x"}, {"top_k", 1}}},
      {"/v1/completions", {{"prompt", json::array({1, 2, 3})}, {"max_tokens", 1}}},
      {"/v1/messages", anthropic},
      {"/apply-template", {{"messages", chat_messages}, {"tools", tools}}},
      {"/tokenize", {{"content", "Once"}, {"add_special", true}, {"with_pieces", true}}},
      {"/detokenize", {{"tokens", json::array({1, 2})}}},
      {"/v1/cache/pin", {{"messages", chat_messages}, {"cache_salt", "s"}}},
      {"/v1/cache/ttl", {{"prompt", json::array({1, 2})}, {"ttl_seconds", 5}}},
      {"/v1/cache/evict", {{"bytes", 0}}},
      {"/v1/pml/completions", {{"prompt", "<prompt schema=\"none\"><user>hi</user></prompt>"}, {"max_tokens", 1}}},
  };
}

// Every value of every route's body replaced by each wrong-typed value: a 4xx, never a
// 5xx. A value of the right type may be accepted (200): the point is no internal error.
TEST_F(Validation, WrongTypesAreNever5xx) {
  const std::vector<json> wrong = {nullptr, -1, 1.5, true, "x", json::array(), json::object(), json::array({5}),
                                   {{"type", 1}}};
  int sent = 0;
  for (const Route& r : routes()) {
    std::vector<json::json_pointer> at;
    pointers(r.body, json::json_pointer(), at);
    for (const json::json_pointer& p : at) {
      if (p.empty()) continue;
      for (const json& v : wrong) {
        json body = r.body;
        body[p] = v;
        const Reply got = post(c, r.path, body);
        ++sent;
        ASSERT_NE(got.status, 0) << "no answer (see " << srv_->log_path() << ")";
        EXPECT_LT(got.status, 500) << r.path << " " << p.to_string() << " = " << v.dump() << ": " << got.raw;
      }
    }
  }
  std::printf("%d wrong-typed bodies sent\n", sent);
}

TEST_F(Validation, ContentPartTypeNamesTheField) {
  const json parts = json::array({{{"type", "text"}, {"text", "a"}}, {{"type", nullptr}, {"text", "b"}}});
  for (const char* path : {"/v1/chat/completions", "/apply-template"}) {
    expect_names(post(c, path, {{"messages", {{{"role", "user"}, {"content", parts}}}}, {"max_tokens", 1}}),
                 "messages[0].content[1].type");
    json one = parts;
    one[1]["type"] = 1;
    expect_names(post(c, path, {{"messages", {{{"role", "user"}, {"content", one}}}}, {"max_tokens", 1}}),
                 "messages[0].content[1].type");
  }
}

TEST_F(Validation, AnthropicBlockTypesNameTheField) {
  const json user = {{"role", "user"}, {"content", "hi"}};
  auto send = [&](json body) {
    body["max_tokens"] = 1;
    if (!body.contains("messages")) body["messages"] = {user};
    return post(c, "/v1/messages", body);
  };
  expect_names(send({{"system", {{{"type", nullptr}, {"text", "s"}}}}}), "system[0].type", true);
  expect_names(send({{"system", {{{"type", 1}, {"text", "s"}}}}}), "system[0].type", true);
  expect_names(send({{"system", {{{"type", "text"}, {"text", "s"}, {"cache_control", {{"type", 1}}}}}}}),
               "system[0].cache_control.type", true);
  expect_names(send({{"messages", {{{"role", "user"},
                                    {"content", {{{"type", "text"}, {"text", "a"}, {"cache_control", {{"type", nullptr}}}}}}}}}}),
               "messages[0].content[0].cache_control.type", true);
  expect_names(send({{"tool_choice", {{"type", 1}}}}), "tool_choice.type", true);
}

TEST_F(Validation, AnthropicReuseFieldsAreCheckedAsOnOpenAI) {
  const json user = {{"role", "user"}, {"content", "hi"}};
  const std::vector<std::pair<std::string, json>> bad = {{"cache_reuse", "APPROXIMATE"},
                                                         {"cache_reuse", true},
                                                         {"cache_reuse_budget", -0.1},
                                                         {"cache_reuse_budget", true},
                                                         {"cache_reuse_policy", "APPROXIMATE"},
                                                         {"cache_reuse_policy", 1}};
  for (const auto& [field, v] : bad) {
    const Reply a = post(c, "/v1/messages", {{"messages", {user}}, {"max_tokens", 1}, {field, v}});
    expect_names(a, field, true);
    const Reply o = post(c, "/v1/chat/completions", {{"messages", {user}}, {"max_tokens", 1}, {field, v}});
    expect_names(o, field);
  }
  // And a good one is honoured, not dropped: the report says approximate.
  const Reply a = post(c, "/v1/messages", {{"messages", {user}}, {"max_tokens", 1}, {"cache_reuse", "approximate"}});
  ASSERT_EQ(a.status, 200) << a.raw;
  EXPECT_EQ(a.body["promptcache"]["cache_reuse"]["mode"], "approximate") << a.raw;
}

TEST_F(Validation, OpenAIToolsAreChecked) {
  const json user = {{"role", "user"}, {"content", "hi"}};
  const std::vector<std::pair<json, std::string>> bad = {
      {{{"type", "function"}, {"function", {{"name", "f"}}}}, "tools"},  // an object, not an array
      {json::array({5}), "tools[0]"},
      {json::array({{{"type", "function"}}}), "tools[0].function"},
      {json::array({{{"type", "function"}, {"function", {{"description", "d"}}}}}), "tools[0].function.name"},
      {json::array({{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", 5}}}}}), "tools[0].function.parameters"},
      {json::array({{{"function", {{"name", "f"}}}}}), "tools[0].type"},
  };
  for (const auto& [tools, field] : bad) {
    expect_names(post(c, "/v1/chat/completions", {{"messages", {user}}, {"max_tokens", 1}, {"tools", tools}}), field);
    expect_names(post(c, "/apply-template", {{"messages", {user}}, {"tools", tools}}), field);
  }
}

TEST_F(Validation, AnthropicToolResultMustAnswerAToolUse) {
  const json use = {{"role", "assistant"},
                    {"content", {{{"type", "tool_use"}, {"id", "toolu_1"}, {"name", "get"}, {"input", json::object()}}}}};
  auto result = [](const char* id) {
    return json{{"role", "user"}, {"content", {{{"type", "tool_result"}, {"tool_use_id", id}, {"content", "42"}}}}};
  };
  const json tools = {{{"name", "get"}, {"input_schema", {{"type", "object"}}}}};
  const json q = {{"role", "user"}, {"content", "call it"}};
  expect_names(post(c, "/v1/messages", {{"max_tokens", 1}, {"tools", tools}, {"messages", {q, use, result("toolu_2")}}}),
               "messages[2].content[0].tool_use_id", true);
  expect_names(post(c, "/v1/messages", {{"max_tokens", 1}, {"messages", {result("toolu_1")}}}),
               "messages[0].content[0].tool_use_id", true);
  const Reply ok = post(c, "/v1/messages", {{"max_tokens", 1}, {"tools", tools}, {"messages", {q, use, result("toolu_1")}}});
  EXPECT_EQ(ok.status, 200) << ok.raw;
}

// Seconds a POST of `body` took, and its answer.
double timed_post(httplib::Client& c, const std::string& path, const std::string& body, Reply* out) {
  const auto t0 = Clock::now();
  httplib::Result r = c.Post(path.c_str(), body, "application/json");
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  out->status = r ? r->status : 0;
  out->raw = r ? r->body : "";
  out->body = json::parse(out->raw, nullptr, false);
  return s;
}

// A 31 MB message cannot fit a 512-token context whatever its tokens: 400 before the
// template renders it or the tokenizer sees it (that took 14.7 s and 1.16 GB).
TEST_F(Validation, HugeMessageIsRejectedBeforeTokenizing) {
  const std::string text(31 << 20, 'a');
  const std::string chat = json{{"messages", {{{"role", "user"}, {"content", text}}}}}.dump();
  const std::string anthropic = json{{"max_tokens", 1}, {"messages", {{{"role", "user"}, {"content", text}}}}}.dump();
  for (const auto& [path, body] : {std::pair{"/v1/chat/completions", chat}, std::pair{"/v1/messages", anthropic}}) {
    Reply r;
    const double cpu0 = cpu_seconds(srv_->pid());
    const double s = timed_post(c, path, body, &r);
    const double cpu = cpu_seconds(srv_->pid()) - cpu0;
    std::printf("%s: 31 MiB message answered %d in %.3f s (server CPU %.3f s)\n", path, r.status, s, cpu);
    EXPECT_EQ(r.status, 400) << r.raw.substr(0, 300);
    EXPECT_NE(r.raw.find("context length"), std::string::npos) << r.raw.substr(0, 300);
    EXPECT_LT(cpu, 3.0);  // CPU, not wall: the machine may be shared
  }
  const int64_t rss = peak_rss_mib(srv_->pid());
  std::printf("server peak RSS: %lld MiB\n", (long long)rss);
  EXPECT_LT(rss, 512);
}

// 200,000 one-word messages, 100,000 tools: past the item caps, rejected at once (they
// took 92 s and 14 s).
TEST_F(Validation, ItemCountsAreCapped) {
  json msgs = json::array();
  for (int i = 0; i < 200000; ++i) msgs.push_back({{"role", i % 2 ? "assistant" : "user"}, {"content", "hi"}});
  json tools = json::array();
  for (int i = 0; i < 100000; ++i)
    tools.push_back({{"type", "function"}, {"function", {{"name", "f" + std::to_string(i)}}}});
  const json user = {{"role", "user"}, {"content", "hi"}};
  struct Case {
    const char* path;
    json body;
    const char* field;
  };
  const std::vector<Case> cases = {
      {"/v1/chat/completions", {{"messages", msgs}, {"max_tokens", 1}}, "messages"},
      {"/v1/messages", {{"messages", msgs}, {"max_tokens", 1}}, "messages"},
      {"/apply-template", {{"messages", msgs}}, "messages"},
      {"/v1/chat/completions", {{"messages", {user}}, {"tools", tools}, {"max_tokens", 1}}, "tools"},
  };
  for (const Case& k : cases) {
    Reply r;
    const double s = timed_post(c, k.path, k.body.dump(), &r);
    std::printf("%s: %s past the cap answered %d in %.3f s\n", k.path, k.field, r.status, s);
    const bool anthropic = std::string(k.path) == "/v1/messages";
    expect_names(r, k.field, anthropic);
    if (!anthropic) {
      EXPECT_EQ(r.body["error"]["code"], "too_many_items") << r.raw.substr(0, 300);
    }
    EXPECT_LT(s, 5.0);
  }
}

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

// The parts of a request with many messages are laid out in time linear in their count
// (a check of every pair of parts took seconds at 100,000).
TEST(RequestParts, ManyPartsInLinearTime) {
  std::vector<server::PartSpan> spans;
  for (int i = 0; i < 200000; ++i) spans.push_back({size_t(i) * 10, size_t(i) * 10 + 8, 1, i, -1});
  spans.push_back({5, 7, 1, 200000, -1});  // inside message 0: neither is a block of its own
  std::vector<int64_t> offsets;
  for (int64_t b = 0; b <= 2000000; b += 2) offsets.push_back(b);
  // CPU time of this thread: the machine may be shared, wall time is not the cost.
  const double t0 = thread_cpu_seconds();
  const std::vector<server::RequestPart> parts = server::request_parts(spans, json::array(), json(), offsets);
  const double s = thread_cpu_seconds() - t0;
  std::printf("request_parts of 200,001 spans: %.3f CPU s\n", s);
  ASSERT_EQ(parts.size(), 200001u);
  EXPECT_LT(s, 2.0);
  EXPECT_FALSE(parts[0].is_block);
  EXPECT_FALSE(parts[1].is_block);  // the one inside message 0
  EXPECT_TRUE(parts[2].is_block);
  EXPECT_TRUE(parts.back().is_block);
}

}  // namespace
}  // namespace pc::test
