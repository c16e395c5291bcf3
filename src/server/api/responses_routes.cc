// POST /v1/responses (OpenAI Responses / Open Responses) as a translation layer over the
// chat path, and GET / DELETE /v1/responses/{id} over the stored responses.
//
//   Responses request ──► chat messages + tools ──────────► prepare_chat / start_generation
//   (input items,          (responses_request.h; with        (generation.h: the same template,
//    instructions, tools)   previous_response_id the stored   tool formats, conversation
//                           conversation first)               memory, caches and scheduler)
//   response object  ◄──── output items (message, function_call) + usage ◄── the reply
//
// A stored response (store: true, the default) keeps the conversation through its output
// as chat messages and the ids the model generated (the conversation memory's
// RememberedReply); a request continuing it renders that conversation with its own input
// after it, and its reply is put back into the conversation memory first, so the splice
// reuses the exact ids and the history is a cache hit (also on another server of the
// cluster, through Redis: response_store.h). Errors are OpenAI's shape.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "server/api/api_error.h"
#include "server/api/lifetime.h"
#include "server/api/openai.h"
#include "server/api/responses_request.h"
#include "server/api/structured_output.h"
#include "server/generation.h"
#include "server/state.h"

namespace pc::server {

namespace {

using ojson = nlohmann::ordered_json;

using namespace std::chrono_literals;

// 32 random hex digits: a response is "resp_" + hex, its output items "msg_" / "fc_" +
// hex + "_" + the item's index, so an item_reference finds its response.
std::string new_hex() {
  static std::atomic<uint64_t> counter{0};
  thread_local std::mt19937_64 rng(uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()) ^
                                   (uint64_t(std::random_device{}()) << 32) ^ ++counter);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng()));
  return buf;
}

struct ResponsesGeneration;
std::string item_id(const ResponsesGeneration& a, const char* prefix, size_t index);

struct ResponsesGeneration {
  Generation g;
  ResponsesTranslation t;
  std::string tenant;
  std::string hex;  // of the ids
  std::string id;   // "resp_" + hex
  int64_t created_at = 0;
  json conversation = json::array();  // chat messages: history, then this input (no instructions)
};

std::string item_id(const ResponsesGeneration& a, const char* prefix, size_t index) {
  return prefix + a.hex + "_" + std::to_string(index);
}

// The output item `id` of a stored response of the tenant (item_reference).
std::optional<json> stored_item(Server::State& st, const std::string& tenant, const std::string& id) {
  const size_t u = id.find('_'), v = id.rfind('_');
  if (u == std::string::npos || v <= u) return std::nullopt;
  const std::string response_id = "resp_" + id.substr(u + 1, v - u - 1);
  if (!valid_response_id(response_id)) return std::nullopt;
  const std::optional<StoredResponse> s = st.responses.get(tenant, response_id);
  if (!s || !s->response.contains("output") || !s->response["output"].is_array()) return std::nullopt;
  for (const json& item : s->response["output"])
    if (item.is_object() && item.value("id", json()) == id) return item;
  return std::nullopt;
}

// The stored conversation's reply back into the conversation memory, under this
// request's namespace: its splice then finds the generated ids, even when the memory
// let them go or another server generated them.
void remember_stored_reply(Server::State& st, const CacheScope& ns, const StoredResponse& s) {
  if (!s.reply || !s.reply_key.is_object()) return;
  if (const auto text = s.reply_key.find("text"); text != s.reply_key.end() && text->is_string()) {
    st.memory.remember(ns, text->get<std::string>(), *s.reply);
  } else if (const auto calls = s.reply_key.find("calls"); calls != s.reply_key.end() && calls->is_array()) {
    std::vector<std::string> ids;
    for (const json& id : *calls)
      if (id.is_string()) ids.push_back(id.get<std::string>());
    if (ids.size() == calls->size()) st.memory.remember_calls(ns, ids, *s.reply);
  }
}

ApiError response_not_found(const std::string& id, const std::string& param) {
  return ApiError(404, "invalid_request_error", "Response with id '" + id + "' not found.", param, "response_not_found");
}

ResponsesGeneration prepare_generation(Server::State& st, const HttpRequest& req);

// The request's function tools in chat's shape ({"tools": [{type, function: {name,
// description, parameters, strict}}]}), read from its text so that schemas keep their
// key order: what the strict-tool grammar reads (forced_call_grammar).
std::string chat_shaped_tools(std::string_view raw) {
  const ojson body = ojson::parse(raw.begin(), raw.end(), nullptr, false);
  ojson tools = ojson::array();
  if (body.is_object() && body.contains("tools") && body["tools"].is_array())
    for (const ojson& t : body["tools"]) {
      if (!t.is_object() || !t.contains("type") || t["type"] != "function") continue;
      ojson fn = t;
      fn.erase("type");
      tools.push_back({{"type", "function"}, {"function", std::move(fn)}});
    }
  return ojson{{"tools", std::move(tools)}}.dump();
}

// A grammar error's param in chat's shape (tools[k].function.X, k among the function
// tools) as the request's field (tools[i].X).
std::string responses_tool_param(const std::string& param, std::string_view raw) {
  if (param.rfind("tools[", 0) != 0) return param;
  const size_t close = param.find(']');
  const int k = std::atoi(param.c_str() + 6);
  const ojson body = ojson::parse(raw.begin(), raw.end(), nullptr, false);
  int seen = -1;
  size_t i = 0;
  if (body.is_object() && body.contains("tools") && body["tools"].is_array())
    for (; i < body["tools"].size(); ++i) {
      const ojson& t = body["tools"][i];
      if (t.is_object() && t.contains("type") && t["type"] == "function" && ++seen == k) break;
    }
  std::string rest = param.substr(close + 1);
  if (rest.rfind(".function", 0) == 0) rest = rest.substr(9);
  return "tools[" + std::to_string(i) + "]" + rest;
}

// reasoning.effort as the templates' switches: `reasoning_effort` (gpt-oss's harmony
// template reads it) and `enable_thinking` (Qwen3's: off for "none" and "minimal"),
// unless chat_template_kwargs set them.
json reasoning_extra(const json& body, json extra) {
  auto r = body.find("reasoning");
  if (r == body.end() || !r->is_object()) return extra;
  auto e = r->find("effort");
  if (e == r->end() || e->is_null()) return extra;
  const std::string effort = e->is_string() ? e->get<std::string>() : "";
  static const char* kEfforts[] = {"none", "minimal", "low", "medium", "high", "xhigh"};
  if (std::find(std::begin(kEfforts), std::end(kEfforts), effort) == std::end(kEfforts))
    throw bad_field("reasoning.effort", "'reasoning.effort' must be none, minimal, low, medium, high or xhigh");
  if (!extra.contains("reasoning_effort")) extra["reasoning_effort"] = effort == "xhigh" ? "high" : effort == "none" || effort == "minimal" ? "low" : effort;
  if (!extra.contains("enable_thinking")) extra["enable_thinking"] = effort != "none" && effort != "minimal";
  return extra;
}

// The chat path names chat's fields in its errors: the prompt is `input`, the reply's
// bound `max_output_tokens` here.
ResponsesGeneration prepare(Server::State& st, const HttpRequest& req) {
  try {
    return prepare_generation(st, req);
  } catch (ApiError& e) {
    if (e.param == "max_tokens") e.param = "max_output_tokens";
    else if (e.param == "messages") e.param = "input";
    throw;
  }
}

ResponsesGeneration prepare_generation(Server::State& st, const HttpRequest& req) {
  ResponsesGeneration a;
  Generation& g = a.g;
  const json body = parse_body(req.body);
  a.tenant = st.tenant_of(req);  // 401 before anything else
  a.t = translate_responses(body, [&](const std::string& id) { return stored_item(st, a.tenant, id); });
  const json& chat = a.t.chat_body;
  g.params = parse_common(chat, /*chat=*/true, st.opt.defaults);
  st.check_model(g.params.model);
  g.scope = st.scope_of_request(req, g.params.cache_salt);
  g.params.gen.reuse = parse_reuse(chat, st.reuse_default);
  g.params.gen.grammar = parse_responses_text_format(body, req.body);
  if (!a.t.previous_response_id.empty()) {
    std::optional<StoredResponse> prev = st.responses.get(a.tenant, a.t.previous_response_id);
    if (!prev)
      throw ApiError(404, "invalid_request_error",
                     "Previous response with id '" + a.t.previous_response_id + "' not found.",
                     "previous_response_id", "previous_response_not_found");
    a.conversation = prev->messages;
    remember_stored_reply(st, g.scope, *prev);
  }
  for (const json& m : a.t.messages) a.conversation.push_back(m);
  json messages = json::array();
  if (!a.t.instructions.empty()) messages.push_back({{"role", "system"}, {"content", a.t.instructions}});
  for (const json& m : a.conversation) messages.push_back(m);
  // The translation built these; a failure here names chat's fields, so it is a bug
  // there, not the client's (still a 400, never a 500).
  check_messages({{"messages", messages}});
  check_tools(chat);
  const ToolChoice choice = parse_tool_choice(chat, st.tool_format);
  const json extra = reasoning_extra(body, chat_extra(chat));
  // Too long a prompt is a 400 before anything else reads the body again.
  check_prompt_bytes(messages, st.max_prompt_bytes, st.n_ctx, "input");
  // Schemas keep the key order the client sent (the template writes them).
  const ojson order = translated_key_order(messages, extra, ojson::parse(req.body, nullptr, false));
  prepare_chat(st, g, messages, extra, ChatRender{}, &order);
  parse_replies_for_tools(st, g, a.t.tools, choice.mode != ToolChoice::Mode::kNone);
  // A forced call of a strict tool follows its schema, as on chat.
  try {
    force_tool_call(st, g, choice, chat_shaped_tools(req.body));
  } catch (ApiError& e) {
    e.param = responses_tool_param(e.param, req.body);
    throw;
  }
  split_thinking(st, g, st.opt.reasoning_format);  // reasoning items (docs/api.md)
  apply_test_hooks(st, g, chat);
  if (const std::optional<double> life = openai_retention_seconds(chat))
    g.params.gen.retain.push_back({int32_t(g.params.gen.prompt.size()), *life * st.opt.test_time_scale});
  start_generation(st, g);
  a.hex = new_hex();
  a.id = "resp_" + a.hex;
  a.created_at = std::chrono::duration_cast<std::chrono::seconds>(
                     std::chrono::system_clock::now().time_since_epoch()).count();
  return a;
}

// ---- response objects ----

json text_part(const std::string& text) {
  return {{"type", "output_text"}, {"text", text}, {"annotations", json::array()}, {"logprobs", json::array()}};
}

json message_item(const std::string& id, const std::string& status, json content) {
  return {{"id", id}, {"type", "message"}, {"status", status}, {"role", "assistant"}, {"content", std::move(content)}};
}

// The model's thinking (reasoning.h), as Open Responses gives an open model's: its text
// in content, no summary, nothing encrypted.
json reasoning_item(const std::string& id, const std::string& status, const std::string& text) {
  json content = json::array();
  if (!text.empty() || status == "completed") content.push_back({{"type", "reasoning_text"}, {"text", text}});
  return {{"id", id}, {"type", "reasoning"}, {"status", status}, {"summary", json::array()}, {"content", content}};
}

json call_item(const std::string& id, const std::string& status, const ToolCall& call, const std::string& arguments) {
  return {{"id", id},         {"type", "function_call"}, {"status", status},
          {"call_id", call.id}, {"name", call.name},       {"arguments", arguments}};
}

// reasoning_tokens: the reasoning text's tokens (tokenized again: a count, not the ids).
json usage_of(const CacheReport& c, int64_t output_tokens, int64_t reasoning_tokens = 0) {
  return {{"input_tokens", c.prompt_tokens},
          {"input_tokens_details", {{"cached_tokens", c.cached_tokens}}},
          {"output_tokens", output_tokens},
          {"output_tokens_details", {{"reasoning_tokens", reasoning_tokens}}},
          {"total_tokens", c.prompt_tokens + output_tokens}};
}

// status: in_progress, completed, incomplete (max_output_tokens or the context), failed.
json response_object(const Server::State& st, const ResponsesGeneration& a, const std::string& status, json output) {
  json r = {{"id", a.id},
            {"object", "response"},
            {"created_at", a.created_at},
            {"status", status},
            {"error", nullptr},
            {"incomplete_details", nullptr},
            {"model", st.model_id},
            {"output", std::move(output)},
            {"usage", nullptr}};
  for (const auto& [k, v] : a.t.echo.items()) r[k] = v;
  if (status == "incomplete") r["incomplete_details"] = {{"reason", "max_output_tokens"}};
  return r;
}

json promptcache_json(const ResponsesGeneration& a, const CacheReport& c) {
  json p = cache_json(c);
  if (!a.t.ignored_tools.empty()) p["ignored_tools"] = a.t.ignored_tools;
  return p;
}

std::string final_status(const JobOutcome& o) {
  return o.finish_reason == FinishReason::kLength ? "incomplete" : "completed";
}

// The finished response kept for previous_response_id and GET (store: true): the
// conversation through its output, and the generated ids the memory holds for it.
void store_response(Server::State& st, const ResponsesGeneration& a, const json& response, const std::string& content,
                    const std::vector<ToolCall>& calls, const std::string& reasoning) {
  if (!a.t.store) return;
  StoredResponse s;
  s.response = response;
  s.messages = a.conversation;
  json reply = {{"role", "assistant"}, {"content", content}};
  if (!reasoning.empty()) reply["reasoning_content"] = reasoning;
  if (!calls.empty()) {
    json tc = json::array();
    std::vector<std::string> ids;
    for (const ToolCall& c : calls) {
      tc.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
      ids.push_back(c.id);
    }
    reply["tool_calls"] = std::move(tc);
    if (content.empty()) reply["content"] = nullptr;
    s.reply_key = {{"calls", ids}};
    s.reply = st.memory.find_calls(a.g.scope, ids);
  } else {
    const std::string key = a.g.prefill + a.g.job->outcome().text;
    s.reply_key = {{"text", key}};
    s.reply = st.memory.find(a.g.scope, key);
  }
  if (!s.reply) s.reply_key = nullptr;
  s.messages.push_back(std::move(reply));
  s.input = a.t.input_items;
  st.responses.put(a.tenant, a.id, s);
}

int64_t reasoning_tokens(const Server::State& st, const std::string& reasoning) {
  return reasoning.empty() ? 0 : int64_t(st.model->tokenizer().encode_continuation(reasoning, false).size());
}

void throw_outcome_error(const JobOutcome& o) {
  if (o.error_code == "context_length_exceeded")
    throw ApiError(400, "invalid_request_error", o.error, "max_output_tokens", o.error_code);
  if (o.finish_reason == FinishReason::kCancelled)
    throw ApiError(503, "server_error", "the request was cancelled (server shutting down)", "", "cancelled");
  throw ApiError(500, "server_error", o.error.empty() ? "generation failed" : o.error, "", "generation_failed");
}

void respond_whole(Server::State& st, ResponsesGeneration& a, const HttpRequest& req, HttpResponse& res) {
  Delta all;
  if (!wait_whole(st, a.g, req, &all)) {
    res.status = 499;  // the client left; nobody reads it
    return;
  }
  const JobOutcome& o = a.g.job->outcome();
  if (o.finish_reason == FinishReason::kError || o.finish_reason == FinishReason::kCancelled) throw_outcome_error(o);
  std::string text = all.text, reasoning;
  if (!a.g.think.empty()) {
    ReasoningSplit split = split_reasoning(a.g.think, a.g.think_open, all.text);
    text = std::move(split.content);
    reasoning = std::move(split.reasoning);
  }
  ToolParse parsed;
  if (a.g.tools != ToolFormat::kNone)
    parsed = parse_tool_calls(a.g.tools, a.g.prefill + text, {}, a.g.tool_schemas);
  else
    parsed.content = text;
  const CacheReport c = finish_generation(st, a.g, parsed.calls);
  json output = json::array();
  if (!reasoning.empty()) output.push_back(reasoning_item(item_id(a, "rs_", 0), "completed", reasoning));
  if (!parsed.content.empty() || parsed.calls.empty())
    output.push_back(message_item(item_id(a, "msg_", output.size()), "completed", json::array({text_part(parsed.content)})));
  for (const ToolCall& call : parsed.calls)
    output.push_back(call_item(item_id(a, "fc_", output.size()), "completed", call, call.arguments));
  json r = response_object(st, a, final_status(o), std::move(output));
  r["usage"] = usage_of(c, int64_t(o.result.tokens.size()), reasoning_tokens(st, reasoning));
  r["promptcache"] = promptcache_json(a, c);
  store_response(st, a, r, parsed.content, parsed.calls, reasoning);
  send_json(res, 200, r);
}

// ---- streaming ----

struct StreamState {
  std::optional<ReasoningParser> thinking;  // when the template thinks: the reply split as it comes
  std::string reasoning;   // the open reasoning item's text so far
  std::string rs_id;       // "" = no reasoning item open
  int rs_index = -1;
  std::optional<ToolCallParser> tools;  // when the request has tools: text held until decided
  bool fed_prefill = false;
  std::vector<ToolCall> calls;
  int64_t sequence = 0;
  bool started = false;
  std::string text;      // the open message's text so far
  std::string msg_id;    // "" = no message open
  int msg_index = -1;
  json output = json::array();  // finished items, in order
  Clock::time_point last_write = Clock::now();
};

// Responses' SSE framing: a named event whose JSON has the same "type" and the
// stream's sequence_number.
bool write_event(DataSink& sink, StreamState& s, const char* type, json data) {
  data["type"] = type;
  data["sequence_number"] = s.sequence++;
  const std::string ev = std::string("event: ") + type + "\ndata: " + dump(data) + "\n\n";
  s.last_write = Clock::now();
  return sink.write(ev.data(), ev.size());
}

bool open_message(DataSink& sink, StreamState& s, const ResponsesGeneration& a) {
  s.msg_index = int(s.output.size());
  s.msg_id = item_id(a, "msg_", size_t(s.msg_index));
  s.text.clear();
  return write_event(sink, s, "response.output_item.added",
                     {{"output_index", s.msg_index}, {"item", message_item(s.msg_id, "in_progress", json::array())}}) &&
         write_event(sink, s, "response.content_part.added",
                     {{"item_id", s.msg_id}, {"output_index", s.msg_index}, {"content_index", 0}, {"part", text_part("")}});
}

bool close_message(DataSink& sink, StreamState& s) {
  const json item = message_item(s.msg_id, "completed", json::array({text_part(s.text)}));
  const bool ok =
      write_event(sink, s, "response.output_text.done",
                  {{"item_id", s.msg_id}, {"output_index", s.msg_index}, {"content_index", 0}, {"text", s.text},
                   {"logprobs", json::array()}}) &&
      write_event(sink, s, "response.content_part.done",
                  {{"item_id", s.msg_id}, {"output_index", s.msg_index}, {"content_index", 0}, {"part", text_part(s.text)}}) &&
      write_event(sink, s, "response.output_item.done", {{"output_index", s.msg_index}, {"item", item}});
  s.output.push_back(item);
  s.msg_id.clear();
  return ok;
}

bool open_reasoning(DataSink& sink, StreamState& s, const ResponsesGeneration& a) {
  s.rs_index = int(s.output.size());
  s.rs_id = item_id(a, "rs_", size_t(s.rs_index));
  return write_event(sink, s, "response.output_item.added",
                     {{"output_index", s.rs_index}, {"item", reasoning_item(s.rs_id, "in_progress", "")}});
}

bool close_reasoning(DataSink& sink, StreamState& s) {
  const json item = reasoning_item(s.rs_id, "completed", s.reasoning);
  const bool ok = write_event(sink, s, "response.reasoning_text.done",
                              {{"item_id", s.rs_id}, {"output_index", s.rs_index}, {"content_index", 0},
                               {"text", s.reasoning}}) &&
                  write_event(sink, s, "response.output_item.done", {{"output_index", s.rs_index}, {"item", item}});
  s.output.push_back(item);
  s.rs_id.clear();
  return ok;
}

// A completed call: its item, the arguments as one delta.
bool write_call(DataSink& sink, StreamState& s, const ResponsesGeneration& a, const ToolCall& call) {
  const int index = int(s.output.size());
  const std::string id = item_id(a, "fc_", size_t(index));
  const json done = call_item(id, "completed", call, call.arguments);
  s.output.push_back(done);
  return write_event(sink, s, "response.output_item.added",
                     {{"output_index", index}, {"item", call_item(id, "in_progress", call, "")}}) &&
         write_event(sink, s, "response.function_call_arguments.delta",
                     {{"item_id", id}, {"output_index", index}, {"delta", call.arguments}}) &&
         write_event(sink, s, "response.function_call_arguments.done",
                     {{"item_id", id}, {"output_index", index}, {"name", call.name}, {"arguments", call.arguments}}) &&
         write_event(sink, s, "response.output_item.done", {{"output_index", index}, {"item", done}});
}

void respond_stream(Server::State& st, std::shared_ptr<ResponsesGeneration> a, HttpResponse& res) {
  auto s = std::make_shared<StreamState>();
  if (a->g.tools != ToolFormat::kNone) s->tools.emplace(a->g.tools, std::function<std::string()>{}, a->g.tool_schemas);
  if (!a->g.think.empty()) s->thinking.emplace(a->g.think, a->g.think_open);
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      [&st, a, s](size_t, DataSink& sink) {
        auto gone = [&] {
          st.scheduler->cancel(*a->g.job);
          st.metrics.count_disconnect();
          return false;
        };
        if (!s->started) {
          const json r = response_object(st, *a, "in_progress", json::array());
          if (!write_event(sink, *s, "response.created", {{"response", r}}) ||
              !write_event(sink, *s, "response.in_progress", {{"response", r}}))
            return gone();
          s->started = true;
        }
        bool done = false;
        const Delta d = a->g.job->wait_delta(100ms, &done);
        std::string reply = d.text;
        if (s->thinking) {
          // The thinking goes out as a reasoning item before the message.
          ReasoningSplit split = s->thinking->next(d.text, done);
          if (!split.reasoning.empty()) {
            if (s->rs_id.empty() && !open_reasoning(sink, *s, *a)) return gone();
            s->reasoning += split.reasoning;
            if (!write_event(sink, *s, "response.reasoning_text.delta",
                             {{"item_id", s->rs_id}, {"output_index", s->rs_index}, {"content_index", 0},
                              {"delta", split.reasoning}}))
              return gone();
          }
          reply = std::move(split.content);
          if (!s->rs_id.empty() && (!reply.empty() || done) && !close_reasoning(sink, *s)) return gone();
        }
        ToolParse piece;
        if (s->tools) {
          std::string text = reply;
          if (!s->fed_prefill) text = a->g.prefill + text;
          s->fed_prefill = true;
          piece = s->tools->push(text);
          if (done && a->g.job->outcome().finish_reason != FinishReason::kError) {
            ToolParse rest = s->tools->finish();
            piece.content += rest.content;
            for (ToolCall& c : rest.calls) piece.calls.push_back(std::move(c));
          }
        } else {
          piece.content = reply;
        }
        if (!piece.content.empty()) {
          if (s->msg_id.empty() && !open_message(sink, *s, *a)) return gone();
          s->text += piece.content;
          if (!write_event(sink, *s, "response.output_text.delta",
                           {{"item_id", s->msg_id}, {"output_index", s->msg_index}, {"content_index", 0},
                            {"delta", piece.content}, {"logprobs", json::array()}}))
            return gone();
        }
        for (ToolCall& call : piece.calls) {
          if (!s->msg_id.empty() && !close_message(sink, *s)) return gone();
          if (!write_call(sink, *s, *a, call)) return gone();
          s->calls.push_back(std::move(call));
        }
        if (piece.content.empty() && piece.calls.empty() && !done && Clock::now() - s->last_write > 5s) {
          if (!sink.write(": keep-alive\n\n", 14)) return gone();  // keeps proxies patient
          s->last_write = Clock::now();
        }
        if (!done) return true;
        const JobOutcome& o = a->g.job->outcome();
        if (o.finish_reason == FinishReason::kError || o.finish_reason == FinishReason::kCancelled) {
          json r = response_object(st, *a, "failed", s->output);
          r["error"] = {{"code", "server_error"},
                        {"message", o.finish_reason == FinishReason::kError ? o.error : "the request was cancelled"}};
          write_event(sink, *s, "response.failed", {{"response", r}});
          sink.done();
          return true;
        }
        // Every response has a message unless it made calls: an empty one when the
        // model wrote nothing.
        const bool has_message = std::any_of(s->output.begin(), s->output.end(),
                                             [](const json& item) { return item["type"] == "message"; });
        if (s->msg_id.empty() && !has_message && s->calls.empty() && !open_message(sink, *s, *a)) return false;
        if (!s->msg_id.empty() && !close_message(sink, *s)) return false;
        const CacheReport c = finish_generation(st, a->g, s->calls);
        std::string content;
        for (const json& item : s->output)
          if (item["type"] == "message") content += item["content"][0]["text"].get<std::string>();
        const std::string status = final_status(o);
        json r = response_object(st, *a, status, s->output);
        r["usage"] = usage_of(c, int64_t(o.result.tokens.size()), reasoning_tokens(st, s->reasoning));
        r["promptcache"] = promptcache_json(*a, c);
        store_response(st, *a, r, content, s->calls, s->reasoning);
        write_event(sink, *s, status == "completed" ? "response.completed" : "response.incomplete", {{"response", r}});
        sink.done();
        return true;
      },
      [&st, a](bool) { cancel_if_running(st, a->g); });
}

void create(Server::State& st, const HttpRequest& req, HttpResponse& res) {
  auto a = std::make_shared<ResponsesGeneration>(prepare(st, req));
  if (a->g.params.stream) return respond_stream(st, std::move(a), res);
  answer_whole(st, a->g, [&] { respond_whole(st, *a, req, res); });
}

std::string path_id(const HttpRequest& req) {
  const std::string& id = req.matches[1];
  if (!valid_response_id(id)) throw response_not_found(id, "response_id");
  return id;
}

void get_response(Server::State& st, const HttpRequest& req, HttpResponse& res) {
  const std::string tenant = st.tenant_of(req);
  const std::string id = path_id(req);
  const std::optional<StoredResponse> s = st.responses.get(tenant, id);
  if (!s) throw response_not_found(id, "response_id");
  send_json(res, 200, s->response);
}

void get_input_items(Server::State& st, const HttpRequest& req, HttpResponse& res) {
  const std::string tenant = st.tenant_of(req);
  const std::string id = path_id(req);
  const std::optional<StoredResponse> s = st.responses.get(tenant, id);
  if (!s) throw response_not_found(id, "response_id");
  send_json(res, 200, {{"object", "list"}, {"data", s->input}, {"has_more", false}});
}

void delete_response(Server::State& st, const HttpRequest& req, HttpResponse& res) {
  const std::string tenant = st.tenant_of(req);
  const std::string id = path_id(req);
  if (!st.responses.erase(tenant, id)) throw response_not_found(id, "response_id");
  send_json(res, 200, {{"id", id}, {"object", "response"}, {"deleted", true}});
}

}  // namespace

void add_responses_routes(Server::State& st) {
  // Also without /v1, as the other OpenAI routes are served.
  for (const std::string prefix : {"/v1", ""}) {
    add_route(st, "POST", prefix + "/responses", guarded(st, create));
    add_route(st, "GET", prefix + "/responses/([^/]+)", guarded(st, get_response));
    add_route(st, "GET", prefix + "/responses/([^/]+)/input_items", guarded(st, get_input_items));
    add_route(st, "DELETE", prefix + "/responses/([^/]+)", guarded(st, delete_response));
  }
}

}  // namespace pc::server
