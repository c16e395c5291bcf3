#include "server/api/openai.h"

#include "server/api/lifetime.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <random>

#include "engine/approximate/recompute_policy.h"
#include "server/api/api_error.h"
#include "tokenizer/tokenizer.h"

namespace pc::server {

namespace {

std::string next_id(const char* prefix) {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t boot = std::random_device{}();
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s-%08llx%06llx", prefix, (unsigned long long)(boot & 0xffffffff),
                (unsigned long long)++counter);
  return buf;
}

}  // namespace

json usage_json(const CacheReport& c, int64_t completion_tokens) {
  return {{"prompt_tokens", c.prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", c.prompt_tokens + completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", c.cached_tokens}}}};
}

json cache_json(const CacheReport& c) {
  // prompt_tokens = cached_tokens + approximate_tokens + recomputed_tokens + fresh_tokens;
  // computed_tokens counts every prompt token the forward pass computed for the request
  // (a PML request's module encodings too).
  json j = {{"cached_tokens", c.cached_tokens},
            {"approximate_tokens", c.approximate_tokens},
            {"recomputed_tokens", c.recomputed_tokens},
            {"fresh_tokens", c.fresh_tokens()},
            {"computed_tokens", c.computed_tokens},
            {"reusable_tokens", c.reusable_tokens},
            {"cache_reuse", c.reuse.mode == CacheReuse::kApproximate
                                ? json{{"mode", "approximate"},
                                       {"policy", recompute_policy_name(c.reuse.policy)},
                                       {"budget", c.reuse.budget}}
                                : json{{"mode", "exact"}}}};
  if (c.reuse.mode == CacheReuse::kApproximate) j["checked_tokens"] = c.checked_tokens;
  if (c.reuse.mode == CacheReuse::kApproximate && c.reuse.report_blocks) {
    static const char* source[] = {"exact", "continued", "found", "computed"};
    json blocks = json::array();
    for (const BlockReuse& b : c.blocks)
      blocks.push_back({{"begin", b.begin}, {"end", b.end}, {"source", source[int(b.source)]}});
    j["blocks"] = std::move(blocks);
  }
  const PromptTimings& t = c.timings;
  j["timings"] = {{"assemble_ms", t.assemble_ms},
                  {"lookup_ms", t.lookup_ms},
                  {"relocate_ms", t.relocate_ms},
                  {"check_forward_ms", t.check_forward_ms},
                  {"check_score_ms", t.check_score_ms},
                  {"select_ms", t.select_ms},
                  {"forward_ms", t.forward_ms},
                  {"forward_passes", t.forward_passes}};
  if (c.module_hits >= 0) {
    j["module_hits"] = c.module_hits;
    j["module_misses"] = c.module_misses;
  }
  add_retention_json(j, c.retention);
  if (c.max_tokens_capped >= 0) j["max_tokens_capped"] = c.max_tokens_capped;
  if (!c.volatile_rules_applied.empty()) j["volatile_rules_applied"] = c.volatile_rules_applied;
  if (c.spliced_replies >= 0) j["spliced_replies"] = c.spliced_replies;
  j["diverged_at"] = c.diverged_at >= 0 ? json(c.diverged_at) : json(nullptr);
  j["reason"] = c.reason.empty() ? json(nullptr) : json(c.reason);
  if (!c.reason.empty()) {
    json m = {{"reason", c.reason}, {"tokens", c.miss_tokens}};
    if (c.reason == "tools_changed") m["tool"] = c.miss_index;
    if (c.reason == "messages_changed" || c.reason == "system_changed") m["message"] = c.miss_index;
    if (!c.miss_change.empty()) m["change"] = c.miss_change;
    j["miss"] = m;
  }
  return j;
}

ResponseMeta new_meta(const std::string& model, bool chat) {
  ResponseMeta m;
  m.id = next_id(chat ? "chatcmpl" : "cmpl");
  m.created = std::chrono::duration_cast<std::chrono::seconds>(
                  std::chrono::system_clock::now().time_since_epoch()).count();
  m.model = model;
  m.chat = chat;
  return m;
}

namespace {
json base(const ResponseMeta& m, const char* object) {
  return {{"id", m.id}, {"object", object}, {"created", m.created}, {"model", m.model},
          {"system_fingerprint", nullptr}};
}
json finish_json(const std::string& f) { return f.empty() ? json(nullptr) : json(f); }
}  // namespace

namespace {
json call_json(const ToolCall& c) {
  return {{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}};
}
}  // namespace

json full_response(const ResponseMeta& m, const std::string& text, const std::string& finish,
                   const CacheReport& c, int64_t completion_tokens, const json& logprobs,
                   const std::vector<ToolCall>& calls, const std::string& reasoning) {
  json r = base(m, m.chat ? "chat.completion" : "text_completion");
  json choice = {{"index", 0}, {"logprobs", logprobs}, {"finish_reason", finish_json(finish)}};
  if (m.chat) {
    const json content = calls.empty() || !text.empty() ? json(text) : json(nullptr);
    choice["message"] = {{"role", "assistant"}, {"content", content}, {"refusal", nullptr}};
    if (!reasoning.empty()) choice["message"]["reasoning_content"] = reasoning;
    if (!calls.empty()) {
      json tc = json::array();
      for (const ToolCall& call : calls) tc.push_back(call_json(call));
      choice["message"]["tool_calls"] = tc;
    }
  } else
    choice["text"] = text;
  r["choices"] = json::array({choice});
  r["usage"] = usage_json(c, completion_tokens);
  r["promptcache"] = cache_json(c);
  return r;
}

json chunk(const ResponseMeta& m, const std::string& text, const std::string& finish, bool first,
           const json& logprobs) {
  json r = base(m, m.chat ? "chat.completion.chunk" : "text_completion");
  json choice = {{"index", 0}, {"logprobs", logprobs}, {"finish_reason", finish_json(finish)}};
  if (m.chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || (first && finish.empty())) delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  r["choices"] = json::array({choice});
  return r;
}

json reasoning_chunk(const ResponseMeta& m, const std::string& reasoning, bool first, const json& logprobs) {
  json r = base(m, "chat.completion.chunk");
  json delta = json::object();
  if (first) delta["role"] = "assistant";
  delta["reasoning_content"] = reasoning;
  r["choices"] = json::array({{{"index", 0}, {"delta", delta}, {"logprobs", logprobs}, {"finish_reason", nullptr}}});
  return r;
}

json tool_call_chunk(const ResponseMeta& m, int index, const ToolCall& call, bool header, bool first) {
  json r = base(m, "chat.completion.chunk");
  json delta = json::object();
  if (first) delta["role"] = "assistant";
  json tc = header ? json{{"index", index}, {"id", call.id}, {"type", "function"},
                          {"function", {{"name", call.name}, {"arguments", ""}}}}
                   : json{{"index", index}, {"function", {{"arguments", call.arguments}}}};
  delta["tool_calls"] = json::array({tc});
  r["choices"] = json::array({{{"index", 0}, {"delta", delta}, {"logprobs", nullptr}, {"finish_reason", nullptr}}});
  return r;
}

namespace {
json bytes_json(const std::string& s) {
  json b = json::array();
  for (unsigned char ch : s) b.push_back(int(ch));
  return b;
}
}  // namespace

json logprobs_json(const Tokenizer& tok, bool chat, std::span<const TokenLogprobInfo> lps) {
  if (chat) {
    json content = json::array();
    for (const TokenLogprobInfo& t : lps) {
      const std::string piece = tok.token_to_piece(t.id);
      json top = json::array();
      for (const auto& [id, lp] : t.lp.top) {
        const std::string p = tok.token_to_piece(id);
        top.push_back({{"token", p}, {"logprob", lp}, {"bytes", bytes_json(p)}});
      }
      content.push_back({{"token", piece}, {"logprob", t.lp.logprob}, {"bytes", bytes_json(piece)},
                         {"top_logprobs", top}});
    }
    return {{"content", content}, {"refusal", nullptr}};
  }
  // The legacy completions shape: parallel arrays; text_offset counts bytes from
  // the start of the completion text.
  json tokens = json::array(), token_lps = json::array(), tops = json::array(),
       offsets = json::array();
  for (const TokenLogprobInfo& t : lps) {
    tokens.push_back(tok.token_to_piece(t.id));
    token_lps.push_back(t.lp.logprob);
    json top = json::object();
    for (const auto& [id, lp] : t.lp.top) {
      const std::string p = tok.token_to_piece(id);
      if (!top.contains(p)) top[p] = lp;  // pieces may repeat; keep the likelier
    }
    tops.push_back(top);
    offsets.push_back(t.text_offset);
  }
  return {{"tokens", tokens}, {"token_logprobs", token_lps}, {"top_logprobs", tops},
          {"text_offset", offsets}};
}

json usage_chunk(const ResponseMeta& m, const CacheReport& c, int64_t completion_tokens) {
  json r = base(m, m.chat ? "chat.completion.chunk" : "text_completion");
  r["choices"] = json::array();
  r["usage"] = usage_json(c, completion_tokens);
  r["promptcache"] = cache_json(c);
  return r;
}

json error_json(const std::string& message, const std::string& type, const std::string& param,
                const std::string& code) {
  return {{"error",
           {{"message", message},
            {"type", type},
            {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", code.empty() ? json(nullptr) : json(code)}}}};
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace pc::server
