// libFuzzer target: chat template source (the Jinja subset in src/template/),
// rendered over one fixed conversation that exercises what real templates
// read: a system prompt, tools, tool calls and results, reasoning, list
// content. A template comes from a model file or --chat-template, so a bad
// one must be a ChatTemplateError (or pc::Error from the role-marker probe),
// never a crash, a hang or another exception. Seeds: fuzz/corpus/chat_template/.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "chat_template_invariants.h"
#include "common/error.h"
#include "pml/role_markers.h"
#include "template/chat_template.h"

namespace {

const nlohmann::json& conversation() {
  static const nlohmann::json m = nlohmann::json::parse(R"([
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "", "reasoning_content": "Use the tool.",
     "tool_calls": [{"id": "c1", "type": "function",
                     "function": {"name": "weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "tool_call_id": "c1", "name": "weather", "content": "12 C, rain"},
    {"role": "assistant", "content": "<think>ok</think>12 C and rain."},
    {"role": "user", "content": [{"type": "text", "text": "Thanks. "}, {"type": "text", "text": "And Rome?"}]}
  ])");
  return m;
}

const nlohmann::json& extra() {
  static const nlohmann::json e = nlohmann::json::parse(R"({
    "tools": [{"type": "function", "function": {"name": "weather", "description": "Current weather",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                              "required": ["city"]}}}],
    "enable_thinking": false
  })");
  return e;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string source(reinterpret_cast<const char*>(data), size);
  std::unique_ptr<pc::ChatTemplate> t;
  try {
    t = std::make_unique<pc::ChatTemplate>(std::move(source), "<s>", "</s>");
  } catch (const pc::ChatTemplateError&) {
    return 0;
  }
  pc::fuzz::render_and_check(*t, conversation(), true, extra());
  pc::fuzz::render_and_check(*t, nlohmann::json::array({conversation()[1]}), false, nlohmann::json::object());
  try {
    (void)pc::pml::RoleMarkers::from_template(*t, "<s>", "</s>");
  } catch (const pc::Error&) {
  }
  return 0;
}
