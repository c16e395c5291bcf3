// POST /v1/responses on a real server (a random-weight model whose Qwen2 byte-level
// vocabulary spells any text, the Qwen2.5 template; --test-hooks forced replies make the
// model write the text or the tool call a test needs): whole and streamed responses and
// the streamed event sequence, a function tool round trip, previous_response_id
// continuing from the stored conversation with the history a cache hit, GET / DELETE,
// tenants apart, and the 400s / 404s naming the field.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "server_fixture.h"
#include "test_util.h"
#include "tier/tier_fixture.h"

namespace pc::test {
namespace {

std::string responses_model() { return micro_qwen2_model("responses-micro-qwen2.gguf"); }

std::vector<std::string> server_args(std::vector<std::string> more = {}) {
  std::vector<std::string> a = {"-m", responses_model(), "--test-hooks", "--chat-template-file",
                                shared_path("templates-2026/Qwen-Qwen2.5-7B-Instruct.jinja")};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

const json kTools = json::array({{{"type", "function"},
                                  {"name", "get_weather"},
                                  {"description", "Current weather in a city"},
                                  {"parameters", {{"type", "object"},
                                                  {"properties", {{"city", {{"type", "string"}}}}},
                                                  {"required", json::array({"city"})}}}},
                                 {{"type", "web_search"}}});

std::string call_text(const std::string& city) {
  return "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"" + city + "\"}}\n</tool_call>";
}

// The named events of an SSE body: (event name, data).
std::vector<std::pair<std::string, json>> events(const std::string& body) {
  std::vector<std::pair<std::string, json>> out;
  std::string name;
  std::istringstream in(body);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("event: ", 0) == 0) name = line.substr(7);
    if (line.rfind("data: ", 0) == 0) out.emplace_back(name, json::parse(line.substr(6)));
  }
  return out;
}

class Responses : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { srv_ = new ServeProcess(server_args()); }
  static void TearDownTestSuite() {
    delete srv_;
    srv_ = nullptr;
  }
  static Reply create(const json& body) {
    auto c = srv_->client();
    return post(c, "/v1/responses", body);
  }
  static ServeProcess* srv_;
};
ServeProcess* Responses::srv_ = nullptr;

TEST_F(Responses, WholeTextResponse) {
  const Reply r = create({{"input", "Say hello."}, {"instructions", "Be brief."}, {"temperature", 0},
                          {"max_output_tokens", 64}, {"test_forced_reply", "Hello there."}});
  ASSERT_EQ(r.status, 200) << r.raw;
  const json& b = r.body;
  EXPECT_EQ(b["object"], "response");
  EXPECT_TRUE(b["id"].get<std::string>().rfind("resp_", 0) == 0) << b["id"];
  EXPECT_EQ(b["status"], "completed");
  EXPECT_EQ(b["instructions"], "Be brief.");
  ASSERT_EQ(b["output"].size(), 1u) << r.raw;
  const json& m = b["output"][0];
  EXPECT_EQ(m["type"], "message");
  EXPECT_EQ(m["role"], "assistant");
  EXPECT_EQ(m["status"], "completed");
  EXPECT_EQ(m["content"][0]["type"], "output_text");
  EXPECT_EQ(m["content"][0]["text"], "Hello there.");
  const json& u = b["usage"];
  EXPECT_GT(u["input_tokens"].get<int64_t>(), 5);
  EXPECT_GT(u["output_tokens"].get<int64_t>(), 0);
  EXPECT_EQ(u["total_tokens"], u["input_tokens"].get<int64_t>() + u["output_tokens"].get<int64_t>());
  EXPECT_EQ(u["input_tokens_details"]["cached_tokens"], b["promptcache"]["cached_tokens"]);
  EXPECT_FALSE(b["promptcache"].contains("ignored_tools"));
}

TEST_F(Responses, MaxOutputTokensMakesItIncomplete) {
  const Reply r = create({{"input", "Tell a long story."}, {"temperature", 0}, {"max_output_tokens", 3},
                          {"test_forced_reply", "Once upon a time there was a cat who lived in a very old house."}});
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["status"], "incomplete");
  EXPECT_EQ(r.body["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(r.body["usage"]["output_tokens"], 3);
}

TEST_F(Responses, StreamedEventSequence) {
  const json body = {{"input", json::array({{{"role", "user"}, {"content", "Say hello."}}})},
                     {"temperature", 0}, {"stream", true}, {"test_forced_reply", "Hello streamed world."}};
  const Reply r = create(body);
  ASSERT_EQ(r.status, 200) << r.raw;
  const auto ev = events(r.raw);
  ASSERT_GE(ev.size(), 8u) << r.raw;
  std::vector<std::string> names;
  std::string text;
  for (size_t i = 0; i < ev.size(); ++i) {
    EXPECT_EQ(ev[i].second["type"], ev[i].first);
    EXPECT_EQ(ev[i].second["sequence_number"], int64_t(i));
    if (ev[i].first == "response.output_text.delta") {
      text += ev[i].second["delta"].get<std::string>();
      if (names.back() == "response.output_text.delta") continue;
    }
    names.push_back(ev[i].first);
  }
  const std::vector<std::string> want = {"response.created",           "response.in_progress",
                                         "response.output_item.added", "response.content_part.added",
                                         "response.output_text.delta", "response.output_text.done",
                                         "response.content_part.done", "response.output_item.done",
                                         "response.completed"};
  EXPECT_EQ(names, want) << r.raw;
  EXPECT_EQ(text, "Hello streamed world.");
  EXPECT_EQ(ev[0].second["response"]["status"], "in_progress");
  const json& done = ev.back().second["response"];
  EXPECT_EQ(done["status"], "completed");
  EXPECT_EQ(done["output"][0]["content"][0]["text"], text);
  EXPECT_EQ(ev[ev.size() - 4].second["text"], text);  // output_text.done
  const std::string item_id = done["output"][0]["id"];
  for (const auto& [name, data] : ev) {
    if (data.contains("item_id")) {
      EXPECT_EQ(data["item_id"], item_id) << name;
    }
  }
  EXPECT_GT(done["usage"]["output_tokens"].get<int64_t>(), 0);
  // The same request whole gives the same text, its prompt now cached.
  json whole = body;
  whole.erase("stream");
  const Reply w = create(whole);
  ASSERT_EQ(w.status, 200) << w.raw;
  EXPECT_EQ(w.body["output"][0]["content"][0]["text"], text);
  EXPECT_GT(w.body["usage"]["input_tokens_details"]["cached_tokens"].get<int64_t>(), 0);
}

// The model calls the tool; the client sends the call and its output back as items;
// the next turn hits the whole history (the prompt and reply of the call turn, but the
// final end-of-generation token).
TEST_F(Responses, FunctionToolRoundTrip) {
  const json input = json::array({{{"role", "user"}, {"content", "What is the weather in Paris?"}}});
  const Reply r = create({{"input", input}, {"tools", kTools}, {"temperature", 0}, {"store", false},
                          {"test_forced_reply", "Checking.\n" + call_text("Paris")}});
  ASSERT_EQ(r.status, 200) << r.raw;
  const json& out = r.body["output"];
  ASSERT_EQ(out.size(), 2u) << r.raw;
  EXPECT_EQ(out[0]["type"], "message");
  EXPECT_EQ(out[0]["content"][0]["text"], "Checking.");
  EXPECT_EQ(out[1]["type"], "function_call");
  EXPECT_EQ(out[1]["name"], "get_weather");
  EXPECT_EQ(json::parse(out[1]["arguments"].get<std::string>()), json({{"city", "Paris"}}));
  EXPECT_TRUE(out[1]["call_id"].get<std::string>().rfind("call_", 0) == 0) << out[1];
  EXPECT_TRUE(out[1]["id"].get<std::string>().rfind("fc_", 0) == 0) << out[1];
  EXPECT_EQ(r.body["promptcache"]["ignored_tools"], json::array({"web_search"}));
  const int64_t prompt = r.body["usage"]["input_tokens"], generated = r.body["usage"]["output_tokens"];

  json next = input;
  next.push_back({{"type", "message"}, {"role", "assistant"},
                  {"content", json::array({{{"type", "output_text"}, {"text", "Checking."}}})}});
  next.push_back({{"type", "reasoning"}, {"summary", json::array()}});
  next.push_back({{"type", "function_call"}, {"call_id", out[1]["call_id"]}, {"name", "get_weather"},
                  {"arguments", out[1]["arguments"]}});
  next.push_back({{"type", "function_call_output"}, {"call_id", out[1]["call_id"]}, {"output", "Sunny, 21 C"}});
  const Reply r2 = create({{"input", next}, {"tools", kTools}, {"temperature", 0}, {"stream", true},
                           {"test_forced_reply", "It is sunny in Paris."}});
  ASSERT_EQ(r2.status, 200) << r2.raw;
  const json done = events(r2.raw).back().second;
  ASSERT_EQ(done["type"], "response.completed") << r2.raw;
  EXPECT_EQ(done["response"]["output"][0]["content"][0]["text"], "It is sunny in Paris.");
  EXPECT_EQ(done["response"]["usage"]["input_tokens_details"]["cached_tokens"].get<int64_t>(), prompt + generated - 1)
      << done["response"]["promptcache"].dump();
  EXPECT_EQ(done["response"]["promptcache"]["spliced_replies"], 1);
}

// A client that stores responses (the AI SDK) sends their output items back by id.
TEST_F(Responses, ItemReferencesResolveToStoredOutputItems) {
  const json input = json::array({{{"role", "user"}, {"content", "What is the weather in Lima?"}}});
  const Reply r = create({{"input", input}, {"tools", kTools}, {"temperature", 0},
                          {"test_forced_reply", "Let me see.\n" + call_text("Lima")}});
  ASSERT_EQ(r.status, 200) << r.raw;
  const json& out = r.body["output"];
  ASSERT_EQ(out.size(), 2u) << r.raw;
  json next = input;
  next.push_back({{"type", "item_reference"}, {"id", out[0]["id"]}});
  next.push_back({{"type", "item_reference"}, {"id", out[1]["id"]}});
  next.push_back({{"type", "function_call_output"}, {"call_id", out[1]["call_id"]}, {"output", "Warm"}});
  const Reply r2 = create({{"input", next}, {"tools", kTools}, {"temperature", 0}, {"test_forced_reply", "Warm."}});
  ASSERT_EQ(r2.status, 200) << r2.raw;
  EXPECT_EQ(r2.body["usage"]["input_tokens_details"]["cached_tokens"].get<int64_t>(),
            r.body["usage"]["input_tokens"].get<int64_t>() + r.body["usage"]["output_tokens"].get<int64_t>() - 1)
      << r2.body["promptcache"].dump();
  next[1]["id"] = "msg_00000000000000000000000000000000_0";
  const Reply bad = create({{"input", next}, {"tools", kTools}});
  EXPECT_EQ(bad.status, 400) << bad.raw;
  EXPECT_EQ(bad.body["error"]["param"], "input[1].id") << bad.raw;
}

TEST_F(Responses, StreamedFunctionCallEvents) {
  const Reply r = create({{"input", "Weather in Oslo?"}, {"tools", kTools}, {"stream", true}, {"temperature", 0},
                          {"test_forced_reply", call_text("Oslo")}});
  ASSERT_EQ(r.status, 200) << r.raw;
  std::vector<std::string> names;
  json call;
  for (const auto& [name, data] : events(r.raw)) {
    names.push_back(name);
    if (name == "response.function_call_arguments.done") call = data;
  }
  const std::vector<std::string> want = {"response.created",
                                         "response.in_progress",
                                         "response.output_item.added",
                                         "response.function_call_arguments.delta",
                                         "response.function_call_arguments.done",
                                         "response.output_item.done",
                                         "response.completed"};
  EXPECT_EQ(names, want) << r.raw;
  EXPECT_EQ(json::parse(call["arguments"].get<std::string>()), json({{"city", "Oslo"}}));
}

// Each turn continues the previous one by id alone: the stored conversation is
// rendered first and the stored reply's ids spliced, so the history is a cache hit.
TEST_F(Responses, PreviousResponseIdContinuesAsACacheHit) {
  std::string prev;
  int64_t prompt = 0, generated = 0;
  const char* replies[] = {"The cat sat on the mat.", "It was a sunny day.", "Then it went home."};
  for (int turn = 0; turn < 3; ++turn) {
    SCOPED_TRACE("turn " + std::to_string(turn));
    json body = {{"input", "Tell me more, part " + std::to_string(turn) + "."},
                 {"instructions", "You tell stories."}, {"temperature", 0}, {"test_forced_reply", replies[turn]}};
    if (!prev.empty()) body["previous_response_id"] = prev;
    if (turn == 1) body["stream"] = true;
    const Reply r = create(body);
    ASSERT_EQ(r.status, 200) << r.raw;
    const json resp = turn == 1 ? events(r.raw).back().second["response"] : r.body;
    EXPECT_EQ(resp["output"][0]["content"][0]["text"], replies[turn]);
    if (turn > 0) {
      EXPECT_EQ(resp["previous_response_id"], prev);
      EXPECT_EQ(resp["usage"]["input_tokens_details"]["cached_tokens"].get<int64_t>(), prompt + generated - 1)
          << resp["promptcache"].dump();
      EXPECT_EQ(resp["promptcache"]["spliced_replies"], turn) << resp["promptcache"].dump();
    }
    prev = resp["id"];
    prompt = resp["usage"]["input_tokens"];
    generated = resp["usage"]["output_tokens"];
  }
}

TEST_F(Responses, GetInputItemsAndDelete) {
  const Reply r = create({{"input", "Hello."}, {"temperature", 0}, {"test_forced_reply", "Hi."}});
  ASSERT_EQ(r.status, 200) << r.raw;
  const std::string id = r.body["id"];
  auto c = srv_->client();
  for (const std::string prefix : {"/v1", ""}) {
    const Reply g = get(c, prefix + "/responses/" + id);
    ASSERT_EQ(g.status, 200) << g.raw;
    EXPECT_EQ(g.body, r.body);
  }
  const Reply items = get(c, "/v1/responses/" + id + "/input_items");
  ASSERT_EQ(items.status, 200) << items.raw;
  EXPECT_EQ(items.body["data"][0]["content"][0]["text"], "Hello.");
  auto d = c.Delete(("/v1/responses/" + id).c_str());
  ASSERT_TRUE(d);
  EXPECT_EQ(d->status, 200) << d->body;
  EXPECT_EQ(json::parse(d->body)["deleted"], true);
  EXPECT_EQ(get(c, "/v1/responses/" + id).status, 404);
  auto again = c.Delete(("/v1/responses/" + id).c_str());
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 404);
  const Reply cont = create({{"input", "More."}, {"previous_response_id", id}});
  EXPECT_EQ(cont.status, 404) << cont.raw;
  EXPECT_EQ(cont.body["error"]["param"], "previous_response_id");
  EXPECT_NE(cont.body["error"]["message"].get<std::string>().find(id), std::string::npos);
  // store: false keeps nothing.
  const Reply unstored = create({{"input", "Hello."}, {"store", false}, {"test_forced_reply", "Hi."}});
  ASSERT_EQ(unstored.status, 200);
  EXPECT_EQ(get(c, "/v1/responses/" + unstored.body["id"].get<std::string>()).status, 404);
  // Without /v1 too.
  const Reply bare = post(c, "/responses", {{"input", "Hello."}, {"test_forced_reply", "Hi."}});
  EXPECT_EQ(bare.status, 200) << bare.raw;
}

TEST_F(Responses, BadFieldsAreNamed) {
  const std::vector<std::pair<json, std::string>> cases = {
      {json::object(), "input"},
      {{{"input", 5}}, "input"},
      {{{"input", json::array({{{"type", "message"}, {"role", "wizard"}, {"content", "x"}}})}}, "input[0].role"},
      {{{"input", json::array({{{"role", "user"}, {"content", json::array({{{"type", "input_image"}, {"image_url", "x"}}})}}})}},
       "input[0].content[0].type"},
      {{{"input", json::array({{{"type", "function_call"}, {"name", "f"}, {"arguments", "{}"}}})}}, "input[0].call_id"},
      {{{"input", json::array({{{"type", "web_search_call"}, {"id", "x"}}})}}, "input[0].type"},
      {{{"input", "x"}, {"text", {{"format", {{"type", "json_schema"}, {"name", "x"}, {"schema", {{"not", json::object()}}}}}}}},
       "text.format.schema.not"},
      {{{"input", "x"}, {"text", {{"format", {{"type", "yaml"}}}}}}, "text.format.type"},
      {{{"input", "x"}, {"max_output_tokens", 0}}, "max_output_tokens"},
      {{{"input", "x"}, {"temperature", 3}}, "temperature"},
      {{{"input", "x"}, {"background", true}}, "background"},
      {{{"input", "x"}, {"tools", json::array({{{"type", "function"}}})}}, "tools[0].name"},
      {{{"input", "x"}, {"tool_choice", {{"type", "web_search"}}}}, "tool_choice"},
      {{{"input", "x"}, {"tools", kTools}, {"tool_choice", {{"type", "function"}, {"name", "nope"}}}}, "tool_choice"},
      {{{"input", "x"}, {"previous_response_id", "../etc"}}, "previous_response_id"},
      {{{"input", "x"}, {"store", "yes"}}, "store"},
  };
  for (const auto& [body, param] : cases) {
    const Reply r = create(body);
    EXPECT_EQ(r.status, 400) << body.dump() << " → " << r.raw;
    EXPECT_EQ(r.body["error"]["param"], param) << body.dump() << " → " << r.raw;
  }
  // max_output_tokens past the context is no error: the reply is capped at the context's end.
  const Reply capped = create({{"input", "x"}, {"max_output_tokens", 100000}, {"test_forced_reply", "Hi."}});
  ASSERT_EQ(capped.status, 200) << capped.raw;
  EXPECT_EQ(capped.body["promptcache"]["max_tokens_capped"].get<int64_t>() + capped.body["usage"]["input_tokens"].get<int64_t>(),
            4096) << capped.raw;
  auto c = srv_->client();
  const Reply g = get(c, "/v1/responses/resp_doesnotexist");
  EXPECT_EQ(g.status, 404);
  EXPECT_EQ(g.body["error"]["type"], "invalid_request_error");
  EXPECT_NE(g.body["error"]["message"].get<std::string>().find("resp_doesnotexist"), std::string::npos);
}

// With API keys a tenant can neither read, continue nor delete another's responses.
TEST(ResponsesTenancy, TenantsAreApart) {
  const std::string keys = temp_dir() + "/responses-keys.txt";
  {
    std::ofstream f(keys);
    f << "key-alice alice\nkey-bob bob\n";
  }
  ServeProcess srv(server_args({"--api-keys", keys}));
  auto alice = srv.client("key-alice");
  auto bob = srv.client("key-bob");
  const Reply r = post(alice, "/v1/responses", {{"input", "Secret."}, {"test_forced_reply", "Noted."}});
  ASSERT_EQ(r.status, 200) << r.raw;
  const std::string id = r.body["id"];
  EXPECT_EQ(get(alice, "/v1/responses/" + id).status, 200);
  EXPECT_EQ(get(bob, "/v1/responses/" + id).status, 404);
  EXPECT_EQ(post(bob, "/v1/responses", {{"input", "x"}, {"previous_response_id", id}}).status, 404);
  auto d = bob.Delete(("/v1/responses/" + id).c_str());
  ASSERT_TRUE(d);
  EXPECT_EQ(d->status, 404);
  EXPECT_EQ(get(alice, "/v1/responses/" + id).status, 200);
}

// With --redis a response stored by one server is read and continued on another,
// its reply's ids spliced there; a delete on one is seen by a third.
TEST(ResponsesCluster, AnotherServerContinuesAStoredResponse) {
  RedisServer redis;
  ASSERT_TRUE(redis.available()) << "redis-server is not installed (scripts/setup.sh installs it)";
  ServeProcess a(server_args({"--redis", redis.url()}));
  ServeProcess b(server_args({"--redis", redis.url()}));
  auto ca = a.client(), cb = b.client();
  const Reply r = post(ca, "/v1/responses", {{"input", "Start a story."}, {"temperature", 0},
                                             {"test_forced_reply", "A fox ran through the woods."}});
  ASSERT_EQ(r.status, 200) << r.raw;
  const std::string id = r.body["id"];
  const Reply g = get(cb, "/v1/responses/" + id);
  ASSERT_EQ(g.status, 200) << g.raw;
  EXPECT_EQ(g.body["output"], r.body["output"]);
  const Reply c = post(cb, "/v1/responses", {{"input", "Go on."}, {"previous_response_id", id}, {"temperature", 0},
                                             {"test_forced_reply", "It found a river."}});
  ASSERT_EQ(c.status, 200) << c.raw;
  // The reply's generated ids were spliced (not re-tokenized: no unknown_reply); the KV
  // itself comes from the Redis tier in whole pages, so a partial page may be recomputed.
  EXPECT_EQ(c.body["promptcache"]["spliced_replies"], 1) << c.body["promptcache"].dump();
  EXPECT_NE(c.body["promptcache"]["reason"], "unknown_reply") << c.body["promptcache"].dump();
  EXPECT_GT(c.body["usage"]["input_tokens_details"]["cached_tokens"].get<int64_t>(), 0);
  // Deleted on b: gone on a too (its memory copy aside, Redis no longer has it for a third).
  auto d = cb.Delete(("/v1/responses/" + id).c_str());
  ASSERT_TRUE(d);
  EXPECT_EQ(d->status, 200);
  ServeProcess third(server_args({"--redis", redis.url()}));
  auto c3 = third.client();
  EXPECT_EQ(get(c3, "/v1/responses/" + id).status, 404);
}

}  // namespace
}  // namespace pc::test

namespace pc::test {
namespace {

// A function tool's parameters keep the key order the client sent, as on
// /v1/chat/completions: the same request sent both ways renders the same prompt, so the
// second reads all of it but the last token from the cache.
TEST(ServerResponses, ToolSchemasKeepTheClientsKeyOrder) {
  ServeProcess srv(server_args());
  auto c = srv.client();
  const std::string schema = kUnsortedSchema;
  const std::string chat = R"({"max_tokens": 1, "temperature": 0, "cache_salt": "order",
    "tools": [{"type": "function", "function": {"name": "lookup", "description": "Looks up.", "parameters": )" +
                           schema + R"(}}],
    "messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Find it."}]})";
  auto oc = c.Post("/v1/chat/completions", chat, "application/json");
  ASSERT_TRUE(oc);
  ASSERT_EQ(oc->status, 200) << oc->body;
  const std::string responses = R"({"max_output_tokens": 1, "temperature": 0, "cache_salt": "order", "store": false,
    "instructions": "You are terse.",
    "tools": [{"type": "function", "name": "lookup", "description": "Looks up.", "parameters": )" +
                                schema + R"(}],
    "input": "Find it."})";
  auto r = c.Post("/v1/responses", responses, "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const int64_t prompt = json::parse(oc->body)["usage"]["prompt_tokens"].get<int64_t>();
  const json u = json::parse(r->body)["usage"];
  EXPECT_EQ(u["input_tokens"].get<int64_t>(), prompt);
  EXPECT_EQ(u["input_tokens_details"]["cached_tokens"].get<int64_t>(), prompt - 1) << r->body;
}

}  // namespace
}  // namespace pc::test
