// ChatTemplate::apply_with_spans: every byte of the rendering is attributed
// to the tool, message, content part, tool call or generation prompt it came
// from, following the data through whatever the template does with it.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "template/chat_template.h"
#include "test_util.h"

namespace {

// Ordered: a case's objects reach the template with their keys as cases.json has them.
using json = nlohmann::ordered_json;
using pc::RenderedChat;
using pc::TemplatePart;
using Kind = pc::TemplatePart::Kind;

std::string templates_dir() { return pc::test::shared_dir() + "/templates-2026"; }

std::vector<std::string> template_names() {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(templates_dir(), ec))
    if (e.path().extension() == ".jinja") out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

pc::ChatTemplate load(const std::string& name) {
  return pc::ChatTemplate(pc::test::read_file(templates_dir() + "/" + name));
}

// ---- the requests ----

struct Request {
  std::string name;
  json messages;
  bool agp = true;
  json extra = json::object();
};

json weather_tools() {
  auto fn = [](const std::string& name, const std::string& desc, const std::string& param) {
    return json{{"type", "function"},
                {"function",
                 {{"name", name},
                  {"description", desc},
                  {"parameters",
                   {{"type", "object"},
                    {"properties", {{param, {{"type", "string"}, {"description", "The " + param + "."}}}}},
                    {"required", {param}}}}}}};
  };
  return json::array({fn("get_weather", "Current weather in a city.", "city"),
                      fn("get_time", "Local time in a time zone.", "zone"),
                      fn("search_web", "Search the web for a \"query\".", "query")});
}

std::vector<Request> requests() {
  std::vector<Request> out;
  json cases = json::parse(pc::test::read_file(templates_dir() + "/cases.json"));
  for (const auto& c : cases) {
    Request r;
    r.name = c.at("name").get<std::string>();
    const json& args = c.at("args");
    r.messages = args.at("messages");
    r.agp = args.value("add_generation_prompt", false);
    for (auto it = args.begin(); it != args.end(); ++it)
      if (it.key() != "messages" && it.key() != "add_generation_prompt") r.extra[it.key()] = it.value();
    out.push_back(r);
  }
  json call = {{"id", "call00001"},
               {"type", "function"},
               {"function", {{"name", "get_weather"}, {"arguments", {{"city", "Paris"}}}}}};
  out.push_back({"tools_only",
                 json::array({{{"role", "user"}, {"content", "What is the weather in Paris?"}}}),
                 true,
                 {{"tools", weather_tools()}}});
  out.push_back({"tools_system",
                 json::array({{{"role", "system"}, {"content", "You answer with tools."}},
                              {{"role", "user"}, {"content", "What is the weather in Paris?"}}}),
                 true,
                 {{"tools", weather_tools()}}});
  out.push_back({"tool_round_trip",
                 json::array({{{"role", "system"}, {"content", "You answer with tools."}},
                              {{"role", "user"}, {"content", "What is the weather in Paris?"}},
                              {{"role", "assistant"}, {"content", ""}, {"tool_calls", json::array({call})}},
                              {{"role", "tool"}, {"tool_call_id", "call00001"}, {"content", "Sunny, 21 C."}},
                              {{"role", "assistant"}, {"content", "It is sunny in Paris."}},
                              {{"role", "user"}, {"content", "And in Rome?"}}}),
                 true,
                 {{"tools", weather_tools()}}});
  out.push_back({"content_parts",
                 json::array({{{"role", "user"},
                               {"content", json::array({{{"type", "text"}, {"text", "First part."}},
                                                        {{"type", "text"}, {"text", "Second part."}}})}},
                              {{"role", "assistant"}, {"content", "Two parts seen."}},
                              {{"role", "user"},
                               {"content", json::array({{{"type", "text"}, {"text", "Third part."}}})}}}),
                 true});
  out.push_back({"reasoning_content",
                 json::array({{{"role", "user"}, {"content", "Is 9 prime?"}},
                              {{"role", "assistant"},
                               {"content", "No, 9 = 3 * 3."},
                               {"reasoning_content", "Try 3: it divides 9."}},
                              {{"role", "user"}, {"content", "Is 7 prime?"}}}),
                 true});
  out.push_back({"last_assistant_reasoning",
                 json::array({{{"role", "user"}, {"content", "Is 9 prime?"}},
                              {{"role", "assistant"}, {"content", "<think>\nTry 3.\n</think>\n\nNo."}}}),
                 false});
  return out;
}

// ---- checks ----

// Spans cover the text exactly, in order, non-empty, neighbours differ.
void expect_cover(const RenderedChat& r) {
  if (r.text.empty()) {
    EXPECT_TRUE(r.spans.empty());
    return;
  }
  ASSERT_FALSE(r.spans.empty());
  EXPECT_EQ(r.spans.front().begin, 0u);
  EXPECT_EQ(r.spans.back().end, r.text.size());
  for (size_t i = 0; i < r.spans.size(); ++i) {
    EXPECT_LT(r.spans[i].begin, r.spans[i].end) << "span " << i;
    if (i) {
      EXPECT_EQ(r.spans[i - 1].end, r.spans[i].begin) << "span " << i;
      EXPECT_NE(r.spans[i - 1].part, r.spans[i].part) << "span " << i;
    }
  }
}

// The part of every byte.
std::vector<TemplatePart> owners(const RenderedChat& r) {
  std::vector<TemplatePart> o(r.text.size());
  for (const auto& s : r.spans)
    for (size_t b = s.begin; b < s.end; ++b) o[b] = s.part;
  return o;
}

// Whether `needle` occurs somewhere in the text with all its bytes owned by
// a part accepted by `ok`.
template <class Pred>
bool occurs_owned(const RenderedChat& r, const std::vector<TemplatePart>& own, const std::string& needle, Pred ok) {
  if (needle.empty()) return true;
  for (size_t at = r.text.find(needle); at != std::string::npos; at = r.text.find(needle, at + 1)) {
    bool all = true;
    for (size_t b = at; b < at + needle.size() && all; ++b) all = ok(own[b]);
    if (all) return true;
  }
  return false;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\n") - b + 1);
}

// What a template keeps of a content string whatever it does: the text after
// any reasoning, trimmed.
std::string core(const std::string& content) {
  size_t think = content.rfind("</think>");
  return trim(think == std::string::npos ? content : content.substr(think + 8));
}

std::string describe(const TemplatePart& p) {
  switch (p.kind) {
    case Kind::kNone: return "none";
    case Kind::kTool: return "tool " + std::to_string(p.index);
    case Kind::kMessage: return "message " + std::to_string(p.index);
    case Kind::kContentPart: return "message " + std::to_string(p.index) + " content " + std::to_string(p.sub);
    case Kind::kToolCall: return "message " + std::to_string(p.index) + " tool call " + std::to_string(p.sub);
    case Kind::kGenerationPrompt: return "generation prompt";
  }
  return "?";
}

std::string dump(const RenderedChat& r) {
  std::string out;
  for (const auto& s : r.spans) {
    out += "[" + describe(s.part) + "] ";
    out += json(r.text.substr(s.begin, s.end - s.begin)).dump() + "\n";
  }
  return out;
}

// Templates that render tool definitions (and tool calls).
bool renders_tools(const std::string& tmpl) {
  return tmpl.rfind("Qwen-", 0) == 0 || tmpl.find("gpt-oss") != std::string::npos || tmpl.find("Llama-3.1") != std::string::npos ||
         tmpl.find("Mistral-Nemo") != std::string::npos;
}
bool renders_tool_calls(const std::string& tmpl) {
  return renders_tools(tmpl) || tmpl.find("DeepSeek") != std::string::npos;
}

// Messages a template does not render (docs/templates.md lists them).
bool dropped(const std::string& tmpl, const json& m) {
  const std::string role = m.value("role", "");
  if (tmpl.find("Phi-3.5") != std::string::npos) return role == "tool";
  return false;
}

// A "developer" message: some templates render it, others drop it (a server renders
// it as "system" before templating); where it appears it must be the message's own.
bool maybe_dropped(const json& m) { return m.value("role", "") == "developer"; }

// Templates that render only a message's first tool call (gpt-oss: one call per
// assistant message).
bool renders_first_call_only(const std::string& tmpl) { return tmpl.find("gpt-oss") != std::string::npos; }

void check_request(const std::string& tmpl_name, const pc::ChatTemplate& tmpl, const Request& rq) {
  SCOPED_TRACE(tmpl_name + " / " + rq.name);
  std::string plain;
  try {
    plain = tmpl.apply(rq.messages, rq.agp, rq.extra);
  } catch (const pc::ChatTemplateError& e) {
    EXPECT_THROW(tmpl.apply_with_spans(rq.messages, rq.agp, rq.extra), pc::ChatTemplateError);
    return;  // the template rejects this request
  }
  RenderedChat r = tmpl.apply_with_spans(rq.messages, rq.agp, rq.extra);
  ASSERT_EQ(r.text, plain);
  expect_cover(r);
  auto own = owners(r);
  SCOPED_TRACE(dump(r));

  ASSERT_EQ(r.roles.size(), rq.messages.size());
  for (size_t i = 0; i < rq.messages.size(); ++i) {
    const json& m = rq.messages[i];
    EXPECT_EQ(r.roles[i], m.value("role", ""));
    const int mi = static_cast<int>(i);
    auto is_msg = [&](const TemplatePart& p) { return p.kind == Kind::kMessage && p.index == mi; };
    const json& content = m.at("content");
    // Llama 3.1 and gpt-oss write a tool result through tojson: its quotes escaped.
    const std::string text = content.is_string() ? core(content.get<std::string>()) : "";
    const std::string escaped = json(text).dump().substr(1, json(text).dump().size() - 2);
    if (content.is_string() && dropped(tmpl_name, m)) {
      EXPECT_EQ(r.text.find(text), std::string::npos);
    } else if (content.is_string() && maybe_dropped(m) && r.text.find(text) == std::string::npos) {
      // dropped by this template
    } else if (content.is_string()) {
      EXPECT_TRUE(occurs_owned(r, own, text, is_msg) || occurs_owned(r, own, escaped, is_msg))
          << "content of message " << i << ": " << text;
    } else if (content.is_array()) {
      for (size_t j = 0; j < content.size(); ++j) {
        std::string text = content[j].at("text").get<std::string>();
        if (r.text.find(text) == std::string::npos) continue;  // template dropped list content
        auto is_part = [&](const TemplatePart& p) {
          return p.kind == Kind::kContentPart && p.index == mi && p.sub == static_cast<int>(j);
        };
        EXPECT_TRUE(occurs_owned(r, own, text, is_part)) << "message " << i << " content " << j;
      }
    }
    if (m.contains("reasoning_content") && r.text.find(m["reasoning_content"].get<std::string>()) != std::string::npos) {
      EXPECT_TRUE(occurs_owned(r, own, m["reasoning_content"].get<std::string>(), is_msg));
    }
    if (m.contains("tool_calls") && renders_tool_calls(tmpl_name)) {
      for (size_t k = 0; k < m["tool_calls"].size(); ++k) {
        if (k > 0 && renders_first_call_only(tmpl_name)) break;
        auto is_call = [&](const TemplatePart& p) {
          return p.kind == Kind::kToolCall && p.index == mi && p.sub == static_cast<int>(k);
        };
        const json& fn = m["tool_calls"][k]["function"];
        EXPECT_TRUE(occurs_owned(r, own, fn["name"].get<std::string>(), is_call)) << "tool call " << k;
        // Every string argument value (of 3+ bytes) is written in the call's own span,
        // whatever the format (JSON, XML parameters, harmony).
        json args = fn["arguments"];
        if (args.is_string()) args = json::parse(args.get<std::string>());
        for (const auto& [key, value] : args.items()) {
          if (value.is_string() && value.get<std::string>().size() >= 3) {
            EXPECT_TRUE(occurs_owned(r, own, value.get<std::string>(), is_call)) << "tool call " << k << " argument " << key;
          }
        }
      }
    }
  }
  if (rq.extra.contains("tools") && renders_tools(tmpl_name)) {
    const json& tools = rq.extra["tools"];
    for (size_t t = 0; t < tools.size(); ++t) {
      auto is_tool = [&](const TemplatePart& p) { return p.kind == Kind::kTool && p.index == static_cast<int>(t); };
      const json& fn = tools[t]["function"];
      EXPECT_TRUE(occurs_owned(r, own, fn["name"].get<std::string>(), is_tool)) << "tool " << t;
      EXPECT_TRUE(occurs_owned(r, own, fn["description"].get<std::string>().substr(0, 10), is_tool)) << "tool " << t;
    }
  }
  // The generation prompt is template text at the very end, and only there
  // when asked for.
  for (size_t s = 0; s < r.spans.size(); ++s)
    if (r.spans[s].part.kind == Kind::kGenerationPrompt) {
      EXPECT_TRUE(rq.agp);
      EXPECT_EQ(s + 1, r.spans.size());
    }
}

TEST(TemplateSpans, EveryTemplateEveryRequest) {
  auto names = template_names();
  ASSERT_EQ(names.size(), 12u);
  auto rqs = requests();
  ASSERT_GE(rqs.size(), 10u);
  for (const auto& name : names) {
    pc::ChatTemplate tmpl = load(name);
    for (const auto& rq : rqs) check_request(name, tmpl, rq);
  }
}

// The reference index says which cases.json renderings raise; spans raise
// exactly there.
TEST(TemplateSpans, ErrorsMatchReferenceIndex) {
  json idx = json::parse(pc::test::read_file(templates_dir() + "/expected/index.json"));
  json cases = json::parse(pc::test::read_file(templates_dir() + "/cases.json"));
  for (const auto& e : idx) {
    json args;
    for (const auto& c : cases)
      if (c.at("name") == e.at("case")) args = c.at("args");
    pc::ChatTemplate tmpl = load(e.at("template").get<std::string>());
    json extra = json::object();
    for (auto it = args.begin(); it != args.end(); ++it)
      if (it.key() != "messages" && it.key() != "add_generation_prompt") extra[it.key()] = it.value();
    bool agp = args.value("add_generation_prompt", false);
    if (e.at("status") == "ok") {
      RenderedChat r = tmpl.apply_with_spans(args.at("messages"), agp, extra);
      EXPECT_EQ(r.text, pc::test::read_file(templates_dir() + "/expected/" + e.at("expected").get<std::string>()));
    } else {
      EXPECT_THROW(tmpl.apply_with_spans(args.at("messages"), agp, extra), pc::ChatTemplateError);
    }
  }
}

Request find_request(const std::string& name) {
  for (auto& r : requests())
    if (r.name == name) return r;
  ADD_FAILURE() << name;
  return {};
}

// Byte offset of `needle` in the text (must occur once after `from`).
size_t offset_of(const RenderedChat& r, const std::string& needle, size_t from = 0) {
  size_t at = r.text.find(needle, from);
  EXPECT_NE(at, std::string::npos) << needle;
  return at;
}

TemplatePart owner_at(const RenderedChat& r, size_t at) {
  for (const auto& s : r.spans)
    if (at >= s.begin && at < s.end) return s.part;
  return {};
}

TEST(TemplateSpans, Llama31MovesFirstUserMessageIntoToolsBlock) {
  pc::ChatTemplate tmpl = load("meta-llama-Llama-3.1-8B-Instruct.jinja");
  Request rq = find_request("tools_system");
  RenderedChat r = tmpl.apply_with_spans(rq.messages, rq.agp, rq.extra);
  SCOPED_TRACE(dump(r));
  // System prompt (message 0) in the system block; the tools, then the first
  // user message (message 1) in the user block that follows.
  size_t sys = offset_of(r, "You answer with tools.");
  size_t tool2 = offset_of(r, "\"search_web\"");
  size_t user = offset_of(r, "What is the weather in Paris?");
  EXPECT_LT(sys, tool2);
  EXPECT_LT(tool2, user);
  EXPECT_EQ(owner_at(r, sys), (TemplatePart{Kind::kMessage, 0, -1}));
  EXPECT_EQ(owner_at(r, tool2), (TemplatePart{Kind::kTool, 2, -1}));
  EXPECT_EQ(owner_at(r, user), (TemplatePart{Kind::kMessage, 1, -1}));
  // Tool 0's JSON (indent=4) belongs to tool 0 from its '{' to its '}'.
  size_t t0 = offset_of(r, "{\n    \"type\"");
  EXPECT_EQ(owner_at(r, t0), (TemplatePart{Kind::kTool, 0, -1}));
  EXPECT_EQ(owner_at(r, offset_of(r, "\"get_time\"") - 1), (TemplatePart{Kind::kTool, 1, -1}));
  // The user block header before the tools is template text.
  EXPECT_EQ(owner_at(r, offset_of(r, "Given the following functions")).kind, Kind::kNone);
  EXPECT_EQ(r.spans.back().part.kind, Kind::kGenerationPrompt);
  EXPECT_EQ(r.text.substr(r.spans.back().begin), "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(TemplateSpans, Llama31ToolCallAndResult) {
  pc::ChatTemplate tmpl = load("meta-llama-Llama-3.1-8B-Instruct.jinja");
  Request rq = find_request("tool_round_trip");
  RenderedChat r = tmpl.apply_with_spans(rq.messages, rq.agp, rq.extra);
  SCOPED_TRACE(dump(r));
  size_t call = offset_of(r, "{\"city\": \"Paris\"}");
  EXPECT_EQ(owner_at(r, call), (TemplatePart{Kind::kToolCall, 2, 0}));
  EXPECT_EQ(owner_at(r, offset_of(r, "Sunny, 21 C.")), (TemplatePart{Kind::kMessage, 3, -1}));
  EXPECT_EQ(owner_at(r, offset_of(r, "And in Rome?")), (TemplatePart{Kind::kMessage, 5, -1}));
}

TEST(TemplateSpans, MistralNemoPutsSystemAndToolsBeforeLastUserMessage) {
  pc::ChatTemplate tmpl = load("mistralai-Mistral-Nemo-Instruct-2407.jinja");
  Request rq = find_request("tool_round_trip");
  RenderedChat r = tmpl.apply_with_spans(rq.messages, rq.agp, rq.extra);
  SCOPED_TRACE(dump(r));
  size_t first_user = offset_of(r, "What is the weather in Paris?");
  size_t tools = offset_of(r, "[AVAILABLE_TOOLS]");
  size_t sys = offset_of(r, "You answer with tools.");
  size_t last_user = offset_of(r, "And in Rome?");
  EXPECT_LT(first_user, tools);
  EXPECT_LT(tools, sys);
  EXPECT_LT(sys, last_user);
  EXPECT_EQ(owner_at(r, first_user), (TemplatePart{Kind::kMessage, 1, -1}));
  EXPECT_EQ(owner_at(r, sys), (TemplatePart{Kind::kMessage, 0, -1}));
  EXPECT_EQ(owner_at(r, last_user), (TemplatePart{Kind::kMessage, 5, -1}));
  // The tools are re-rendered key by key: keys, string values and JSON values
  // all belong to their tool; the braces around them are template text.
  EXPECT_EQ(owner_at(r, offset_of(r, "get_time")), (TemplatePart{Kind::kTool, 1, -1}));
  EXPECT_EQ(owner_at(r, offset_of(r, "description", offset_of(r, "get_time"))), (TemplatePart{Kind::kTool, 1, -1}));
  EXPECT_EQ(owner_at(r, offset_of(r, "{\"type\": \"object\"", offset_of(r, "search_web"))),
            (TemplatePart{Kind::kTool, 2, -1}));
  EXPECT_EQ(owner_at(r, offset_of(r, "{\"type\": \"function\", \"function\": {")).kind, Kind::kNone);
  // Tool call: tojson of the function, minus its last '}'.
  EXPECT_EQ(owner_at(r, offset_of(r, "{\"name\": \"get_weather\", \"arguments\": {\"city\"")), (TemplatePart{Kind::kToolCall, 2, 0}));
  EXPECT_EQ(owner_at(r, offset_of(r, "Sunny, 21 C.")), (TemplatePart{Kind::kMessage, 3, -1}));
  // Mistral-Nemo has no generation prompt.
  for (const auto& s : r.spans) EXPECT_NE(s.part.kind, Kind::kGenerationPrompt);
}

TEST(TemplateSpans, GenerationPromptIsTheTextAddGenerationPromptAdds) {
  pc::ChatTemplate qwen = load("Qwen-Qwen2.5-7B-Instruct.jinja");
  json msgs = json::array({{{"role", "user"}, {"content", "Hi"}}});
  RenderedChat with = qwen.apply_with_spans(msgs, true);
  ASSERT_GE(with.spans.size(), 3u);
  EXPECT_EQ(with.spans.back().part.kind, Kind::kGenerationPrompt);
  EXPECT_EQ(with.text.substr(with.spans.back().begin), "<|im_start|>assistant\n");
  RenderedChat without = qwen.apply_with_spans(msgs, false);
  for (const auto& s : without.spans) EXPECT_NE(s.part.kind, Kind::kGenerationPrompt);
  // Phi-3.5 writes eos_token instead of the prompt: the common "<" prefix of
  // "</s>" and "<|assistant|>" does not split the prompt.
  pc::ChatTemplate phi = load("microsoft-Phi-3.5-mini-instruct.jinja");
  RenderedChat p = phi.apply_with_spans(msgs, true);
  EXPECT_EQ(p.text.substr(p.spans.back().begin), "<|assistant|>\n");
  // Qwen3 with thinking off: the empty think block is part of the prompt.
  pc::ChatTemplate qwen3 = load("Qwen-Qwen3-0.6B.jinja");
  RenderedChat q = qwen3.apply_with_spans(msgs, true, {{"enable_thinking", false}});
  EXPECT_EQ(q.text.substr(q.spans.back().begin), "<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST(TemplateSpans, Qwen3DropsEarlierReasoningButKeepsTheLastTurns) {
  pc::ChatTemplate qwen3 = load("Qwen-Qwen3-0.6B.jinja");
  Request rq = find_request("reasoning_history");
  RenderedChat r = qwen3.apply_with_spans(rq.messages, rq.agp, rq.extra);
  EXPECT_EQ(r.text.find("Check divisors"), std::string::npos);
  EXPECT_EQ(owner_at(r, offset_of(r, "Yes, 17 is prime.")), (TemplatePart{Kind::kMessage, 1, -1}));
  // After the last user message the reasoning is re-rendered from the content.
  Request last = find_request("last_assistant_reasoning");
  RenderedChat l = qwen3.apply_with_spans(last.messages, last.agp, last.extra);
  EXPECT_EQ(owner_at(l, offset_of(l, "Try 3.")), (TemplatePart{Kind::kMessage, 1, -1}));
  EXPECT_EQ(owner_at(l, offset_of(l, "<think>\n")).kind, Kind::kNone);
}

TEST(TemplateSpans, ContentPartsRenderedAsPythonRepr) {
  // Gemma 2 prints a list content through `trim` (Python repr of the list):
  // each part's repr belongs to that part, the list's brackets to the message.
  pc::ChatTemplate gemma = load("google-gemma-2-2b-it.jinja");
  Request rq = find_request("content_parts");
  RenderedChat r = gemma.apply_with_spans(rq.messages, rq.agp, rq.extra);
  SCOPED_TRACE(dump(r));
  EXPECT_EQ(owner_at(r, offset_of(r, "{'type': 'text', 'text': 'Second part.'}")), (TemplatePart{Kind::kContentPart, 0, 1}));
  EXPECT_EQ(owner_at(r, offset_of(r, "[{'type'")), (TemplatePart{Kind::kMessage, 0, -1}));
}

TEST(TemplateSpans, SpansCostAboutOneExtraRender) {
  json msgs = json::array({{{"role", "system"}, {"content", "You are a helpful assistant."}}});
  for (int i = 0; i < 200; ++i) {
    msgs.push_back({{"role", "user"}, {"content", "Question " + std::to_string(i) + " about something long."}});
    msgs.push_back({{"role", "assistant"}, {"content", "<think>\nt\n</think>\n\nAnswer " + std::to_string(i) + "."}});
  }
  msgs.push_back({{"role", "user"}, {"content", "last"}});
  for (const auto& name : template_names()) {
    pc::ChatTemplate tmpl = load(name);
    try {
      tmpl.apply(msgs, true);
    } catch (const pc::ChatTemplateError&) {
      continue;  // Gemma 2: no system role
    }
    const int n = 10;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) tmpl.apply(msgs, true);
    auto t1 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) tmpl.apply_with_spans(msgs, true);
    auto t2 = std::chrono::steady_clock::now();
    double plain = std::chrono::duration<double, std::milli>(t1 - t0).count() / n;
    double spans = std::chrono::duration<double, std::milli>(t2 - t1).count() / n;
    std::printf("  %-45s apply %.3f ms, apply_with_spans %.3f ms (x%.2f)\n", name.c_str(), plain, spans,
                spans / plain);
    EXPECT_LT(spans, 6 * plain + 1.0) << name;  // two tracked renders; generous for loaded machines
  }
}

// PC_SPANS_DUMP=1 prints every rendering's spans (the facts in docs/templates.md).
// The span listing docs/templates.md is written from: the same on every render (spans do
// not depend on anything but the request); printed with PC_SPANS_DUMP=1.
TEST(TemplateSpans, DumpIsDeterministic) {
  const bool print = std::getenv("PC_SPANS_DUMP") != nullptr;
  for (const auto& name : template_names()) {
    pc::ChatTemplate tmpl = load(name);
    for (const auto& rq : requests()) {
      std::string first, again;
      try {
        first = dump(tmpl.apply_with_spans(rq.messages, rq.agp, rq.extra));
        again = dump(tmpl.apply_with_spans(rq.messages, rq.agp, rq.extra));
      } catch (const pc::ChatTemplateError& e) {
        if (print) std::printf("===== %s / %s\nraises: %s\n", name.c_str(), rq.name.c_str(), e.what());
        continue;
      }
      EXPECT_FALSE(first.empty()) << name << " / " << rq.name;
      EXPECT_EQ(first, again) << name << " / " << rq.name;
      if (print) std::printf("===== %s / %s\n%s", name.c_str(), rq.name.c_str(), first.c_str());
    }
  }
}

}  // namespace
