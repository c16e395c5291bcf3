// A generation request on its way through the server, shared by the OpenAI
// routes (generation_routes.cc) and the PML route (pml_routes.cc): submit the
// job, then answer whole or as server-sent events.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "server/http/http.h"

#include "server/chat/chat_request.h"
#include "server/chat/conversation.h"
#include "server/chat/reasoning.h"
#include "server/job.h"
#include "server/api/openai.h"
#include "server/state.h"

namespace pc::server {

struct Generation {
  CommonParams params;
  CacheScope scope;  // whose cached KV it may reuse
  ResponseMeta meta;
  int64_t prompt_tokens = 0;       // what usage.prompt_tokens reports
  std::optional<ChatPrompt> chat;  // chat requests
  MissReport miss;                 // chat: the first divergence from the request it continues
  bool pml = false;                // a PML plan (module hits in the report)
  // Chat with tools (tool_choice not "none"): the reply is parsed for calls in this
  // format (kNone: plain content).
  // kHarmony is set for every chat request (its parser is what takes the channels
  // apart), tools or not.
  ToolFormat tools = ToolFormat::kNone;
  // The tools' parameters schemas (kQwenXml types its arguments by them); null: none.
  std::shared_ptr<const ToolSchemas> tool_schemas;
  // tool_choice "required" / named: the call opener the reply starts with
  // (forced_call_prefix), appended to the prompt as prefill_ids; the parser and the
  // conversation memory see it as the start of the reply.
  std::string prefill;
  std::vector<int32_t> prefill_ids;
  // The reply's thinking told apart (reasoning.h): the template's tags, empty when the
  // reply is not split (reasoning_format none, no thinking in the template, or a forced
  // tool call); think_open when the prompt already opened the block.
  ThinkTags think;
  bool think_open = false;
  // The volatile rules (--volatile-rules) that normalised the messages, by name.
  std::vector<std::string> volatile_rules_applied;
  // max_tokens was cut to what the context leaves after the prompt (fit_context):
  // the cut value, reported as promptcache.max_tokens_capped; -1 when it fit.
  int64_t max_tokens_capped = -1;
  std::shared_ptr<Job> job;
  // Held from submit() until the response is written (Server::generations_in_flight):
  // a stream's Generation lives in its content provider, which the server keeps until
  // the last chunk went out.
  std::shared_ptr<void> in_flight;
  // The request's log line (RequestTrace::current() when it started): filled in by
  // finish_generation, written once this Generation and the route let go of it.
  std::shared_ptr<RequestTrace> trace;
};

// The server's chat template; ApiError 400 no_chat_template when it has none.
const ChatTemplate& chat_template_of(const Server::State& st);

// Queues g.job (built by the caller); ApiError 503 `server_draining` while the server
// drains, 503 `server_overloaded` when the queue is full.
void submit(Server::State& st, Generation& g);

// The chat path shared by /v1/chat/completions and /v1/messages (anthropic_routes.cc):
//   prepare_chat      renders OpenAI-style `messages` as sent (content a string or text
//                     parts, joined here) with `extra` (chat_extra: tools, kwargs),
//                     tokenizes with replies spliced in; sets g.chat, the prompt, its
//                     parts (text parts of a message split out, request_structure.h),
//                     blocks and the miss report
//   start_generation  checks the prompt against the context (400
//                     context_length_exceeded), builds and queues g.job
//   wait_whole        collects the whole reply; false when the client left (the job is
//                     cancelled)
//   finish_generation after the job ended: the cache report, metrics, and the reply
//                     remembered for the next turn (by its tool call ids when it made
//                     `calls`, else by its text)
// g.params (sampling, stops, g.params.gen.retain) and g.scope are the caller's to set first.
// `mode`: how the messages end (chat_render.h: generation prompt, none, or the final
// assistant message continued).
// `key_order`: the request body as sent (read with ordered_json), whose "messages" and
// "tools" give the template their objects' key order; null: keys sorted.
void prepare_chat(Server::State& st, Generation& g, const json& messages, const json& extra, ChatRender mode = {},
                  const nlohmann::ordered_json* key_order = nullptr);
// Sets g.tools and g.tool_schemas: the reply is parsed for calls when the request offers
// `tools` (in any of the API's shapes) and `parse` (tool_choice is not "none"), and always
// with a harmony template (its channels).
void parse_replies_for_tools(const Server::State& st, Generation& g, const json& tools, bool parse);
// tool_choice "required" / named (Anthropic any / tool): the reply must be a call, so
// it starts with the template's call opener (and, for a named tool, the JSON through
// the name): g.prefill, tokenized as g.prefill_ids and appended to the prompt (after
// prepare_chat). With the request's text `raw_body` (OpenAI tools), a strict tool's
// arguments are constrained by its schema. Nothing for a choice that does not force.
void force_tool_call(Server::State& st, Generation& g, const ToolChoice& choice, std::string_view raw_body = {});
// Splits the reply's thinking from its answer when `format` is not none and the
// template thinks in tags (after prepare_chat and force_tool_call: a forced call's
// reply does not think).
void split_thinking(const Server::State& st, Generation& g, ReasoningFormat format);
// A request's reasoning_format (llama-server's field), or the server's
// --reasoning-format; 400 naming it for another value.
ReasoningFormat request_reasoning_format(const Server::State& st, const json& body);
// --test-hooks: the request field test_forced_reply (400 without the flag).
void apply_test_hooks(Server::State& st, Generation& g, const json& body);
void start_generation(Server::State& st, Generation& g);
bool wait_whole(Server::State& st, Generation& g, const HttpRequest& req, Delta* all);
CacheReport finish_generation(Server::State& st, const Generation& g, const std::vector<ToolCall>& calls = {});

// Waits for the job and answers: one JSON response, or (params.stream) events as
// the text comes. A client that disconnects cancels the job either way.
void respond(Server::State& st, std::shared_ptr<Generation> g, const HttpRequest& req,
             HttpResponse& res);

// What every route's answer does around the writing: a stream whose connection ended
// cancels a generation still running (it has no reader any more); a whole answer that
// throws cancels its generation before the error goes on.
void cancel_if_running(Server::State& st, Generation& g);
void cancel_generation(Server::State& st, Generation& g);
template <class Whole>
void answer_whole(Server::State& st, Generation& g, Whole&& write) {
  try {
    write();
  } catch (...) {
    cancel_generation(st, g);
    throw;
  }
}

}  // namespace pc::server
