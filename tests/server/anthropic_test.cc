// POST /v1/messages (Anthropic's Messages API) against a real server: the translation
// gives the prompt and text /v1/chat/completions gives for the same conversation
// (tools, tool_use and tool_result included); streamed events come in Anthropic's
// order and add up to the whole response; errors have Anthropic's shape; usage adds up
// and reads a repeated prefix from the cache; a cache_control ttl keeps its prefix
// through LRU pressure and reports its expiry.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include "server_fixture.h"
#include "test_util.h"

namespace pc::test {
namespace {

const std::string kModel = "models/stories260K.gguf";

std::vector<std::string> qwen_args(std::vector<std::string> more = {}) {
  std::vector<std::string> a = {"-m", shared_path(kModel), "--threads", "1", "--chat-template-file",
                                shared_path("templates-2026/Qwen-Qwen2.5-7B-Instruct.jinja")};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

Reply messages(httplib::Client& c, const json& body, const httplib::Headers& h = {}) {
  auto r = c.Post("/v1/messages", h, body.dump(), "application/json");
  Reply out;
  if (!r) return out;
  out.status = r->status;
  out.raw = r->body;
  out.body = json::parse(r->body, nullptr, false);
  if (out.body.is_discarded()) out.body = nullptr;
  return out;
}

// Named SSE events: (event name, data).
std::vector<std::pair<std::string, json>> named_events(const std::string& body) {
  std::vector<std::pair<std::string, json>> out;
  std::istringstream in(body);
  std::string line, name;
  while (std::getline(in, line)) {
    if (line.rfind("event: ", 0) == 0) name = line.substr(7);
    if (line.rfind("data: ", 0) == 0) {
      out.emplace_back(name, json::parse(line.substr(6)));
      name.clear();
    }
  }
  return out;
}

int64_t prompt_of(const json& usage) {
  return usage["input_tokens"].get<int64_t>() + usage["cache_creation_input_tokens"].get<int64_t>() +
         usage["cache_read_input_tokens"].get<int64_t>();
}

std::string whole_text(const json& m) {
  std::string t;
  for (const json& b : m["content"])
    if (b["type"] == "text") t += b["text"].get<std::string>();
  return t;
}

const json kSystem = "You tell short stories about a cat.";

TEST(ServerAnthropic, MessagesMatchChatCompletions) {
  ServeProcess srv(qwen_args());
  auto c = srv.client();
  const json a = {{"model", "stories260K"}, {"max_tokens", 16}, {"temperature", 0},
                  {"system", json::array({{{"type", "text"}, {"text", "You tell short "}},
                                          {{"type", "text"}, {"text", "stories about a cat."}}})},
                  {"messages", json::array({{{"role", "user"},
                                             {"content", json::array({{{"type", "text"}, {"text", "Tell me one."}}})}}})}};
  const Reply r = messages(c, a, {{"anthropic-version", "2023-06-01"}});
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["type"], "message");
  EXPECT_EQ(r.body["role"], "assistant");
  EXPECT_EQ(r.body["model"], "stories260K");
  EXPECT_EQ(r.body["id"].get<std::string>().rfind("msg_", 0), 0u);
  const std::string stop = r.body["stop_reason"];
  EXPECT_TRUE(stop == "end_turn" || stop == "max_tokens") << stop;
  EXPECT_TRUE(r.body["stop_sequence"].is_null());

  // The same two system parts as OpenAI content parts (both APIs join parts with "\n").
  const json parts = json::array({{{"type", "text"}, {"text", "You tell short "}},
                                  {{"type", "text"}, {"text", "stories about a cat."}}});
  const json o = {{"max_tokens", 16}, {"temperature", 0},
                  {"messages", json::array({{{"role", "system"}, {"content", parts}},
                                            {{"role", "user"}, {"content", "Tell me one."}}})},
                  {"cache_salt", "openai"}};
  const Reply oc = post(c, "/v1/chat/completions", o);
  ASSERT_EQ(oc.status, 200) << oc.raw;
  EXPECT_EQ(whole_text(r.body), oc.body["choices"][0]["message"]["content"]);
  EXPECT_EQ(prompt_of(r.body["usage"]), oc.body["usage"]["prompt_tokens"]);
  EXPECT_EQ(r.body["usage"]["output_tokens"], oc.body["usage"]["completion_tokens"]);
  EXPECT_EQ(r.body["usage"]["cache_creation_input_tokens"], 0);  // no breakpoint
  EXPECT_EQ(stop == "max_tokens", oc.body["choices"][0]["finish_reason"] == "length");

  // The same prefix again reads from the cache; the fields still add up.
  const Reply r2 = messages(c, a);
  ASSERT_EQ(r2.status, 200) << r2.raw;
  EXPECT_GT(r2.body["usage"]["cache_read_input_tokens"].get<int64_t>(), 0);
  EXPECT_EQ(r2.body["usage"]["cache_read_input_tokens"], r2.body["promptcache"]["cached_tokens"]);
  EXPECT_EQ(prompt_of(r2.body["usage"]), prompt_of(r.body["usage"]));
  EXPECT_EQ(whole_text(r2.body), whole_text(r.body));
}

TEST(ServerAnthropic, ToolUseAndToolResultTranslateToChatMessages) {
  ServeProcess srv(qwen_args());
  auto c = srv.client();
  const json schema = {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}};
  const json a = {
      {"max_tokens", 8}, {"temperature", 0}, {"system", kSystem},
      {"tools", json::array({{{"name", "get_weather"}, {"description", "The weather."}, {"input_schema", schema}}})},
      {"messages",
       json::array({{{"role", "user"}, {"content", "Weather in Paris?"}},
                    {{"role", "assistant"},
                     {"content", json::array({{{"type", "text"}, {"text", "Looking."}},
                                              {{"type", "tool_use"}, {"id", "toolu_1"}, {"name", "get_weather"},
                                               {"input", {{"city", "Paris"}}}}})}},
                    {{"role", "user"},
                     {"content", json::array({{{"type", "tool_result"}, {"tool_use_id", "toolu_1"},
                                               {"content", json::array({{{"type", "text"}, {"text", "Sunny"}}})}},
                                              {{"type", "text"}, {"text", "Thanks!"}}})}}})}};
  const Reply r = messages(c, a);
  ASSERT_EQ(r.status, 200) << r.raw;
  // In the order OpenAI's clients send (the template writes the tools as given).
  const nlohmann::ordered_json o = {
      {"max_tokens", 8}, {"temperature", 0}, {"cache_salt", "openai"},
      {"tools", nlohmann::ordered_json::array({{{"type", "function"},
                              {"function", {{"name", "get_weather"}, {"description", "The weather."}, {"parameters", schema}}}}})},
      {"messages",
       nlohmann::ordered_json::array({{{"role", "system"}, {"content", kSystem}},
                    {{"role", "user"}, {"content", "Weather in Paris?"}},
                    {{"role", "assistant"}, {"content", "Looking."},
                     {"tool_calls", nlohmann::ordered_json::array({{{"id", "toolu_1"}, {"type", "function"},
                                                  {"function", {{"name", "get_weather"}, {"arguments", {{"city", "Paris"}}}}}}})}},
                    {{"role", "tool"}, {"tool_call_id", "toolu_1"}, {"content", "Sunny"}},
                    {{"role", "user"}, {"content", "Thanks!"}}})}};
  const Reply oc = post_text(c, "/v1/chat/completions", o.dump());
  ASSERT_EQ(oc.status, 200) << oc.raw;
  EXPECT_EQ(prompt_of(r.body["usage"]), oc.body["usage"]["prompt_tokens"]);
  EXPECT_EQ(whole_text(r.body), oc.body["choices"][0]["message"]["content"]);
  // The rendered prompt holds the tool and the call (apply-template renders the same messages).
  const Reply t = post_text(c, "/apply-template", o.dump());
  ASSERT_EQ(t.status, 200) << t.raw;
  EXPECT_NE(t.body["prompt"].get<std::string>().find("get_weather"), std::string::npos);
  EXPECT_NE(t.body["prompt"].get<std::string>().find("\"city\": \"Paris\""), std::string::npos) << t.body["prompt"];
}

TEST(ServerAnthropic, StreamedEventsInOrderAddUpToTheWholeResponse) {
  ServeProcess srv(qwen_args());
  auto c = srv.client();
  json a = {{"max_tokens", 20}, {"temperature", 0}, {"system", kSystem},
            {"messages", json::array({{{"role", "user"}, {"content", "Tell me one."}}})}};
  const Reply whole = messages(c, a);
  ASSERT_EQ(whole.status, 200) << whole.raw;
  a["stream"] = true;
  auto s = c.Post("/v1/messages", a.dump(), "application/json");
  ASSERT_TRUE(s);
  ASSERT_EQ(s->status, 200) << s->body;
  EXPECT_EQ(s->get_header_value("Content-Type").rfind("text/event-stream", 0), 0u);
  const auto events = named_events(s->body);
  ASSERT_GE(events.size(), 6u) << s->body;
  std::vector<std::string> order;
  std::string text;
  for (const auto& [name, data] : events) {
    EXPECT_EQ(name, data["type"]) << "the event: line names the data's type";
    if (name == "ping") continue;
    if (order.empty() || order.back() != name) order.push_back(name);
    if (name == "content_block_delta") {
      EXPECT_EQ(data["index"], 0);
      EXPECT_EQ(data["delta"]["type"], "text_delta");
      text += data["delta"]["text"].get<std::string>();
    }
  }
  EXPECT_EQ(order, (std::vector<std::string>{"message_start", "content_block_start", "content_block_delta",
                                             "content_block_stop", "message_delta", "message_stop"}));
  const json& start = events[0].second["message"];
  EXPECT_EQ(start["role"], "assistant");
  EXPECT_TRUE(start["content"].empty());
  EXPECT_TRUE(start["stop_reason"].is_null());
  EXPECT_EQ(text, whole_text(whole.body));
  const json& delta = events[events.size() - 2].second;
  EXPECT_EQ(delta["delta"]["stop_reason"], whole.body["stop_reason"]);
  EXPECT_EQ(delta["usage"]["output_tokens"], whole.body["usage"]["output_tokens"]);
  EXPECT_EQ(prompt_of(delta["usage"]), prompt_of(whole.body["usage"]));
  EXPECT_GT(delta["usage"]["cache_read_input_tokens"].get<int64_t>(), 0);  // the repeat hits

  // A stop sequence taken from the text ends it there, and says which.
  const std::string full = whole_text(whole.body);
  ASSERT_GE(full.size(), 6u);
  const std::string stop = full.substr(3, 3);
  json st = a;
  st.erase("stream");
  st["stop_sequences"] = json::array({"zzzz", stop});
  const Reply cut = messages(c, st);
  ASSERT_EQ(cut.status, 200) << cut.raw;
  EXPECT_EQ(cut.body["stop_reason"], "stop_sequence");
  EXPECT_EQ(cut.body["stop_sequence"], stop);
  EXPECT_EQ(whole_text(cut.body), full.substr(0, full.find(stop)));
  st["max_tokens"] = 2;
  st.erase("stop_sequences");
  EXPECT_EQ(messages(c, st).body["stop_reason"], "max_tokens");
}

TEST(ServerAnthropic, ErrorsHaveAnthropicsShape) {
  const std::string keys = temp_dir() + "/anthropic-keys.txt";
  std::ofstream(keys) << "sk-test tenant-a\n";
  ServeProcess srv(qwen_args({"--api-keys", keys}));
  auto c = srv.client();
  const json ok = {{"max_tokens", 4}, {"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})}};
  const httplib::Headers key = {{"x-api-key", "sk-test"}, {"anthropic-version", "2023-06-01"}};
  auto expect_error = [&](const json& body, int status, const std::string& type, const std::string& mentions,
                          const httplib::Headers& h) {
    const Reply r = messages(c, body, h);
    EXPECT_EQ(r.status, status) << r.raw;
    EXPECT_EQ(r.body["type"], "error") << r.raw;
    EXPECT_EQ(r.body["error"]["type"], type) << r.raw;
    EXPECT_NE(r.body["error"]["message"].get<std::string>().find(mentions), std::string::npos) << r.raw;
  };
  EXPECT_EQ(messages(c, ok, key).status, 200);
  EXPECT_EQ(messages(c, ok, {{"Authorization", "Bearer sk-test"}}).status, 200);
  expect_error(ok, 401, "authentication_error", "API key", {});
  expect_error(ok, 401, "authentication_error", "API key", {{"x-api-key", "wrong"}});
  json b = ok;
  b.erase("max_tokens");
  expect_error(b, 400, "invalid_request_error", "max_tokens", key);
  b = ok;
  b["max_tokens"] = 0;
  expect_error(b, 400, "invalid_request_error", "max_tokens", key);
  b = ok;
  b["messages"][0]["content"] = json::array({{{"type", "image"}, {"source", {}}}});
  expect_error(b, 400, "invalid_request_error", "image", key);
  b = ok;
  b["messages"][0]["role"] = "system";
  expect_error(b, 400, "invalid_request_error", "messages[0].role", key);
  b = ok;
  b["system"] = json::array({{{"type", "text"}, {"text", "x"}, {"cache_control", {{"type", "ephemeral"}, {"ttl", "2h"}}}}});
  expect_error(b, 400, "invalid_request_error", "5m", key);
  b = ok;
  b["tools"] = json::array({{{"name", "f"}}});
  expect_error(b, 400, "invalid_request_error", "input_schema", key);
  b = ok;
  b["stop_sequences"] = "x";
  expect_error(b, 400, "invalid_request_error", "stop_sequences", key);
  b = ok;
  b["tool_choice"] = {{"type", "any"}};  // no tools to call
  expect_error(b, 400, "invalid_request_error", "tool_choice", key);
  b["tools"] = json::array({{{"name", "f"}, {"input_schema", {{"type", "object"}}}}});
  b["tool_choice"] = {{"type", "tool"}};
  expect_error(b, 400, "invalid_request_error", "tool_choice.name", key);
  b["tool_choice"] = {{"type", "tool"}, {"name", "g"}};  // not in tools
  expect_error(b, 400, "invalid_request_error", "'g'", key);
  b["tool_choice"] = {{"type", "sometimes"}};
  expect_error(b, 400, "invalid_request_error", "tool_choice.type", key);
  b = ok;
  b["output_config"] = {{"format", {{"type", "json_schema"}, {"schema", {{"type", "string"}, {"pattern", "a+"}}}}}};
  expect_error(b, 400, "invalid_request_error", "output_config.format.schema.pattern", key);
  b = ok;
  b["model"] = "claude-nothing";
  expect_error(b, 404, "not_found_error", "claude-nothing", key);
  auto bad_json = c.Post("/v1/messages", key, "{not json", "application/json");
  ASSERT_TRUE(bad_json);
  EXPECT_EQ(bad_json->status, 400);
  EXPECT_EQ(json::parse(bad_json->body)["type"], "error");
}

// A cache_control breakpoint on the system prompt: the prefix ending there outlives
// LRU pressure, with its expiry in the response; the tokens computed up to it are
// cache_creation_input_tokens, and a later conversation with the same system prompt
// reads them.
TEST(ServerAnthropic, CacheControlTtlKeepsThePrefixThroughPressure) {
  ServeProcess srv(qwen_args({"--kv-memory", "400KiB", "--test-time-scale", "0.01"}));
  auto c = srv.client();
  std::string system_text;
  for (int i = 0; i < 6; ++i) system_text += "You tell short stories about a cat named Tom. ";
  auto request = [&](const std::string& user, bool breakpoint) {
    json sys = {{"type", "text"}, {"text", system_text}};
    if (breakpoint) sys["cache_control"] = {{"type", "ephemeral"}, {"ttl", "1h"}};
    return json{{"max_tokens", 4}, {"temperature", 0}, {"system", json::array({sys})},
                {"messages", json::array({{{"role", "user"}, {"content", user}}})}};
  };
  const double t0 = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const Reply a = messages(c, request("Tell me one.", true));
  ASSERT_EQ(a.status, 200) << a.raw;
  const json& u = a.body["usage"];
  const int64_t creation = u["cache_creation_input_tokens"];
  EXPECT_GT(creation, 60);  // the system prompt's tokens
  EXPECT_GT(u["input_tokens"].get<int64_t>(), 0);  // the user turn after the breakpoint
  EXPECT_EQ(u["cache_read_input_tokens"], 0);
  const json& pa = a.body["promptcache"];
  EXPECT_EQ(pa["retained_tokens"], creation);
  EXPECT_EQ(pa["expires_tier"], "memory");
  EXPECT_NEAR(pa["expires_at"].get<double>(), t0 + 36, 2);  // 1 h × 0.01

  // Pressure from other conversations (no breakpoints) that do not fit beside it.
  for (const char* who : {"Ben", "Mia", "Sam", "Zoe", "Max", "Ivy"}) {
    std::string other;
    for (int i = 0; i < 6; ++i) other += std::string(who) + " likes to run in the big park. ";
    const Reply r = messages(c, {{"max_tokens", 4}, {"system", other},
                                 {"messages", json::array({{{"role", "user"}, {"content", "Go on."}}})}});
    ASSERT_EQ(r.status, 200) << r.raw;
    EXPECT_TRUE(r.body["promptcache"]["expires_at"].is_null());
  }
  EXPECT_GT(get(c, "/v1/cache/stats").body["index"]["evicted"].get<int64_t>(), 0);
  const Reply b = messages(c, request("Another, please.", false));
  ASSERT_EQ(b.status, 200) << b.raw;
  EXPECT_GE(b.body["usage"]["cache_read_input_tokens"].get<int64_t>(), creation);
  EXPECT_EQ(b.body["usage"]["cache_creation_input_tokens"], 0);
  // The hit re-armed the retained system prompt and the response says until when.
  EXPECT_EQ(b.body["promptcache"]["retained_tokens"], creation);
  EXPECT_GE(b.body["promptcache"]["expires_at"].get<double>(), pa["expires_at"].get<double>());
}

}  // namespace
}  // namespace pc::test

namespace pc::test {
namespace {

// A reply in the template's tool-call format comes back as tool_use blocks (whole and
// streamed, stop_reason "tool_use"), and the next turn, sending the tool_use back with
// its tool_result, reads everything before it from the cache.
TEST(AnthropicTools, ToolUseBlocksAndTheNextTurnHitsTheCache) {
  ServeProcess srv(qwen_args({"--test-hooks"}));
  auto c = srv.client();
  const json tools = json::array({{{"name", "get_weather"},
                                   {"description", "The weather in a city."},
                                   {"input_schema", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}}});
  const json user = {{"role", "user"}, {"content", "What is the weather in Paris?"}};
  json body = {{"model", "stories260K"}, {"max_tokens", 256}, {"tools", tools}, {"messages", json::array({user})},
               {"test_forced_reply", "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"}};
  const Reply r = messages(c, body);
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["stop_reason"], "tool_use") << r.raw;
  ASSERT_EQ(r.body["content"].size(), 2u) << r.raw;
  EXPECT_EQ(r.body["content"][0]["type"], "text");
  EXPECT_EQ(r.body["content"][0]["text"], "Let me look.");
  const json& use = r.body["content"][1];
  EXPECT_EQ(use["type"], "tool_use");
  EXPECT_EQ(use["name"], "get_weather");
  EXPECT_EQ(use["input"], json({{"city", "Paris"}}));
  EXPECT_EQ(use["id"].get<std::string>().rfind("toolu_", 0), 0u);

  // Streamed: a tool_use block whose input_json_delta is the same input.
  json sbody = body;
  sbody["stream"] = true;
  sbody["metadata"] = {{"user_id", "stream"}};
  auto sr = c.Post("/v1/messages", sbody.dump(), "application/json");
  ASSERT_TRUE(sr);
  json streamed_input, streamed_start;
  std::string stop;
  for (const auto& [name, data] : named_events(sr->body)) {
    if (name == "content_block_start" && data["content_block"]["type"] == "tool_use") streamed_start = data["content_block"];
    if (name == "content_block_delta" && data["delta"]["type"] == "input_json_delta")
      streamed_input = json::parse(data["delta"]["partial_json"].get<std::string>());
    if (name == "message_delta") stop = data["delta"]["stop_reason"];
  }
  EXPECT_EQ(streamed_start["name"], "get_weather") << sr->body;
  EXPECT_EQ(streamed_input, use["input"]) << sr->body;
  EXPECT_EQ(stop, "tool_use");

  // The next turn: the tool_use goes back with its result.
  const int64_t first_prompt = prompt_of(r.body["usage"]);
  json next = {{"model", "stories260K"},
               {"max_tokens", 4},
               {"tools", tools},
               {"messages", json::array({user,
                                         {{"role", "assistant"}, {"content", r.body["content"]}},
                                         {{"role", "user"},
                                          {"content", json::array({{{"type", "tool_result"},
                                                                    {"tool_use_id", use["id"]},
                                                                    {"content", "Sunny, 21 degrees."}}})}}})}};
  const Reply n = messages(c, next);
  ASSERT_EQ(n.status, 200) << n.raw;
  EXPECT_GE(n.body["usage"]["cache_read_input_tokens"].get<int64_t>(), first_prompt) << n.raw;
}

}  // namespace
}  // namespace pc::test

namespace pc::test {
namespace {

// A tool's schema and a tool_use input keep the key order the client sent, as on
// /v1/chat/completions: the same conversation sent both ways renders the same prompt,
// so the second request reads all of it but the last token from the cache. (Sorted
// keys would put "alpha" before "zeta" and miss from the tools on.)
TEST(ServerAnthropic, SchemasAndInputsKeepTheClientsKeyOrder) {
  ServeProcess srv(qwen_args());
  auto c = srv.client();
  const std::string schema = kUnsortedSchema;
  const std::string chat = R"({"max_tokens": 1, "temperature": 0, "cache_salt": "order",
    "tools": [{"type": "function", "function": {"name": "lookup", "description": "Looks up.", "parameters": )" +
                           schema + R"(}}],
    "messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Find it."},
      {"role": "assistant", "content": "", "tool_calls": [{"id": "toolu_9", "type": "function",
        "function": {"name": "lookup", "arguments": {"zeta": "z", "alpha": 1}}}]},
      {"role": "tool", "tool_call_id": "toolu_9", "content": "found"}]})";
  const Reply oc = post_text(c, "/v1/chat/completions", chat);
  ASSERT_EQ(oc.status, 200) << oc.raw;
  const std::string anthropic = R"({"max_tokens": 1, "temperature": 0, "cache_salt": "order",
    "system": "You are terse.",
    "tools": [{"name": "lookup", "description": "Looks up.", "input_schema": )" +
                                schema + R"(}],
    "messages": [{"role": "user", "content": "Find it."},
      {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_9", "name": "lookup", "input": {"zeta": "z", "alpha": 1}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_9", "content": "found"}]}]})";
  const Reply a = post_text(c, "/v1/messages", anthropic);
  ASSERT_EQ(a.status, 200) << a.raw;
  const int64_t prompt = oc.body["usage"]["prompt_tokens"].get<int64_t>();
  EXPECT_EQ(prompt_of(a.body["usage"]), prompt);
  EXPECT_EQ(a.body["usage"]["cache_read_input_tokens"].get<int64_t>(), prompt - 1) << a.raw;
}

}  // namespace
}  // namespace pc::test
