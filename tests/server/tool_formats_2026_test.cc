// The Qwen3.5 / Qwen3-Coder XML call format (kQwenXml) and gpt-oss's harmony format
// (kHarmony): whole replies, the same replies streamed a few bytes at a time, argument
// typing by the tools' schemas, and the reference renderings of ../shared/templates-2026
// parsed back into the calls they were rendered from.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/chat/tool_calls.h"
#include "test_util.h"

namespace pc::test {
namespace {

using ojson = nlohmann::ordered_json;
using server::ToolCall;
using server::ToolFormat;
using server::ToolParse;
using server::ToolSchemas;

std::function<std::string()> counter_ids() {
  auto n = std::make_shared<int>(0);
  return [n] { return "id" + std::to_string((*n)++); };
}

std::shared_ptr<const ToolSchemas> schemas_of(const ojson& tools) {
  return std::make_shared<const ToolSchemas>(server::tool_schemas(tools));
}

ToolParse streamed(ToolFormat f, const std::string& text, size_t step, std::shared_ptr<const ToolSchemas> schemas) {
  server::ToolCallParser p(f, counter_ids(), schemas);
  ToolParse all;
  auto add = [&](ToolParse d) {
    all.content += d.content;
    all.reasoning += d.reasoning;
    for (ToolCall& c : d.calls) all.calls.push_back(std::move(c));
  };
  for (size_t i = 0; i < text.size(); i += step) add(p.push(text.substr(i, step)));
  add(p.finish());
  return all;
}

// Whole and streamed (every step from 1 to 7 bytes) agree; returns the whole parse.
// No tools offered: a harmony reply parses no calls.
const std::shared_ptr<const ToolSchemas> kAnyTools = std::make_shared<const ToolSchemas>();

ToolParse parse_both(ToolFormat f, const std::string& text, std::shared_ptr<const ToolSchemas> schemas = kAnyTools) {
  const ToolParse w = server::parse_tool_calls(f, text, counter_ids(), schemas);
  for (size_t step = 1; step <= 7; ++step) {
    const ToolParse s = streamed(f, text, step, schemas);
    EXPECT_EQ(s.content, w.content) << "step " << step;
    EXPECT_EQ(s.reasoning, w.reasoning) << "step " << step;
    EXPECT_EQ(s.calls.size(), w.calls.size()) << "step " << step;
    for (size_t i = 0; i < std::min(s.calls.size(), w.calls.size()); ++i) {
      EXPECT_EQ(s.calls[i].id, w.calls[i].id);
      EXPECT_EQ(s.calls[i].name, w.calls[i].name);
      EXPECT_EQ(s.calls[i].arguments, w.calls[i].arguments);
    }
  }
  return w;
}

ojson weather_tools() {
  return ojson::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
      "city": {"type": "string"}, "days": {"type": "integer"}, "ratio": {"type": "number"},
      "exact": {"type": "boolean"}, "tags": {"type": "array"}, "opts": {"type": "object"},
      "maybe": {"type": ["integer", "null"]}}}}}
  ])");
}

TEST(ToolFormats2026, DetectsFormatFromTemplateSource) {
  auto fmt = [](const std::string& name) {
    return server::detect_tool_format(read_file(shared_dir() + "/templates-2026/" + name + ".jinja"));
  };
  EXPECT_EQ(fmt("Qwen-Qwen3.5-4B"), ToolFormat::kQwenXml);
  EXPECT_EQ(fmt("Qwen-Qwen3-Coder"), ToolFormat::kQwenXml);
  EXPECT_EQ(fmt("openai-gpt-oss-120b"), ToolFormat::kHarmony);
  EXPECT_EQ(fmt("Qwen-Qwen3-0.6B"), ToolFormat::kQwen);  // JSON inside <tool_call>
  EXPECT_STREQ(server::tool_format_name(ToolFormat::kQwenXml), "qwen-xml");
  EXPECT_STREQ(server::tool_format_name(ToolFormat::kHarmony), "harmony");
}

TEST(ToolFormats2026, XmlArgumentsTypedByTheSchema) {
  const std::string reply =
      "<tool_call>\n<function=get_weather>\n"
      "<parameter=city>\nKyoto\n</parameter>\n"
      "<parameter=days>\n3\n</parameter>\n"
      "<parameter=ratio>\n0.25\n</parameter>\n"
      "<parameter=exact>\nTrue\n</parameter>\n"
      "<parameter=tags>\n[\"a\", 1]\n</parameter>\n"
      "<parameter=opts>\n{\"x\": {\"y\": null}}\n</parameter>\n"
      "<parameter=maybe>\nnull\n</parameter>\n"
      "<parameter=extra>\n42\n</parameter>\n"
      "</function>\n</tool_call>";
  const ToolParse p = parse_both(ToolFormat::kQwenXml, reply, schemas_of(weather_tools()));
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.content, "");
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(p.calls[0].id, "id0");
  // Keys in the order the model wrote them; an argument the schema does not name
  // ("extra") stays a string.
  EXPECT_EQ(p.calls[0].arguments,
            R"({"city":"Kyoto","days":3,"ratio":0.25,"exact":true,"tags":["a",1],"opts":{"x":{"y":null}},)"
            R"("maybe":null,"extra":"42"})");
}

TEST(ToolFormats2026, XmlValuesThatDoNotFitTheirTypeStayText) {
  const std::string reply =
      "<tool_call>\n<function=get_weather>\n"
      "<parameter=days>\nthree\n</parameter>\n"
      "<parameter=exact>\nmaybe\n</parameter>\n"
      "<parameter=opts>\n{not json\n</parameter>\n"
      "<parameter=ratio>\n7.0\n</parameter>\n"
      "</function>\n</tool_call>";
  const ToolParse p = parse_both(ToolFormat::kQwenXml, reply, schemas_of(weather_tools()));
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].arguments, R"({"days":"three","exact":"maybe","opts":"{not json","ratio":7})");
}

TEST(ToolFormats2026, XmlWithoutSchemasKeepsStringsAndMultilineValues) {
  const std::string reply =
      "I will write it.\n\n<tool_call>\n<function=write_file>\n"
      "<parameter=path>\na.py\n</parameter>\n"
      "<parameter=body>\ndef f():\n    return \"</tool_call>\"\n\n</parameter>\n"
      "</function>\n</tool_call>\n<tool_call>\n<function=run>\n<parameter=n>\n3\n</parameter>\n</function>\n"
      "</tool_call>";
  const ToolParse p = parse_both(ToolFormat::kQwenXml, reply, nullptr);
  EXPECT_EQ(p.content, "I will write it.");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].name, "write_file");
  // One newline each side is the format's; the value's own trailing newline stays.
  EXPECT_EQ(p.calls[0].arguments, R"({"path":"a.py","body":"def f():\n    return \"</tool_call>\"\n"})");
  EXPECT_EQ(p.calls[1].arguments, R"({"n":"3"})");
  EXPECT_EQ(p.calls[1].id, "id1");
}

TEST(ToolFormats2026, XmlMissingParameterCloseEndsAtTheNextTag) {
  const ToolParse p = parse_both(ToolFormat::kQwenXml,
                                 "<tool_call>\n<function=f>\n<parameter=a>\n1\n<parameter=b>\n2\n</function>\n</tool_call>");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].arguments, R"({"a":"1","b":"2"})");
}

TEST(ToolFormats2026, XmlUnfinishedOrMalformedCallsStayContent) {
  for (const std::string& reply : {
           std::string("<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n"),  // cut off
           std::string("<tool_call>\n<function=f\nx>\n</function>\n</tool_call>"),     // newline in the name
           std::string("<tool_call>\n{\"name\": \"f\"}\n</tool_call>"),                  // JSON, not XML
       }) {
    const ToolParse p = parse_both(ToolFormat::kQwenXml, reply);
    EXPECT_TRUE(p.calls.empty()) << reply;
    EXPECT_EQ(p.content, reply);
  }
}

TEST(ToolFormats2026, HarmonyChannels) {
  // With the end tokens in the text...
  ToolParse p = parse_both(ToolFormat::kHarmony,
                           "<|channel|>analysis<|message|>Need the weather.<|end|>"
                           "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
                           "<|message|>{\"city\": \"Kyoto\", \"days\": 2}<|call|>");
  EXPECT_EQ(p.reasoning, "Need the weather.");
  EXPECT_EQ(p.content, "");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(p.calls[0].arguments, R"({"city":"Kyoto","days":2})");
  // ...and without them (end-of-generation and control tokens the text may not hold).
  p = parse_both(ToolFormat::kHarmony,
                 "<|channel|>analysis<|message|>Easy.<|start|>assistant<|channel|>final<|message|>Blue, mostly.");
  EXPECT_EQ(p.reasoning, "Easy.");
  EXPECT_EQ(p.content, "Blue, mostly.");
  EXPECT_TRUE(p.calls.empty());
  // A commentary message to nobody is a preamble: content. Two calls in a row.
  p = parse_both(ToolFormat::kHarmony,
                 "<|channel|>commentary<|message|>Checking both.<|end|>"
                 "<|start|>assistant to=functions.a<|channel|>commentary json<|message|>{}<|call|>"
                 "<|start|>assistant to=functions.b<|channel|>commentary json<|message|>{\"x\": [1, 2]}<|call|>");
  EXPECT_EQ(p.content, "Checking both.");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].name, "a");
  EXPECT_EQ(p.calls[0].arguments, "{}");
  EXPECT_EQ(p.calls[1].name, "b");
  EXPECT_EQ(p.calls[1].arguments, R"({"x":[1,2]})");
  // A reply that writes no harmony at all is content.
  p = parse_both(ToolFormat::kHarmony, "Just text < and | more");
  EXPECT_EQ(p.content, "Just text < and | more");
  EXPECT_EQ(p.reasoning, "");
  // An analysis that never ends is all reasoning; a call whose body never ends is
  // still the call it names (the reply stopped at <|call|>, which is not text).
  p = parse_both(ToolFormat::kHarmony, "<|channel|>analysis<|message|>Thinking on");
  EXPECT_EQ(p.reasoning, "Thinking on");
  p = parse_both(ToolFormat::kHarmony, " to=functions.f<|channel|>commentary json<|message|>{\"k\": 1}");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].arguments, R"({"k":1})");
  // A body that is no JSON object is no call; without tools offered, nothing is a call.
  p = parse_both(ToolFormat::kHarmony, " to=functions.f<|channel|>commentary json<|message|>{\"k\": }");
  EXPECT_TRUE(p.calls.empty());
  EXPECT_EQ(p.content, "{\"k\": }");
  p = parse_both(ToolFormat::kHarmony, "<|channel|>commentary to=functions.f json<|message|>{}<|call|>", nullptr);
  EXPECT_TRUE(p.calls.empty());
  EXPECT_EQ(p.content, "{}");
}

TEST(ToolFormats2026, ForcedPrefixesOpenACall) {
  EXPECT_EQ(server::forced_call_prefix(ToolFormat::kQwenXml, ""), "<tool_call>\n<function=");
  EXPECT_EQ(server::forced_call_prefix(ToolFormat::kQwenXml, "get_weather"), "<tool_call>\n<function=get_weather>\n");
  EXPECT_EQ(server::forced_call_prefix(ToolFormat::kHarmony, ""), "<|channel|>commentary to=functions.");
  EXPECT_EQ(server::forced_call_prefix(ToolFormat::kHarmony, "get_weather"),
            "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>");
  // The prefix and what the model writes after it parse as one call.
  ToolParse p = parse_both(ToolFormat::kQwenXml, server::forced_call_prefix(ToolFormat::kQwenXml, "get_weather") +
                                                     "<parameter=days>\n4\n</parameter>\n</function>\n</tool_call>",
                           schemas_of(weather_tools()));
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].arguments, R"({"days":4})");
  p = parse_both(ToolFormat::kHarmony, server::forced_call_prefix(ToolFormat::kHarmony, "") +
                                           "get_weather <|constrain|>json<|message|>{\"city\": \"Oslo\"}");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(server::call_region_end(ToolFormat::kQwenXml), "</tool_call>");
  EXPECT_EQ(server::call_region_end(ToolFormat::kHarmony), "<|call|>");
  EXPECT_TRUE(server::call_region_end_is_eog(ToolFormat::kHarmony));
  EXPECT_FALSE(server::call_region_end_is_eog(ToolFormat::kQwenXml));
}

TEST(ToolFormats2026, SchemasFromEveryToolShape) {
  const ToolSchemas s = server::tool_schemas(ojson::parse(R"([
    {"type": "function", "function": {"name": "a", "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}}}},
    {"type": "function", "name": "b", "parameters": {"type": "object"}},
    {"name": "c", "input_schema": {"type": "object"}},
    {"type": "function"}, 7
  ])"));
  ASSERT_EQ(s.parameters.size(), 3u);
  EXPECT_EQ(s.parameters.at("a")["properties"]["x"]["type"], "integer");
  EXPECT_TRUE(s.parameters.count("b") && s.parameters.count("c"));
}

// The reference renderings of the tool-call cases parse back into the calls they were
// rendered from (names, and arguments as JSON values with the schema's types).
TEST(ToolFormats2026, ReferenceRenderingsParseBackIntoTheirCalls) {
  const std::string dir = shared_dir() + "/templates-2026";
  const ojson cases = ojson::parse(read_file(dir + "/cases.json"));
  struct Fmt {
    const char* tmpl;
    ToolFormat f;
    const char* begin;  // the assistant turn's first byte of model text follows this
    const char* end;    // and ends before this
    bool first_call_only;
  };
  for (const Fmt& fmt : {Fmt{"Qwen-Qwen3.5-4B", ToolFormat::kQwenXml, "<|im_start|>assistant\n", "<|im_end|>", false},
                         Fmt{"Qwen-Qwen3-Coder", ToolFormat::kQwenXml, "<|im_start|>assistant\n", "<|im_end|>", false},
                         Fmt{"openai-gpt-oss-120b", ToolFormat::kHarmony, "<|start|>assistant", "<|start|>functions", true}}) {
    for (const char* name : {"tools_single_call", "tools_parallel_calls"}) {
      SCOPED_TRACE(std::string(fmt.tmpl) + " / " + name);
      ojson args;
      for (const ojson& c : cases)
        if (c["name"] == name) args = c["args"];
      const std::string text = read_file(dir + "/expected/" + fmt.tmpl + "__" + name + ".txt");
      const size_t b = text.find(fmt.begin, text.find("What's the weather"));
      ASSERT_NE(b, std::string::npos);
      size_t from = b + std::string(fmt.begin).size();
      // Qwen3.5 writes the (empty) think block of a turn after the last question; the
      // reasoning splitter (reasoning.h) takes it off before the call parser runs.
      if (text.compare(from, 7, "<think>") == 0) from = text.find("</think>\n\n", from) + 10;
      const size_t e = text.find(fmt.end, from);
      ASSERT_NE(e, std::string::npos);
      const ToolParse p = parse_both(fmt.f, text.substr(from, e - from), schemas_of(args["tools"]));
      const ojson& want = args["messages"][2]["tool_calls"];
      ASSERT_EQ(p.calls.size(), fmt.first_call_only ? 1u : want.size());
      for (size_t k = 0; k < p.calls.size(); ++k) {
        EXPECT_EQ(p.calls[k].name, want[k]["function"]["name"]);
        EXPECT_EQ(ojson::parse(p.calls[k].arguments), want[k]["function"]["arguments"]);
      }
      EXPECT_EQ(p.content, "");
    }
  }
}

}  // namespace
}  // namespace pc::test
