// POST /v1/completions and POST /v1/chat/completions, whole or streamed (SSE).
#include <chrono>

#include "gguf/error.h"
#include "server/api_error.h"
#include "server/connection.h"
#include "server/generation.h"
#include "server/openai.h"
#include "server/state.h"
#include "tokenizer/tokenizer.h"

namespace pc::server {

namespace {

using namespace std::chrono_literals;

std::vector<int32_t> completion_prompt(const Server::State& st, const json& body) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null())
    throw bad_field("prompt", "'prompt' is required", "missing_required_parameter");
  const json* p = &*it;
  // A one-element array holding a string or a token array is the same prompt.
  if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array())) p = &(*p)[0];
  if (p->is_string()) return encode_piece(st.model->tokenizer(), p->get<std::string>(), true);
  if (p->is_array() && !p->empty()) {
    std::vector<int32_t> ids;
    const int64_t V = st.model->config().n_vocab;
    for (const json& t : *p) {
      if (t.is_array() || t.is_string())
        throw bad_field("prompt", "only one prompt per request is supported");
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= V)
        throw bad_field("prompt", "token ids must be integers in [0, " + std::to_string(V) + ")");
      ids.push_back(t.get<int32_t>());
    }
    return ids;
  }
  throw bad_field("prompt", "'prompt' must be a string, an array of token ids, or a one-element array");
}


// Prompt length and max_tokens against the context and the KV capacity.
void fit_context(const Server::State& st, Generation& g, bool chat) {
  const int64_t n = int64_t(g.params.gen.prompt.size());
  const char* what = chat ? "messages" : "prompt";
  if (n == 0) throw bad_field(what, "the prompt is empty");
  const int64_t limit = std::min(st.n_ctx, st.scheduler->admission_tokens());
  if (n >= limit)
    throw ApiError(400, "invalid_request_error",
                   "This model's maximum context length is " + std::to_string(limit) +
                       " tokens; the prompt has " + std::to_string(n) + " tokens",
                   what, "context_length_exceeded");
  int32_t& max = g.params.gen.max_tokens;
  if (!g.params.max_tokens_given) {
    max = int32_t(std::min<int64_t>(max, limit - n));
  } else if (n + max > limit) {
    throw ApiError(400, "invalid_request_error",
                   "This model's maximum context length is " + std::to_string(limit) +
                       " tokens; you requested " + std::to_string(n + max) + " tokens (" +
                       std::to_string(n) + " in the prompt, " + std::to_string(max) +
                       " for the completion)",
                   g.params.max_tokens_given ? "max_tokens" : what, "context_length_exceeded");
  }
}

Generation prepare(Server::State& st, const httplib::Request& req, bool chat) {
  Generation g;
  const json body = parse_body(req.body);
  const std::string tenant = st.tenant_of(req);  // 401 before anything else
  (void)tenant;
  g.params = parse_common(body, chat);
  st.check_model(g.params.model);
  g.ns = st.namespace_of(req, g.params.cache_salt);
  g.params.gen.reuse = st.reuse_default;
  if (auto m = body.find("cache_reuse"); m != body.end() && !m->is_null()) {
    if (!m->is_string() || (*m != "exact" && *m != "approximate"))
      throw bad_field("cache_reuse", "'cache_reuse' must be \"exact\" or \"approximate\"");
    g.params.gen.reuse.mode = *m == "approximate" ? CacheReuse::kApproximate : CacheReuse::kExact;
  }
  if (auto b = body.find("cache_reuse_budget"); b != body.end() && !b->is_null()) {
    if (!b->is_number() || !(b->get<double>() >= 0 && b->get<double>() <= 1))
      throw bad_field("cache_reuse_budget", "'cache_reuse_budget' must be a number in [0, 1]");
    g.params.gen.reuse.budget = b->get<double>();
  }
  if (chat) {
    check_messages(body);
    g.chat = build_chat_prompt(chat_template_of(st), st.model->tokenizer(), st.memory, g.ns,
                               flatten_content(body["messages"]), chat_extra(body));
    split_content_parts(g.chat->parts, body["messages"], g.chat->text, g.chat->token_offsets);
    g.params.gen.prompt = g.chat->ids;
    g.params.gen.blocks = blocks_of(g.chat->parts);
    g.miss = st.structure.compare(g.ns, g.chat->ids, g.chat->parts);
  } else {
    g.params.gen.prompt = completion_prompt(st, body);
  }
  fit_context(st, g, chat);
  g.params.gen.tenant = g.ns;
  g.prompt_tokens = int64_t(g.params.gen.prompt.size());
  g.meta = new_meta(st.model_id, chat);
  g.job = std::make_shared<Job>(g.params.gen, g.params.stops, st.model->tokenizer());
  submit(st, g);
  return g;
}

// After the job ended: cache report, metrics, and the reply remembered for the next turn.
CacheReport finish(Server::State& st, const Generation& g) {
  const JobOutcome& o = g.job->outcome();
  CacheReport c;
  c.prompt_tokens = g.prompt_tokens;
  c.cached_tokens = o.result.n_cached;
  c.reusable_tokens = o.result.n_reusable;
  c.approximate_tokens = o.result.n_approximate;
  c.recomputed_tokens = o.result.n_recomputed;
  c.reuse = g.params.gen.reuse;
  // A plan also computes the modules it encodes, so its count comes from the engine.
  c.computed_tokens = o.result.n_computed;
  if (g.pml) {
    c.module_hits = o.result.n_module_hits;
    c.module_misses = o.result.n_module_misses;
  }
  if (o.finish_reason == FinishReason::kError || o.finish_reason == FinishReason::kCancelled) return c;
  const int64_t generated = int64_t(o.result.tokens.size());
  st.metrics.count_tokens(c.prompt_tokens, c.cached_tokens, c.computed_tokens, generated);
  if (!g.chat) return c;
  const ChatPrompt& p = *g.chat;
  c.spliced_replies = p.spliced;
  c.diverged_at = p.diverged_at;
  c.reason = p.reason;
  if (!g.miss.reason.empty() && c.reason != "template_rerender") {
    // What changed since the request this one continues: the first divergence.
    c.reason = g.miss.reason;
    c.diverged_at = g.miss.diverged_at;
    c.miss_index = g.miss.index;
    c.miss_change = g.miss.change;
    c.miss_tokens = g.miss.tokens;
  } else if (c.reason == "unknown_reply") {
    // The reply's tokens were computed: the last assistant message's.
    for (const RequestPart& q : p.parts)
      if (q.kind == RequestPart::Kind::kMessage && q.role == "assistant" && q.tok_begin >= 0)
        c.miss_tokens = q.tok_end - q.tok_begin;
  } else if (c.reason.empty() && p.expected_hit > c.cached_tokens) {
    c.reason = "evicted";
    c.miss_tokens = p.expected_hit - c.cached_tokens;
  } else if (c.reason == "template_rerender") {
    c.miss_tokens = std::max<int64_t>(0, p.expected_hit - c.cached_tokens);
  }
  if (!c.reason.empty()) st.metrics.count_miss(c.reason, c.miss_tokens);
  st.structure.remember(g.ns, g.params.gen.prompt, p.parts);
  RememberedReply r;
  r.ids = o.reply_ids;
  r.tail = o.reply_tail;
  r.context = g.params.gen.prompt;
  // KV exists for the prompt and every generated token but the last sampled one.
  r.kv_tokens = std::min<int64_t>(c.prompt_tokens + int64_t(r.ids.size()),
                                  c.prompt_tokens + generated - 1);
  st.memory.remember(g.ns, o.text, std::move(r));
  return c;
}

void throw_outcome_error(const JobOutcome& o) {
  if (o.error_code == "context_length_exceeded")
    throw ApiError(400, "invalid_request_error", o.error, "max_tokens", o.error_code);
  throw ApiError(500, "server_error", o.error.empty() ? "generation failed" : o.error, "",
                 "generation_failed");
}

bool wants_logprobs(const Generation& g) { return g.params.gen.logprobs >= 0; }

json delta_logprobs(const Server::State& st, const Generation& g, const Delta& d) {
  if (!wants_logprobs(g)) return nullptr;
  return logprobs_json(st.model->tokenizer(), g.meta.chat, d.logprobs);
}

void respond_whole(Server::State& st, Generation& g, const httplib::Request& req,
                   httplib::Response& res) {
  // Nothing is written until the end, so a client that left is noticed by
  // watching its socket; it cancels the sequence as a closed stream does.
  const ConnectionWatch conn(req);
  Delta all;
  for (bool done = false; !done;) {
    Delta d = g.job->wait_delta(100ms, &done);
    all.text += d.text;
    for (TokenLogprobInfo& t : d.logprobs) all.logprobs.push_back(std::move(t));
    if (!done && conn.closed()) {
      st.scheduler->cancel(*g.job);
      st.metrics.count_disconnect();
      res.status = 499;  // nginx's "client closed request"; nobody reads it
      return;
    }
  }
  const JobOutcome& o = g.job->outcome();
  if (o.finish_reason == FinishReason::kError) throw_outcome_error(o);
  if (o.finish_reason == FinishReason::kCancelled)
    throw ApiError(503, "server_error", "the request was cancelled (server shutting down)", "", "cancelled");
  const CacheReport c = finish(st, g);
  send_json(res, 200, full_response(g.meta, all.text, to_string(o.finish_reason), c,
                                    int64_t(o.result.tokens.size()), delta_logprobs(st, g, all)));
}

bool write_event(httplib::DataSink& sink, const std::string& data) {
  const std::string ev = "data: " + data + "\n\n";
  return sink.write(ev.data(), ev.size());
}

void respond_stream(Server::State& st, std::shared_ptr<Generation> g, httplib::Response& res) {
  auto first = std::make_shared<bool>(true);
  auto last_write = std::make_shared<Clock::time_point>(Clock::now());
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      [&st, g, first, last_write](size_t, httplib::DataSink& sink) {
        bool done = false;
        const Delta d = g->job->wait_delta(100ms, &done);
        auto gone = [&] {
          st.scheduler->cancel(*g->job);
          st.metrics.count_disconnect();
          return false;
        };
        if (!d.text.empty() || (*first && g->meta.chat)) {
          const json ev = chunk(g->meta, d.text, "", *first, delta_logprobs(st, *g, d));
          if (!write_event(sink, dump(ev))) return gone();
          *first = false;
          *last_write = Clock::now();
        } else if (!done && Clock::now() - *last_write > 5s) {
          // An SSE comment: keeps proxies patient and notices a client that left.
          if (!sink.write(": keep-alive\n\n", 14)) return gone();
          *last_write = Clock::now();
        }
        if (!done) return true;
        const JobOutcome& o = g->job->outcome();
        if (o.finish_reason == FinishReason::kError || o.finish_reason == FinishReason::kCancelled) {
          const std::string msg = o.finish_reason == FinishReason::kError ? o.error : "the request was cancelled";
          write_event(sink, dump(error_json(msg, "server_error", "", "generation_failed")));
        } else {
          const CacheReport c = finish(st, *g);
          const int64_t n = int64_t(o.result.tokens.size());
          if (!write_event(sink, dump(chunk(g->meta, "", to_string(o.finish_reason), *first)))) return false;
          if (g->params.include_usage && !write_event(sink, dump(usage_chunk(g->meta, c, n))))
            return false;
        }
        write_event(sink, "[DONE]");
        sink.done();
        return true;
      },
      [&st, g](bool) {
        // The connection ended; a generation still running has no reader any more.
        bool done = false;
        g->job->wait_delta(0ms, &done);
        if (!done) st.scheduler->cancel(*g->job);
      });
}

void handle(Server::State& st, const httplib::Request& req, httplib::Response& res, bool chat) {
  guard(res, [&] { respond(st, std::make_shared<Generation>(prepare(st, req, chat)), req, res); });
}

}  // namespace

const ChatTemplate& chat_template_of(const Server::State& st) {
  if (!st.chat_template)
    throw ApiError(400, "invalid_request_error",
                   "the model has no chat template; start the server with --chat-template-file or "
                   "--chat-template chatml",
                   "messages", "no_chat_template");
  return *st.chat_template;
}

json chat_extra(const json& body) {
  json extra = json::object();
  if (auto it = body.find("chat_template_kwargs"); it != body.end() && !it->is_null()) {
    if (!it->is_object())
      throw bad_field("chat_template_kwargs", "'chat_template_kwargs' must be an object", "invalid_type");
    extra = *it;
  }
  // tool_choice "none": the model is not told about the tools (parse_common allows
  // only "none" and "auto").
  const auto choice = body.find("tool_choice");
  const bool no_tools = choice != body.end() && *choice == "none";
  for (const char* k : {"tools", "documents"})
    if (auto it = body.find(k); it != body.end() && !it->is_null()) extra[k] = *it;
  if (no_tools) extra.erase("tools");
  return extra;
}

void check_messages(const json& body) {
  auto it = body.find("messages");
  if (it == body.end() || it->is_null())
    throw bad_field("messages", "'messages' is required", "missing_required_parameter");
  if (!it->is_array() || it->empty())
    throw bad_field("messages", "'messages' must be a non-empty array");
  for (size_t i = 0; i < it->size(); ++i) {
    const json& m = (*it)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      throw bad_field(where + ".role", where + " must be an object with a string 'role'");
    const std::string role = m["role"];
    if (role != "system" && role != "user" && role != "assistant" && role != "tool" &&
        role != "developer" && role != "function")
      throw bad_field(where + ".role", "unknown role '" + role + "'");
    if (m.contains("content") && !m["content"].is_null() && !m["content"].is_string() &&
        !m["content"].is_array())
      throw bad_field(where + ".content", where + ".content must be a string or an array of parts");
  }
}

// Content parts ([{"type":"text","text":...}]) → one string, as templates expect.
json flatten_content(json messages) {
  for (json& m : messages) {
    if (!m.contains("content") || !m["content"].is_array()) continue;
    std::string text;
    for (const json& part : m["content"]) {
      if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
          !part["text"].is_string())
        throw bad_field("messages", "only text content parts are supported");
      text += part["text"].get<std::string>();
    }
    m["content"] = text;
  }
  return messages;
}

void submit(Server::State& st, Generation& g) {
  // Counted before the draining check: begin_drain() sets the flag and then waits for
  // the count, so a request either sees the flag or is waited for.
  g.in_flight = st.track_generation();
  if (st.draining.load())
    throw ApiError(503, "server_error",
                   "the server is shutting down (draining); send new requests to another server", "",
                   "server_draining");
  if (!st.scheduler->submit(g.job))
    throw ApiError(503, "server_error", "the server is busy (request queue full); retry later", "",
                   "server_overloaded");
}

void respond(Server::State& st, std::shared_ptr<Generation> g, const httplib::Request& req,
             httplib::Response& res) {
  if (g->params.stream) return respond_stream(st, std::move(g), res);
  try {
    respond_whole(st, *g, req, res);
  } catch (...) {
    st.scheduler->cancel(*g->job);
    throw;
  }
}

void add_generation_routes(Server::State& st) {
  add_route(st, "POST", "/v1/completions",
            [&st](const httplib::Request& req, httplib::Response& res) { handle(st, req, res, false); });
  add_route(st, "POST", "/v1/chat/completions",
            [&st](const httplib::Request& req, httplib::Response& res) { handle(st, req, res, true); });
}

}  // namespace pc::server
