// OpenAI request fields → engine parameters, and engine results → OpenAI
// response objects (completions and chat completions, whole and streamed).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "server/job.h"
#include "server/tool_calls.h"

namespace pc::server {

using json = nlohmann::json;

// Fields shared by /v1/completions and /v1/chat/completions.
struct CommonParams {
  std::string model;                 // as requested ("" = not given)
  GenerateRequest gen;               // sampling, max_tokens, stop_at_eog (prompt/tenant later)
  bool max_tokens_given = false;
  std::vector<std::string> stops;
  bool stream = false;
  bool include_usage = false;        // stream_options.include_usage
  std::string cache_salt;
};

// A chat request's tool_choice.
struct ToolChoice {
  enum class Mode { kAuto, kNone, kRequired, kNamed };
  Mode mode = Mode::kAuto;
  std::string name;  // kNamed: the function
  bool forces() const { return mode == Mode::kRequired || mode == Mode::kNamed; }
};

// tool_choice ("auto" default, "none", "required", {"type": "function", "function":
// {"name": ...}}) checked against `tools` and the template's call format. 400 naming
// tool_choice when it is malformed, needs tools the request lacks, names no given
// tool, or forces a call the template has no format for (unsupported_parameter:
// enforcing starts the reply with the format's call opener).
ToolChoice parse_tool_choice(const json& body, ToolFormat format);

// Validates and maps the fields; throws ApiError (400, naming the field).
// `chat` selects the defaults (chat: max_tokens up to the context; completions: 16).
CommonParams parse_common(const json& body, bool chat);

// The request's cache_reuse, cache_reuse_policy and cache_reuse_budget over `defaults`
// (what the server uses when a field is absent or null); ApiError 400 naming a bad field.
ReusePolicy parse_reuse(const json& body, ReusePolicy defaults);

// The request body as a JSON object; ApiError 400 when it is not one.
json parse_body(const std::string& body);

// Cache report of one request (the "promptcache" response field).
struct CacheReport {
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;
  int64_t computed_tokens = 0;
  int32_t spliced_replies = -1;  // chat only
  int64_t diverged_at = -1;
  std::string reason;            // "" = none
  int miss_index = -1;           // tools_changed / messages_changed: which tool or message
  std::string miss_change;       // messages_changed: edited, inserted, removed, reordered
  int64_t miss_tokens = 0;       // prompt tokens the miss cost
  int64_t module_hits = -1;      // PML only: modules reused from the module store
  int64_t module_misses = -1;    // PML only: modules encoded by this request
  // Prompt tokens whose KV was reused approximately (moved blocks) and recomputed for
  // them; 0 in exact mode. prompt_tokens = cached + approximate + recomputed + fresh.
  int64_t approximate_tokens = 0;
  int64_t recomputed_tokens = 0;
  int64_t checked_tokens = 0;    // policy "deviation": tokens run through layer 0 for its check
  int64_t reusable_tokens = 0;   // fresh tokens whose block's KV is cached at another position
  ReusePolicy reuse;             // what the request asked for
  RetentionReport retention;     // the prompt's longest prefix under a lifetime, if any
  int64_t fresh_tokens() const { return prompt_tokens - cached_tokens - approximate_tokens - recomputed_tokens; }
};

json usage_json(const CacheReport& c, int64_t completion_tokens);
json cache_json(const CacheReport& c);

// Response ids and object shapes.
struct ResponseMeta {
  std::string id;      // "cmpl-..." / "chatcmpl-..."
  int64_t created = 0; // unix seconds
  std::string model;
  bool chat = false;
};
ResponseMeta new_meta(const std::string& model, bool chat);

// Non-streamed response.
// `logprobs`: the choice's logprobs (logprobs_json), null when not asked for.
// `calls`: the reply's tool calls (chat): message.tool_calls, and content null when
// there is no other text.
json full_response(const ResponseMeta& m, const std::string& text, const std::string& finish,
                   const CacheReport& c, int64_t completion_tokens, const json& logprobs = nullptr,
                   const std::vector<ToolCall>& calls = {});
// One streamed chunk: text delta (finish "" = null); role only in the first chat chunk.
json chunk(const ResponseMeta& m, const std::string& text, const std::string& finish,
           bool first, const json& logprobs = nullptr);
// A streamed tool call, as OpenAI streams one: the header chunk carries index, id,
// type, function.name and arguments ""; the next carries index and the arguments.
json tool_call_chunk(const ResponseMeta& m, int index, const ToolCall& call, bool header, bool first);
// A choice's "logprobs" for these tokens: chat {"content": [{token, logprob, bytes,
// top_logprobs}]}, completions the legacy {tokens, token_logprobs, top_logprobs,
// text_offset}.
json logprobs_json(const Tokenizer& tok, bool chat, std::span<const TokenLogprobInfo> lps);
// The usage chunk of stream_options.include_usage (choices: []).
json usage_chunk(const ResponseMeta& m, const CacheReport& c, int64_t completion_tokens);

// OpenAI error object.
json error_json(const std::string& message, const std::string& type, const std::string& param,
                const std::string& code);

// Serializes JSON, replacing invalid UTF-8 (a stream cut inside a character).
std::string dump(const json& j);

}  // namespace pc::server
