// Structured output through a real server (stories260K, Qwen2.5's template):
// response_format json_schema / json_object on chat, llama-server's json_schema and
// grammar on completions, Anthropic's output_config.format; outputs parse and
// validate, properties keep the schema's order, a cached rerun gives the same
// answer, and bad schemas or grammars are 400s naming the field and keyword.
#include <gtest/gtest.h>

#include "server_fixture.h"

namespace pc::test {
namespace {

const json kPerson = {
    {"type", "object"},
    {"properties",
     {{"zname", {{"type", "string"}, {"maxLength", 10}}},
      {"age", {{"type", "integer"}, {"minimum", 0}, {"maximum", 120}}},
      {"color", {{"enum", {"red", "green", "blue"}}}},
      {"born", {{"type", "string"}, {"format", "date"}}}}},
    {"required", {"zname", "age", "color", "born"}},
    {"additionalProperties", false}};

// The raw JSON of kPerson with "zname" first: the parsed json sorts keys, the text keeps them.
const std::string kPersonText =
    R"({"type": "object", "properties": {"zname": {"type": "string", "maxLength": 10},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "color": {"enum": ["red", "green", "blue"]}, "born": {"type": "string", "format": "date"}},
        "required": ["zname", "age", "color", "born"], "additionalProperties": false})";

class StructuredOutput : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    srv_ = new ServeProcess({"-m", shared_path("models/stories260K.gguf"), "--chat-template-file",
                             shared_path("templates-2026/Qwen-Qwen2.5-7B-Instruct.jinja"), "--parallel", "2",
                             "--kv-memory", "64MiB"});
  }
  static void TearDownTestSuite() {
    delete srv_;
    srv_ = nullptr;
  }
  // POST of a raw body text (to keep key order).
  Reply post_text(const std::string& path, const std::string& body) { return pc::test::post_text(c, path, body); }
  static ServeProcess* srv_;
  httplib::Client c = srv_->client();
};
ServeProcess* StructuredOutput::srv_ = nullptr;

void expect_person(const std::string& text) {
  const json v = json::parse(text, nullptr, false);
  ASSERT_TRUE(v.is_object()) << text;
  ASSERT_TRUE(v["zname"].is_string()) << text;
  EXPECT_LE(v["zname"].get<std::string>().size(), 40u) << text;  // 10 characters of up to 4 bytes
  ASSERT_TRUE(v["age"].is_number_integer()) << text;
  EXPECT_GE(v["age"].get<int>(), 0);
  EXPECT_LE(v["age"].get<int>(), 120);
  EXPECT_TRUE(v["color"] == "red" || v["color"] == "green" || v["color"] == "blue") << text;
  ASSERT_TRUE(v["born"].is_string()) << text;
  EXPECT_EQ(v["born"].get<std::string>().size(), 10u) << text;
  EXPECT_EQ(v.size(), 4u) << text;
  // The schema's order, not the alphabetical one.
  EXPECT_LT(text.find("\"zname\""), text.find("\"age\"")) << text;
  EXPECT_LT(text.find("\"color\""), text.find("\"born\"")) << text;
}

std::string chat_body(const std::string& format, uint64_t seed, bool stream = false) {
  return R"({"messages": [{"role": "user", "content": "Describe a person."}], "max_tokens": 400,
             "temperature": 1, "seed": )" +
         std::to_string(seed) + (stream ? R"(, "stream": true)" : "") + R"(, "response_format": )" + format + "}";
}

TEST_F(StructuredOutput, ChatJsonSchemaValidatesInSchemaOrder) {
  const std::string format = R"({"type": "json_schema", "json_schema": {"name": "person", "strict": true, "schema": )" +
                             kPersonText + "}}";
  for (uint64_t seed : {1, 2, 3}) {
    Reply r = post_text("/v1/chat/completions", chat_body(format, seed));
    ASSERT_EQ(r.status, 200) << r.raw;
    EXPECT_EQ(r.body["choices"][0]["finish_reason"], "stop") << r.raw;
    expect_person(r.body["choices"][0]["message"]["content"].get<std::string>());
  }
  // The same request again: its prompt is cached, the answer the same.
  Reply a = post_text("/v1/chat/completions", chat_body(format, 7));
  Reply b = post_text("/v1/chat/completions", chat_body(format, 7));
  ASSERT_EQ(b.status, 200) << b.raw;
  EXPECT_GT(b.body["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 0) << b.raw;
  EXPECT_EQ(a.body["choices"][0]["message"]["content"], b.body["choices"][0]["message"]["content"]);
  // Streamed: the deltas join into the same kind of object.
  auto s = c.Post("/v1/chat/completions", chat_body(format, 4, true), "application/json");
  ASSERT_TRUE(s);
  std::string text;
  for (const auto& e : sse_events(s->body)) {
    if (e == "[DONE]") continue;
    const json d = json::parse(e);
    if (!d["choices"].empty() && d["choices"][0]["delta"].contains("content") &&
        d["choices"][0]["delta"]["content"].is_string())
      text += d["choices"][0]["delta"]["content"].get<std::string>();
  }
  expect_person(text);
}

TEST_F(StructuredOutput, ChatJsonObjectStartsAnObject) {
  Reply r = post_text("/v1/chat/completions", chat_body(R"({"type": "json_object"})", 5));
  ASSERT_EQ(r.status, 200) << r.raw;
  const std::string text = r.body["choices"][0]["message"]["content"];
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text[0], '{') << text;
  if (r.body["choices"][0]["finish_reason"] == "stop") { EXPECT_TRUE(json::parse(text, nullptr, false).is_object()) << text; }
}

TEST_F(StructuredOutput, LlamaServerJsonSchemaAndGrammarFields) {
  json body = {{"prompt", "Once upon a time"}, {"max_tokens", 300}, {"temperature", 1}, {"seed", 9}};
  body["json_schema"] = kPerson;
  Reply r = post(c, "/v1/completions", body);
  ASSERT_EQ(r.status, 200) << r.raw;
  const json v = json::parse(r.body["choices"][0]["text"].get<std::string>(), nullptr, false);
  EXPECT_TRUE(v.is_object() && v.size() == 4) << r.raw;
  body.erase("json_schema");
  body["grammar"] = "root ::= (\"yes\" | \"no\") \"!\"\n";
  for (int seed = 0; seed < 4; ++seed) {
    body["seed"] = seed;
    Reply g = post(c, "/completions", body);
    ASSERT_EQ(g.status, 200) << g.raw;
    const std::string t = g.body["choices"][0]["text"];
    EXPECT_TRUE(t == "yes!" || t == "no!") << t;
    EXPECT_EQ(g.body["choices"][0]["finish_reason"], "stop");
  }
}

TEST_F(StructuredOutput, AnthropicOutputConfigFormat) {
  const std::string body = R"({"max_tokens": 400, "temperature": 1,
      "messages": [{"role": "user", "content": "Describe a person."}],
      "output_config": {"format": {"type": "json_schema", "schema": )" +
                           kPersonText + "}}}";
  Reply r = post_text("/v1/messages", body);
  ASSERT_EQ(r.status, 200) << r.raw;
  expect_person(r.body["content"][0]["text"].get<std::string>());
}

// The Responses API's text.format (the flat json_schema shape); a forced call with it is a 400.
TEST_F(StructuredOutput, ResponsesTextFormat) {
  const std::string body = R"({"max_output_tokens": 400, "temperature": 1, "input": "Describe a person.",
      "text": {"format": {"type": "json_schema", "name": "person", "strict": true, "schema": )" +
                           kPersonText + "}}}";
  Reply r = post_text("/v1/responses", body);
  ASSERT_EQ(r.status, 200) << r.raw;
  std::string text;
  for (const json& item : r.body["output"])
    if (item["type"] == "message")
      for (const json& part : item["content"])
        if (part["type"] == "output_text") text += part["text"].get<std::string>();
  expect_person(text);
  Reply bad = post_text("/v1/responses", R"({"input": "x", "text": {"format": {"type": "json_schema", "name": "s",
      "schema": {"type": "string", "pattern": "a+"}}}})");
  EXPECT_EQ(bad.status, 400) << bad.raw;
  EXPECT_EQ(bad.body["error"]["param"], "text.format.schema.pattern") << bad.raw;
  Reply forced = post_text("/v1/responses", R"({"input": "x", "text": {"format": {"type": "json_object"}},
      "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}], "tool_choice": "required"})");
  EXPECT_EQ(forced.status, 400) << forced.raw;
  EXPECT_EQ(forced.body["error"]["param"], "tool_choice") << forced.raw;
}

// /v1/responses: a forced call of a strict (flat, Responses-shaped) tool follows its schema;
// an unsupported keyword is a 400 naming the request's own field.
TEST_F(StructuredOutput, ResponsesStrictToolArguments) {
  const std::string tools = R"([{"type": "web_search"},
    {"type": "function", "name": "forecast", "strict": true, "parameters": {"type": "object",
      "properties": {"city": {"type": "string", "maxLength": 12}, "days": {"type": "integer", "minimum": 1, "maximum": 7}},
      "required": ["city", "days"], "additionalProperties": false}}])";
  for (int seed = 0; seed < 3; ++seed) {
    Reply r = post_text("/v1/responses", R"({"input": "Weather?", "max_output_tokens": 300, "temperature": 1,
        "seed": )" + std::to_string(seed) + R"(, "tools": )" + tools + R"(, "tool_choice": "required"})");
    ASSERT_EQ(r.status, 200) << r.raw;
    const json* call = nullptr;
    for (const json& item : r.body["output"])
      if (item["type"] == "function_call") call = &item;
    ASSERT_NE(call, nullptr) << r.raw;
    EXPECT_EQ((*call)["name"], "forecast") << r.raw;
    const json args = json::parse((*call)["arguments"].get<std::string>(), nullptr, false);
    ASSERT_TRUE(args.is_object()) << r.raw;
    ASSERT_TRUE(args["city"].is_string()) << r.raw;
    ASSERT_TRUE(args["days"].is_number_integer()) << r.raw;
    EXPECT_GE(args["days"].get<int>(), 1);
    EXPECT_LE(args["days"].get<int>(), 7);
    EXPECT_EQ(args.size(), 2u) << r.raw;
  }
  Reply bad = post_text("/v1/responses", R"({"input": "x", "tool_choice": "required", "tools": [{"type": "web_search"},
      {"type": "function", "name": "f", "strict": true, "parameters": {"type": "object",
       "properties": {"s": {"type": "string", "pattern": "a+"}}, "required": ["s"], "additionalProperties": false}}]})");
  EXPECT_EQ(bad.status, 400) << bad.raw;
  EXPECT_EQ(bad.body["error"]["param"], "tools[1].parameters.properties.s.pattern") << bad.raw;
}

// A forced call of a strict tool: its arguments follow the tool's schema.
TEST_F(StructuredOutput, StrictToolArgumentsFollowTheSchema) {
  const std::string tools = R"([
    {"type": "function", "function": {"name": "forecast", "strict": true, "parameters": {"type": "object",
      "properties": {"city": {"type": "string", "maxLength": 12}, "days": {"type": "integer", "minimum": 1, "maximum": 7}},
      "required": ["city", "days"], "additionalProperties": false}}},
    {"type": "function", "function": {"name": "alarm", "strict": true, "parameters": {"type": "object",
      "properties": {"at": {"type": "string", "format": "time"}}, "required": ["at"], "additionalProperties": false}}}])";
  for (const std::string choice : {R"({"type": "function", "function": {"name": "forecast"}})", R"("required")"}) {
    for (int seed = 0; seed < 3; ++seed) {
      const std::string body = R"({"messages": [{"role": "user", "content": "Weather?"}], "max_tokens": 300,
          "temperature": 1, "seed": )" + std::to_string(seed) +
                               R"(, "tools": )" + tools + R"(, "tool_choice": )" + choice + "}";
      Reply r = post_text("/v1/chat/completions", body);
      ASSERT_EQ(r.status, 200) << r.raw;
      const json& calls = r.body["choices"][0]["message"]["tool_calls"];
      ASSERT_EQ(calls.size(), 1u) << r.raw;
      const std::string fn = calls[0]["function"]["name"];
      const json args = json::parse(calls[0]["function"]["arguments"].get<std::string>(), nullptr, false);
      ASSERT_TRUE(args.is_object()) << r.raw;
      if (fn == "forecast") {
        EXPECT_EQ(args.size(), 2u) << r.raw;
        EXPECT_TRUE(args["city"].is_string()) << r.raw;
        ASSERT_TRUE(args["days"].is_number_integer()) << r.raw;
        EXPECT_TRUE(args["days"].get<int>() >= 1 && args["days"].get<int>() <= 7) << r.raw;
      } else {
        EXPECT_EQ(fn, "alarm");
        EXPECT_EQ(choice, R"("required")");
        ASSERT_TRUE(args["at"].is_string()) << r.raw;
      }
    }
  }
  // A strict tool whose schema the engine cannot enforce: 400 naming it.
  const std::string bad = R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 8,
      "tools": [{"type": "function", "function": {"name": "f", "strict": true,
                 "parameters": {"type": "object", "properties": {"s": {"type": "string", "pattern": "a+"}}}}}],
      "tool_choice": {"type": "function", "function": {"name": "f"}}})";
  Reply r = post_text("/v1/chat/completions", bad);
  ASSERT_EQ(r.status, 400) << r.raw;
  EXPECT_EQ(r.body["error"]["param"], "tools[0].function.parameters.properties.s.pattern") << r.raw;
}

TEST_F(StructuredOutput, BadSchemasAndGrammarsAre400sNamingThem) {
  struct Case {
    std::string path, body, param, needle;
  };
  const std::string msgs = R"("messages": [{"role": "user", "content": "hi"}], "max_tokens": 8)";
  const std::vector<Case> cases = {
      {"/v1/chat/completions",
       "{" + msgs + R"(, "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema":
          {"type": "object", "properties": {"name": {"type": "string", "pattern": "^a"}}}}}})",
       "response_format.json_schema.schema.properties.name.pattern", "pattern"},
      {"/v1/chat/completions", "{" + msgs + R"(, "response_format": {"type": "xml"}})", "response_format.type", "xml"},
      {"/v1/chat/completions",
       "{" + msgs + R"(, "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema":
          {"$defs": {"n": {"type": "object", "properties": {"next": {"$ref": "#/$defs/n"}}, "required": ["next"]}},
           "$ref": "#/$defs/n"}}}})",
       "response_format.json_schema.schema", "never finish"},
      {"/v1/completions", R"({"prompt": "a", "max_tokens": 4, "grammar": "root ::= item\n"})", "grammar",
       "'item' is used but not defined"},
      {"/v1/completions", R"({"prompt": "a", "max_tokens": 4, "grammar": "root ::= root \"a\"\n"})", "grammar",
       "left-recursive"},
      {"/v1/completions", R"({"prompt": "a", "max_tokens": 4, "json_schema": {"type": "array", "uniqueItems": true}})",
       "json_schema.uniqueItems", "uniqueItems"},
      {"/v1/completions", R"({"prompt": "a", "max_tokens": 4, "json_schema": {"type": "string"}, "grammar": "root ::= \"a\""})",
       "grammar", "at most one"},
      {"/v1/messages",
       R"({"max_tokens": 8, "messages": [{"role": "user", "content": "hi"}],
           "output_config": {"format": {"type": "json_schema", "schema": {"type": "number", "multipleOf": 2}}}})",
       "output_config.format.schema.multipleOf", "multipleOf"},
  };
  for (const Case& k : cases) {
    Reply r = post_text(k.path, k.body);
    ASSERT_EQ(r.status, 400) << k.body << "\n" << r.raw;
    EXPECT_NE(r.raw.find(k.needle), std::string::npos) << r.raw;
    if (r.body.contains("error") && r.body["error"].contains("param")) {
      EXPECT_EQ(r.body["error"]["param"], k.param) << r.raw;
    }
  }
}

}  // namespace
}  // namespace pc::test
