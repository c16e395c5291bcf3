// Tool calls in a model's reply: which format a chat template uses, and a parser
// that turns reply text into content + calls, whole or as the text streams in.
//
// Formats (the text each template renders for an assistant message's tool_calls,
// which is what the model was trained to write):
//
//   kQwen      Qwen2.5 / Qwen3 (Hermes style), one block per call:
//              <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
//   kLlama3    Llama 3.1: a bare JSON object, optionally after <|python_tag|>;
//              several calls separated by ';' or whitespace:
//              {"name": "f", "parameters": {...}}
//   kMistral   Mistral-Nemo: one JSON array after the marker (ids of 9 alphanumerics):
//              [TOOL_CALLS][{"name": "f", "arguments": {...}}, ...]
//   kDeepSeek  DeepSeek-R1-Distill:
//              <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{...}\n```<｜tool▁call▁end｜>
//              (\n<｜tool▁call▁begin｜>...<｜tool▁call▁end｜>)*<｜tool▁calls▁end｜>
//   kQwenXml   Qwen3.5, Qwen3-Coder, one block per call, one block per argument:
//              <tool_call>\n<function=f>\n<parameter=city>\nKyoto\n</parameter>\n</function>\n</tool_call>
//              A value is text (one newline each side dropped), converted by the type the
//              tool's parameters schema gives the argument (tool_calls_xml.cc).
//   kHarmony   gpt-oss: messages on channels (harmony.h); a call is a commentary message
//              to a function, its body the JSON arguments:
//              <|channel|>commentary to=functions.f <|constrain|>json<|message|>{...}<|call|>
//              the analysis channel is the reasoning (ToolParse::reasoning), final the content.
//
// Text that is not a well-formed call stays content: an opener whose call does not
// complete (bad JSON, no name, missing closing marker by the end of the reply) is
// plain text. Content before a call is kept (its trailing whitespace, which the
// templates render themselves, is dropped); whitespace between and after calls is
// dropped. The streaming parser holds back text that may be the start of an opener
// until it is decided, and releases a call only once it is complete, so a streamed
// reply never carries a call the whole reply would not: parse_tool_calls() is the
// streaming parser fed the whole text.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <map>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

namespace pc::server {

enum class ToolFormat { kNone, kQwen, kLlama3, kMistral, kDeepSeek, kQwenXml, kHarmony };

// The format a chat template renders assistant tool calls in, from its source;
// kNone when it renders none (SmolLM3, Gemma 2, Phi-3.5, the built-in chatml).
ToolFormat detect_tool_format(std::string_view template_source);
// "qwen", "llama3", "mistral", "deepseek", "qwen-xml", "harmony", "none"
const char* tool_format_name(ToolFormat f);

// The parameters schema of each tool a request offers, by function name; read from
// OpenAI chat tools ({type, function: {name, parameters}}), Responses tools ({type,
// name, parameters}) or Anthropic tools ({name, input_schema}). kQwenXml converts an
// argument's text by the type its schema gives it.
struct ToolSchemas {
  std::map<std::string, nlohmann::ordered_json> parameters;
};
ToolSchemas tool_schemas(const nlohmann::ordered_json& tools);

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text (an object) as the model wrote it
};

// A fresh call id of the form the format's template accepts: Mistral 9 alphanumerics,
// the others "call_" + 24 alphanumerics.
std::string new_tool_call_id(ToolFormat f);

// The text a reply starts with to force a call (tool_choice "required": `name` empty)
// or a call of `name` (a named tool_choice): the format's opener, plus the JSON up to
// and including the name ("<tool_call>\n<function=NAME>\n" for kQwenXml, the
// commentary header to functions.NAME up to <|message|> for kHarmony). "" for kNone
// (such a choice cannot be enforced).
std::string forced_call_prefix(ToolFormat f, const std::string& name);

// In a rendered assistant message with tool_calls, the model's own text ends at the
// first occurrence of this marker after the message's last data byte (the marker
// included unless call_region_end_is_eog): what follows is the template's end of turn.
std::string_view call_region_end(ToolFormat f);
// kHarmony: the marker (<|call|>) is the end-of-generation token the reply stopped
// at, which the remembered reply does not hold: the region ends before it.
bool call_region_end_is_eog(ToolFormat f);

// Content and calls decided so far (push) or at the end (finish); kHarmony also says
// the reasoning (its analysis channel).
struct ToolParse {
  std::string content;
  std::vector<ToolCall> calls;
  std::string reasoning;
};

class HarmonyParser;

// Incremental parser over one reply. `new_id` names each call (default:
// new_tool_call_id(format)); `schemas` types kQwenXml arguments (null: all strings) and
// says the request offers tools: kHarmony without them parses no calls (a message to a
// function is content), as every harmony reply goes through this parser.
class ToolCallParser {
 public:
  explicit ToolCallParser(ToolFormat f, std::function<std::string()> new_id = {},
                          std::shared_ptr<const ToolSchemas> schemas = nullptr);
  ~ToolCallParser();
  ToolCallParser(ToolCallParser&&) noexcept;
  // Appends reply text; returns the content that can no longer be part of a call and
  // the calls completed by it.
  ToolParse push(std::string_view text);
  // End of the reply: whatever is held is decided (an unfinished call is content).
  ToolParse finish();
  int calls_so_far() const { return n_calls_; }

 private:
  void advance(bool at_end, ToolParse& out);
  void emit_content(size_t end, ToolParse& out);

  ToolFormat f_;
  std::function<std::string()> new_id_;
  std::shared_ptr<const ToolSchemas> schemas_;
  std::unique_ptr<HarmonyParser> harmony_;  // kHarmony: the whole reply goes through it
  std::string buf_;        // the reply so far
  size_t pos_ = 0;         // buf_[0, pos_) is decided
  bool after_call_ = false;  // the last thing decided was a call (whitespace is dropped)
  int n_calls_ = 0;
};

// The whole reply at once.
ToolParse parse_tool_calls(ToolFormat f, std::string_view text, std::function<std::string()> new_id = {},
                           std::shared_ptr<const ToolSchemas> schemas = nullptr);

}  // namespace pc::server
