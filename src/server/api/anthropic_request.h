// An Anthropic Messages request (/v1/messages) translated into the OpenAI-style chat
// request the chat path renders:
//
//   system (string or text blocks)      → message 0, role system (blocks as text parts)
//   user text blocks                    → user message, blocks as text parts
//   user tool_result blocks             → "tool" messages (tool_call_id = tool_use_id)
//   assistant tool_use blocks           → the assistant message's tool_calls
//   tools {name, description,           → {type: function, function: {name,
//          input_schema}                    description, parameters}}
//   cache_control on any of them        → a Breakpoint on the part holding it
//
// Needs no model: a bad field is an ApiError 400 naming it (fuzz/anthropic_request_fuzz.cc).
#pragma once
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/chat/request_structure.h"

namespace pc::server {

using json = nlohmann::json;

// A cache_control breakpoint: the tool or (translated) message holding the block, and
// the block's index among the message's text parts (-1: the whole message).
struct Breakpoint {
  RequestPart::Kind kind = RequestPart::Kind::kMessage;
  int index = 0;
  int sub = -1;
  double seconds = 300;
};

struct AnthropicTranslation {
  json messages = json::array();  // OpenAI-style
  json tools = json::array();     // OpenAI-style
  std::vector<Breakpoint> breakpoints;
  std::set<std::string> tool_use_ids;  // of the assistant messages so far
};

// The request's system, messages and tools translated; at most kMaxMessages messages,
// kMaxContentParts blocks per message and kMaxTools tools (chat_request.h). A
// tool_result must answer a tool_use of an earlier assistant message.
AnthropicTranslation translate_anthropic(const json& body);

// Anthropic's sampling fields (max_tokens required, temperature in [0, 1],
// stop_sequences, tool_choice auto/none) → the OpenAI-style body parse_common takes.
json anthropic_common_body(const json& body);

// The request's `thinking`: {"type": "enabled", "budget_tokens": N} or {"type":
// "adaptive"} → true, {"type": "disabled"} → false, absent → nullopt; 400 naming the
// field otherwise.
std::optional<bool> anthropic_thinking(const json& body);

// True when tool_choice is {"type": "none"} (the template gets no tools).
bool anthropic_tools_off(const json& body);

}  // namespace pc::server
