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
#include "server/api/openai_request.h"
#include "server/chat/tool_calls.h"

namespace pc::server {

using json = nlohmann::json;

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
  PromptTimings timings;         // where the prompt's engine time went ("timings")
  std::vector<BlockReuse> blocks;  // approximate, cache_reuse_blocks: each block's source ("blocks")
  RetentionReport retention;     // the prompt's longest prefix under a lifetime, if any
  // The request's max_tokens did not fit after the prompt: the reply was allowed this
  // many tokens (to the context's end) instead; -1 when max_tokens fit as asked.
  int64_t max_tokens_capped = -1;
  std::vector<std::string> volatile_rules_applied;  // chat: the rules that normalised the messages
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
// `reasoning`: the reply's thinking (chat), message.reasoning_content when not empty.
json full_response(const ResponseMeta& m, const std::string& text, const std::string& finish,
                   const CacheReport& c, int64_t completion_tokens, const json& logprobs = nullptr,
                   const std::vector<ToolCall>& calls = {}, const std::string& reasoning = {});
// One streamed chunk: text delta (finish "" = null); role only in the first chat chunk.
json chunk(const ResponseMeta& m, const std::string& text, const std::string& finish,
           bool first, const json& logprobs = nullptr);
// A streamed piece of the reply's thinking: delta.reasoning_content (llama-server, vLLM).
json reasoning_chunk(const ResponseMeta& m, const std::string& reasoning, bool first, const json& logprobs = nullptr);
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
