// The tool-call parser (server/chat/tool_calls.h) on each format: whole replies, the same
// replies streamed a few bytes at a time, and edge cases (nested JSON, strings that
// hold the closing marker, unicode, malformed calls).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/chat/tool_calls.h"
#include "test_util.h"

namespace pc::test {
namespace {

using server::ToolCall;
using server::ToolFormat;
using server::ToolParse;

std::function<std::string()> counter_ids() {
  auto n = std::make_shared<int>(0);
  return [n] { return "id" + std::to_string((*n)++); };
}

ToolParse whole(ToolFormat f, const std::string& text) { return server::parse_tool_calls(f, text, counter_ids()); }

// The reply fed `step` bytes at a time (cutting UTF-8 characters and markers apart).
ToolParse streamed(ToolFormat f, const std::string& text, size_t step) {
  server::ToolCallParser p(f, counter_ids());
  ToolParse all;
  auto add = [&](ToolParse d) {
    all.content += d.content;
    for (ToolCall& c : d.calls) all.calls.push_back(std::move(c));
  };
  for (size_t i = 0; i < text.size(); i += step) add(p.push(text.substr(i, step)));
  add(p.finish());
  return all;
}

// Whole and streamed (every step from 1 to 7 bytes) agree; returns the whole parse.
ToolParse parse_both(ToolFormat f, const std::string& text) {
  const ToolParse w = whole(f, text);
  for (size_t step = 1; step <= 7; ++step) {
    const ToolParse s = streamed(f, text, step);
    EXPECT_EQ(s.content, w.content) << "step " << step;
    EXPECT_EQ(s.calls.size(), w.calls.size()) << "step " << step;
    for (size_t i = 0; i < std::min(s.calls.size(), w.calls.size()); ++i) {
      EXPECT_EQ(s.calls[i].id, w.calls[i].id);
      EXPECT_EQ(s.calls[i].name, w.calls[i].name);
      EXPECT_EQ(s.calls[i].arguments, w.calls[i].arguments);
    }
  }
  return w;
}

TEST(ToolCalls, DetectsFormatFromTemplateSource) {
  auto fmt = [](const std::string& name) {
    return server::detect_tool_format(read_file(shared_dir() + "/templates-2026/" + name + ".jinja"));
  };
  EXPECT_EQ(fmt("Qwen-Qwen2.5-7B-Instruct"), ToolFormat::kQwen);
  EXPECT_EQ(fmt("Qwen-Qwen3-0.6B"), ToolFormat::kQwen);
  EXPECT_EQ(fmt("meta-llama-Llama-3.1-8B-Instruct"), ToolFormat::kLlama3);
  EXPECT_EQ(fmt("mistralai-Mistral-Nemo-Instruct-2407"), ToolFormat::kMistral);
  EXPECT_EQ(fmt("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B"), ToolFormat::kDeepSeek);
  EXPECT_EQ(fmt("HuggingFaceTB-SmolLM3-3B"), ToolFormat::kNone);
  EXPECT_EQ(fmt("google-gemma-2-2b-it"), ToolFormat::kNone);
  EXPECT_EQ(fmt("microsoft-Phi-3.5-mini-instruct"), ToolFormat::kNone);
}

TEST(ToolCalls, QwenCallsAfterContent) {
  const ToolParse p = parse_both(ToolFormat::kQwen,
                                 "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                                 "{\"city\": \"Paris\", \"unit\": \"C\"}}\n</tool_call>\n<tool_call>\n"
                                 "{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>");
  EXPECT_EQ(p.content, "Let me look.");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].id, "id0");
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(p.calls[0].arguments, R"({"city":"Paris","unit":"C"})");  // the model's key order
  EXPECT_EQ(p.calls[1].name, "get_time");
  EXPECT_EQ(p.calls[1].arguments, "{}");
}

TEST(ToolCalls, NestedJsonAndClosingMarkerInsideStrings) {
  const std::string args = R"({"q": "</tool_call> and } and ]", "nested": {"a": [1, {"b": "\"x\""}]}})";
  const ToolParse p = parse_both(ToolFormat::kQwen, "<tool_call>\n{\"name\": \"search\", \"arguments\": " + args + "}\n</tool_call>");
  EXPECT_EQ(p.content, "");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(p.calls[0].arguments), nlohmann::json::parse(args));
  EXPECT_NE(p.calls[0].arguments.find("</tool_call> and } and ]"), std::string::npos);
}

TEST(ToolCalls, UnicodeNamesAndArguments) {
  const ToolParse p = parse_both(ToolFormat::kMistral,
                                 "Voilà ☃ [TOOL_CALLS][{\"name\": \"météo\", \"arguments\": {\"ville\": \"Zürich 東京 🙂\"}}]");
  EXPECT_EQ(p.content, "Voilà ☃");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "météo");
  EXPECT_EQ(nlohmann::json::parse(p.calls[0].arguments)["ville"], "Zürich 東京 🙂");
  // \u escapes in the model's JSON are decoded.
  const ToolParse e = parse_both(ToolFormat::kQwen, R"(<tool_call>{"name": "f", "arguments": {"s": "\u00e9"}}</tool_call>)");
  ASSERT_EQ(e.calls.size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(e.calls[0].arguments)["s"], "é");
}

TEST(ToolCalls, ArgumentsGivenAsAJsonString) {
  const ToolParse p = parse_both(ToolFormat::kQwen, R"(<tool_call>{"name": "f", "arguments": "{\"x\": 1}"}</tool_call>)");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].arguments, R"({"x":1})");
}

TEST(ToolCalls, MalformedCallsStayContent) {
  for (const std::string text : {
           "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}\n</tool_call>",  // unbalanced
           "<tool_call>\n{\"arguments\": {}}\n</tool_call>",                        // no name
           "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}",                    // never closed
           "<tool_call> not json </tool_call>",
           "<tool_call>\n{\"name\": \"f\", \"arguments\": 3}\n</tool_call>",
           "a <tool_call",
       }) {
    const ToolParse p = parse_both(ToolFormat::kQwen, text);
    EXPECT_TRUE(p.calls.empty()) << text;
    EXPECT_EQ(p.content, text);
  }
  // A good call then a broken one: the call, then the broken text as content.
  const ToolParse p = parse_both(ToolFormat::kQwen,
                                 "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>\n<tool_call>{\"name\"");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.content, "<tool_call>{\"name\"");
}

TEST(ToolCalls, Llama3JsonCalls) {
  const ToolParse p = parse_both(ToolFormat::kLlama3, R"({"name": "get_weather", "parameters": {"city": "Oslo"}})");
  EXPECT_EQ(p.content, "");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(p.calls[0].arguments, R"({"city":"Oslo"})");
  const ToolParse tag = parse_both(ToolFormat::kLlama3,
                                   "Checking.<|python_tag|>{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"parameters\": {\"n\": 2}}");
  EXPECT_EQ(tag.content, "Checking.");
  ASSERT_EQ(tag.calls.size(), 2u);
  EXPECT_EQ(tag.calls[1].name, "b");
  // JSON that is no call, and a brace in the middle of text, are content.
  for (const std::string text : {R"({"city": "Oslo"})", R"(The set {"name": "x", "parameters": {}} is small)", "{ unfinished"}) {
    const ToolParse c = parse_both(ToolFormat::kLlama3, text);
    EXPECT_TRUE(c.calls.empty()) << text;
    EXPECT_EQ(c.content, text);
  }
}

TEST(ToolCalls, DeepSeekCalls) {
  const std::string text =
      "Sure.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
      "{\"city\": \"Lima\"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n"
      "```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
  const ToolParse p = parse_both(ToolFormat::kDeepSeek, text);
  EXPECT_EQ(p.content, "Sure.");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(p.calls[0].arguments, R"({"city":"Lima"})");
  EXPECT_EQ(p.calls[1].name, "get_time");
  // Without the closing marker the block is content.
  const std::string open = text.substr(0, text.size() - std::string("<｜tool▁calls▁end｜>").size());
  const ToolParse c = parse_both(ToolFormat::kDeepSeek, open);
  EXPECT_TRUE(c.calls.empty());
  EXPECT_EQ(c.content, open);
}

TEST(ToolCalls, TemplatesWithoutToolsParseNothing) {
  const ToolParse p = parse_both(ToolFormat::kNone, "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>");
  EXPECT_TRUE(p.calls.empty());
  EXPECT_EQ(p.content, "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>");
}

TEST(ToolCalls, IdsAndForcedPrefixes) {
  const std::string m = server::new_tool_call_id(ToolFormat::kMistral);
  EXPECT_EQ(m.size(), 9u);
  for (char c : m) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c))) << m;
  const std::string q = server::new_tool_call_id(ToolFormat::kQwen);
  EXPECT_EQ(q.rfind("call_", 0), 0u);
  EXPECT_NE(q, server::new_tool_call_id(ToolFormat::kQwen));
  EXPECT_EQ(server::forced_call_prefix(ToolFormat::kQwen, ""), "<tool_call>\n");
  EXPECT_EQ(server::forced_call_prefix(ToolFormat::kQwen, "f"), "<tool_call>\n{\"name\": \"f\"");
  EXPECT_EQ(server::forced_call_prefix(ToolFormat::kNone, "f"), "");
  // A forced prefix and the rest of a call parse as that call, in every format.
  for (ToolFormat f : {ToolFormat::kQwen, ToolFormat::kLlama3, ToolFormat::kMistral, ToolFormat::kDeepSeek}) {
    std::string rest;
    switch (f) {
      case ToolFormat::kQwen: rest = ", \"arguments\": {\"k\": 1}}\n</tool_call>"; break;
      case ToolFormat::kLlama3: rest = ", \"parameters\": {\"k\": 1}}"; break;
      case ToolFormat::kMistral: rest = ", \"arguments\": {\"k\": 1}}]"; break;
      default: rest = "\n```json\n{\"k\": 1}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"; break;
    }
    const ToolParse p = parse_both(f, server::forced_call_prefix(f, "lookup") + rest);
    ASSERT_EQ(p.calls.size(), 1u) << server::tool_format_name(f);
    EXPECT_EQ(p.calls[0].name, "lookup");
    EXPECT_EQ(p.calls[0].arguments, R"({"k":1})");
    EXPECT_EQ(p.content, "");
  }
}

TEST(ToolCalls, StreamingHoldsOnlyWhatMayStartACall) {
  server::ToolCallParser p(ToolFormat::kQwen, counter_ids());
  EXPECT_EQ(p.push("Hello <tool").content, "Hello");  // " <tool" may open a call
  EXPECT_EQ(p.push("box> done").content, " <toolbox> done");
  const ToolParse d = p.push("\n<tool_call>{\"name\": \"f\", \"arguments\": {}}");
  EXPECT_EQ(d.content, "");
  EXPECT_TRUE(d.calls.empty());  // not closed yet
  const ToolParse c = p.push("</tool_call>");
  ASSERT_EQ(c.calls.size(), 1u);
  EXPECT_EQ(p.finish().content, "");
}

}  // namespace
}  // namespace pc::test
