// A forced call of strict tools through a real server, with the Qwen3.5 template (XML
// calls) and gpt-oss's (harmony): the model has random weights, so only the grammar
// makes its reply a call; every reply parses into one call of an allowed tool whose
// arguments satisfy the schema, on chat (required and named), Responses, and streamed.
#include <gtest/gtest.h>

#include "server_fixture.h"
#include "test_util.h"

namespace pc::test {
namespace {

std::string random_model() { return micro_qwen2_model("forced-call-micro-qwen2.gguf"); }

// Values bounded, so that a random model's call ends well within max_tokens.
const char* kTools = R"([
  {"type": "function", "function": {"name": "forecast", "description": "The forecast", "strict": true, "parameters": {"type": "object",
    "properties": {"city": {"type": "string", "maxLength": 6}, "days": {"type": "integer", "minimum": 1, "maximum": 7},
                   "unit": {"enum": ["c", "f"]}, "hourly": {"type": "boolean"}},
    "required": ["city", "days"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "alarm", "description": "Sets an alarm", "strict": true, "parameters": {"type": "object",
    "properties": {"at": {"type": "string", "format": "time"}}, "required": ["at"], "additionalProperties": false}}}])";

void expect_valid_call(const std::string& name, const std::string& arguments, const std::string& raw) {
  const json args = json::parse(arguments, nullptr, false);
  ASSERT_TRUE(args.is_object()) << raw;
  if (name == "forecast") {
    ASSERT_TRUE(args.contains("city") && args["city"].is_string()) << raw;
    EXPECT_LE(args["city"].get<std::string>().size(), 24u) << raw;  // 6 characters of up to 4 bytes
    ASSERT_TRUE(args.contains("days") && args["days"].is_number_integer()) << raw;
    EXPECT_TRUE(args["days"].get<int>() >= 1 && args["days"].get<int>() <= 7) << raw;
    if (args.contains("unit")) { EXPECT_TRUE(args["unit"] == "c" || args["unit"] == "f") << raw; }
    if (args.contains("hourly")) { EXPECT_TRUE(args["hourly"].is_boolean()) << raw; }
    for (const auto& [k, v] : args.items())
      EXPECT_TRUE(k == "city" || k == "days" || k == "unit" || k == "hourly") << raw;
  } else {
    ASSERT_EQ(name, "alarm") << raw;
    ASSERT_TRUE(args.contains("at") && args["at"].is_string()) << raw;
    EXPECT_GE(args["at"].get<std::string>().size(), 9u) << raw;  // HH:MM:SS and a zone
    EXPECT_EQ(args.size(), 1u) << raw;
  }
}

struct Template {
  const char* label;
  const char* file;
  const char* extra;  // request fields (Qwen3.5: thinking off)
};

class ForcedCallGrammar : public ::testing::TestWithParam<Template> {
 protected:
  void SetUp() override {
    srv_ = std::make_unique<ServeProcess>(std::vector<std::string>{
        "-m", random_model(), "--chat-template-file", shared_path(std::string("templates-2026/") + GetParam().file + ".jinja"),
        "--kv-memory", "64MiB"});
  }
  std::string chat_body(const std::string& choice, int seed, bool stream = false) const {
    const json extra = json::parse(GetParam().extra);
    std::string fields;
    for (auto& [k, v] : extra.items()) fields += ", \"" + k + "\": " + v.dump();
    return R"({"messages": [{"role": "user", "content": "Weather in Oslo?"}], "max_tokens": 800, "temperature": 1,
               "seed": )" + std::to_string(seed) + (stream ? R"(, "stream": true)" : "") + R"(, "tools": )" + kTools +
           R"(, "tool_choice": )" + choice + fields + "}";
  }
  std::unique_ptr<ServeProcess> srv_;
};

TEST_P(ForcedCallGrammar, ChatCallsFollowTheSchemas) {
  auto c = srv_->client();
  std::set<std::string> names;
  for (const std::string choice : {R"("required")", R"({"type": "function", "function": {"name": "alarm"}})"}) {
    for (int seed = 0; seed < 4; ++seed) {
      const Reply r = post_text(c, "/v1/chat/completions", chat_body(choice, seed));
      ASSERT_EQ(r.status, 200) << r.raw;
      EXPECT_EQ(r.body["choices"][0]["finish_reason"], "tool_calls") << r.raw;
      const json& calls = r.body["choices"][0]["message"]["tool_calls"];
      ASSERT_EQ(calls.size(), 1u) << r.raw;
      const std::string name = calls[0]["function"]["name"];
      if (choice != R"("required")") { EXPECT_EQ(name, "alarm") << r.raw; }
      names.insert(name);
      expect_valid_call(name, calls[0]["function"]["arguments"], r.raw);
    }
  }
  EXPECT_TRUE(names.count("forecast")) << "no seed chose forecast under \"required\"";
  // Streamed: the call goes out whole, as the same kind of call.
  auto s = c.Post("/v1/chat/completions", chat_body(R"("required")", 11, true), "application/json");
  ASSERT_TRUE(s);
  std::string name, arguments;
  for (const std::string& e : sse_events(s->body)) {
    if (e == "[DONE]") continue;
    const json d = json::parse(e);
    if (d["choices"].empty() || !d["choices"][0]["delta"].contains("tool_calls")) continue;
    const json& f = d["choices"][0]["delta"]["tool_calls"][0]["function"];
    if (f.contains("name")) name = f["name"];
    arguments += f["arguments"].get<std::string>();
  }
  ASSERT_FALSE(name.empty()) << s->body;
  expect_valid_call(name, arguments, s->body);
}

TEST_P(ForcedCallGrammar, ResponsesCallsFollowTheSchemas) {
  auto c = srv_->client();
  json tools = json::array();
  for (const json& t : json::parse(kTools)) {  // the flat Responses shape
    json f = t["function"];
    f["type"] = "function";
    tools.push_back(f);
  }
  for (int seed = 0; seed < 2; ++seed) {
    json body = {{"input", "Weather in Oslo?"}, {"max_output_tokens", 800}, {"temperature", 1}, {"seed", seed},
                 {"tools", tools}, {"tool_choice", "required"}};
    const json extra = json::parse(GetParam().extra);  // kept alive for the loop
    for (auto& [k, v] : extra.items()) body[k] = v;
    const Reply r = post(c, "/v1/responses", body);
    ASSERT_EQ(r.status, 200) << r.raw;
    const json* call = nullptr;
    for (const json& item : r.body["output"])
      if (item["type"] == "function_call") call = &item;
    ASSERT_NE(call, nullptr) << r.raw;
    expect_valid_call((*call)["name"], (*call)["arguments"], r.raw);
  }
}

TEST_P(ForcedCallGrammar, AnthropicCallsFollowTheSchemas) {
  auto c = srv_->client();
  json tools = json::array();
  for (const json& t : json::parse(kTools)) {  // Anthropic's shape
    const json& f = t["function"];
    tools.push_back({{"name", f["name"]}, {"description", f["description"]}, {"input_schema", f["parameters"]},
                     {"strict", true}});
  }
  const json messages = json::array({{{"role", "user"}, {"content", "Weather in Oslo?"}}});
  const json any = json::parse(R"({"type": "any"})"), named = json::parse(R"({"type": "tool", "name": "forecast"})");
  for (const json* choice : {&any, &named}) {
    for (int seed = 0; seed < 2; ++seed) {
      json body = {{"messages", messages}, {"max_tokens", 800}, {"temperature", 1},
                   {"seed", seed}, {"tools", tools}, {"tool_choice", *choice}};
      const Reply r = post(c, "/v1/messages", body);
      ASSERT_EQ(r.status, 200) << r.raw;
      EXPECT_EQ(r.body["stop_reason"], "tool_use") << r.raw;
      const json* use = nullptr;
      for (const json& block : r.body["content"])
        if (block["type"] == "tool_use") use = &block;
      ASSERT_NE(use, nullptr) << r.raw;
      if (choice == &named) { EXPECT_EQ((*use)["name"], "forecast") << r.raw; }
      expect_valid_call((*use)["name"], (*use)["input"].dump(), r.raw);
    }
  }
  // A schema the engine cannot enforce: 400 naming the request's own field.
  tools[1]["input_schema"]["properties"]["at"] = {{"type", "string"}, {"pattern", "[0-9]+"}};
  const Reply bad = post(c, "/v1/messages", {{"messages", messages}, {"max_tokens", 8}, {"tools", tools},
                                             {"tool_choice", any}});
  EXPECT_EQ(bad.status, 400) << bad.raw;
  EXPECT_NE(bad.raw.find("tools[1].input_schema.properties.at.pattern"), std::string::npos) << bad.raw;
}

TEST_P(ForcedCallGrammar, BadChoicesAndSchemasAre400sNamingTheField) {
  auto c = srv_->client();
  Reply r = post_text(c, "/v1/chat/completions", chat_body(R"({"type": "function", "function": {"name": "nope"}})", 0));
  EXPECT_EQ(r.status, 400) << r.raw;
  EXPECT_EQ(r.body["error"]["param"], "tool_choice") << r.raw;
  const std::string bad = R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 8, "tool_choice": "required",
      "tools": [{"type": "function", "function": {"name": "f", "description": "d", "strict": true, "parameters": {"type": "object",
        "properties": {"s": {"type": "string", "pattern": "a+"}}}}}]})";
  r = post_text(c, "/v1/chat/completions", bad);
  EXPECT_EQ(r.status, 400) << r.raw;
  EXPECT_EQ(r.body["error"]["param"], "tools[0].function.parameters.properties.s.pattern") << r.raw;
}

INSTANTIATE_TEST_SUITE_P(Templates, ForcedCallGrammar,
                         ::testing::Values(Template{"Qwen35", "Qwen-Qwen3.5-4B",
                                                    R"({"chat_template_kwargs": {"enable_thinking": false}})"},
                                           Template{"GptOss", "openai-gpt-oss-120b", "{}"}),
                         [](const auto& info) { return std::string(info.param.label); });

}  // namespace
}  // namespace pc::test
