// An OpenAI Responses request (POST /v1/responses) translated into the OpenAI-style chat
// request the chat path renders:
//
//   instructions                          → message 0, role system
//   input "text"                          → one user message
//   message {role, content}               → a message of that role (developer/system/
//     content: string | input_text /        user/assistant); its text parts as content
//     output_text / refusal parts           parts; an assistant message's single part as
//                                            its content string (the reply's text, which
//                                            the conversation memory finds it by)
//   function_call {call_id, name, args}   → a tool call of the assistant message before
//                                            it (a new one when the item before is not an
//                                            assistant message); calls in a row share one
//   function_call_output {call_id, out}   → a "tool" message (tool_call_id = call_id)
//   reasoning                             → dropped (the template renders no earlier
//                                            reasoning the client sends back)
//   item_reference {id}                   → the stored output item with that id
//   tools [{type: function, name, ...}]   → [{type: function, function: {name, ...}}];
//                                            other tool types (web_search, file_search,
//                                            mcp, ...) are ignored and listed
//   tool_choice, max_output_tokens,       → the chat body's tool_choice, max_tokens,
//   temperature, top_p, stream               temperature, top_p, stream
//
// Needs no model: a bad or unsupported field is an ApiError 400 naming it
// (input[2].content[0].type), never another exception.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace pc::server {

using json = nlohmann::json;

struct ResponsesTranslation {
  json messages = json::array();  // the input as chat messages (no instructions, no history)
  json input_items = json::array();  // the input as items (a string input: one user message)
  std::string instructions;       // "" = none
  json tools = json::array();     // function tools, chat style
  std::vector<std::string> ignored_tools;  // types of the tools accepted and not run
  // The chat-style body parse_common and parse_tool_choice take: model, sampling,
  // max_tokens, stream, tools, tool_choice and the promptcache extensions (cache_salt,
  // seed, top_k, cache_reuse, ...).
  json chat_body = json::object();
  bool store = true;              // OpenAI's default
  std::string previous_response_id;  // "" = none
  // The response object's echo of the request: instructions, tools (as sent),
  // tool_choice, temperature, top_p, max_output_tokens, text, reasoning, metadata,
  // parallel_tool_calls, truncation.
  json echo = json::object();
};

// An output item of a stored response by its id (item_reference); nullopt when there is
// none.
using ItemLookup = std::function<std::optional<json>(const std::string& item_id)>;

// Item caps (as chat's, chat_request.h): at most kMaxMessages input items, kMaxTools
// tools, kMaxContentParts parts per message. An item_reference is replaced by the item
// `lookup` finds (400 naming input[i].id when it finds none, or without a lookup).
ResponsesTranslation translate_responses(const json& body, const ItemLookup& lookup = {});

// A response or item id as the routes take it in a path or previous_response_id:
// 1 to 128 characters of [A-Za-z0-9_-].
bool valid_response_id(const std::string& id);

}  // namespace pc::server
