// The JSON of an OpenAI-style chat request checked and turned into what the chat
// template renders: shared by /v1/chat/completions, /v1/messages (after translation),
// /apply-template and the cache admin routes. Every function here needs no model: a bad
// field is an ApiError 400 naming it (messages[2].content[1].type), never another
// exception, so the decoders can be fuzzed on their own (fuzz/openai_request_fuzz.cc).
#pragma once
#include <cstdint>

#include <nlohmann/json.hpp>

namespace pc::server {

using json = nlohmann::json;

// Item caps of a chat request, checked before anything is rendered or tokenized
// (docs/api.md "Request limits"): a request past one is a 400 naming the cap.
constexpr size_t kMaxMessages = 10000;
constexpr size_t kMaxTools = 1024;
constexpr size_t kMaxContentParts = 1024;  // per message

// 400 naming the message unless `messages` is a non-empty array of {role, content}
// with at most kMaxMessages messages, each content a string, null or an array of at
// most kMaxContentParts text parts ({"type": "text", "text": "..."}), tool_calls well
// formed.
void check_messages(const json& body);

// 400 naming the tool unless `tools` (when present) is an array of at most kMaxTools
// {"type": "function", "function": {"name": string, "description"?: string,
// "parameters"?: object}}.
void check_tools(const json& body);

// Between the text parts of one message when they are joined into its content, as
// llama.cpp and vLLM join them ("What is" + "the best book" → "What is\nthe best book").
inline constexpr const char* kContentPartJoiner = "\n";

// The messages as the chat template sees them: content parts ([{"type":"text",
// "text":...}]) joined into one string with kContentPartJoiner, and role "developer"
// (OpenAI's newer name for system) rendered as "system", since most templates know no
// developer role and would drop the message. The messages must have passed
// check_messages; indices are kept.
json template_messages(json messages);

// The template's extra variables: chat_template_kwargs, tools (unless tool_choice is
// "none"), documents.
json chat_extra(const json& body);

// A lower bound on the prompt's tokens from its text alone: the bytes of the contents
// of the system, developer, user and tool messages (every template renders them as
// sent), over the longest token of the vocabulary in bytes. 400
// context_length_exceeded naming `param` when that bound already reaches `n_ctx`
// (max_prompt_bytes = n_ctx * longest token), before any rendering or tokenization.
void check_prompt_bytes(const json& messages, int64_t max_prompt_bytes, int64_t n_ctx, const char* param);

}  // namespace pc::server
