// POST /v1/completions and POST /v1/chat/completions, whole or streamed (SSE).
#include <chrono>

#include "common/error.h"
#include "server/api/api_error.h"
#include "server/generation.h"
#include "server/api/lifetime.h"
#include "server/api/openai.h"
#include "server/chat/tool_grammar.h"
#include "server/chat/content_chunks.h"
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
  if (p->is_string()) {
    const std::string& text = p->get_ref<const std::string&>();
    if (int64_t(text.size()) > st.max_prompt_bytes)  // too long for the context, whatever its tokens
      throw ApiError(400, "invalid_request_error",
                     "This model's maximum context length is " + std::to_string(st.n_ctx) + " tokens; the prompt's " +
                         std::to_string(text.size()) + " bytes are more tokens than that",
                     "prompt", "context_length_exceeded");
    return encode_piece(st.model->tokenizer(), text, true);
  }
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


// Prompt length and max_tokens against the context and the KV capacity. A prompt that
// does not fit alone is a 400; a max_tokens past the context's end is cut to the room
// left (the reply stops there with finish_reason "length", as llama-server's does), and
// the cut value is reported (promptcache.max_tokens_capped). Harnesses ask for more than
// a small model's context: Claude Code sends max_tokens 32000 on every request.
void fit_context(const Server::State& st, Generation& g, bool chat) {
  const int64_t n = int64_t(g.params.gen.prompt.size());
  const char* what = chat ? "messages" : "prompt";
  if (n == 0) throw bad_field(what, "the prompt is empty");
  const int64_t limit = std::min(st.n_ctx, st.scheduler->admission_tokens(g.scope.tenant));
  if (n >= limit)
    throw ApiError(400, "invalid_request_error",
                   "This model's maximum context length is " + std::to_string(limit) +
                       " tokens; the prompt has " + std::to_string(n) + " tokens",
                   what, "context_length_exceeded");
  int32_t& max = g.params.gen.max_tokens;
  if (n + max <= limit) return;
  max = int32_t(limit - n);
  if (g.params.max_tokens_given) g.max_tokens_capped = max;
}

Generation prepare(Server::State& st, const HttpRequest& req, bool chat) {
  Generation g;
  const json body = parse_body(req.body);
  const std::string tenant = st.tenant_of(req);  // 401 before anything else
  (void)tenant;
  g.params = parse_common(body, chat, st.opt.defaults, req.body);
  st.check_model(g.params.model);
  g.scope = st.scope_of_request(req, g.params.cache_salt);
  g.params.gen.reuse = parse_reuse(body, st.reuse_default);
  if (chat) {
    check_messages(body);
    check_tools(body);
    const ToolChoice choice = parse_tool_choice(body, st.tool_format);
    const ChatRender mode = parse_chat_render(body, body["messages"]);
    if (mode.continue_final && choice.forces())
      throw bad_field("continue_final_message",
                      "'continue_final_message' cannot be combined with a tool_choice that forces a call "
                      "(the call would start a new reply)");
    // The body again with its key order, for the template (conversation.h keep_key_order).
    const nlohmann::ordered_json order = nlohmann::ordered_json::parse(req.body, nullptr, false);
    prepare_chat(st, g, body["messages"], chat_extra(body), mode, &order);
    parse_replies_for_tools(st, g, body.value("tools", json::array()), choice.mode != ToolChoice::Mode::kNone);
    force_tool_call(st, g, choice, req.body);
    split_thinking(st, g, request_reasoning_format(st, body));
  } else {
    g.params.gen.prompt = completion_prompt(st, body);
  }
  apply_test_hooks(st, g, body);
  // prompt_cache_retention: a lifetime for the whole prompt.
  if (const std::optional<double> life = openai_retention_seconds(body))
    g.params.gen.retain.push_back({int32_t(g.params.gen.prompt.size()), *life * st.opt.test_time_scale});
  start_generation(st, g);
  return g;
}

}  // namespace

ReasoningFormat request_reasoning_format(const Server::State& st, const json& body) {
  const auto it = body.find("reasoning_format");
  if (it == body.end() || it->is_null()) return st.opt.reasoning_format;
  const auto f = it->is_string() ? parse_reasoning_format(it->get<std::string>()) : std::nullopt;
  if (!f) throw bad_field("reasoning_format", "'reasoning_format' must be \"none\", \"deepseek\" or \"auto\", got " + it->dump());
  return *f;
}

void parse_replies_for_tools(const Server::State& st, Generation& g, const json& tools, bool parse) {
  const bool offered = tools.is_array() && !tools.empty() && parse;
  if (offered || st.tool_format == ToolFormat::kHarmony) g.tools = st.tool_format;
  if (offered) g.tool_schemas = std::make_shared<const ToolSchemas>(tool_schemas(tools));  // harmony: calls on
}

void split_thinking(const Server::State& st, Generation& g, ReasoningFormat format) {
  g.think = {};
  g.think_open = false;
  if (format == ReasoningFormat::kNone || st.think_tags.empty() || !g.prefill.empty() || !g.chat) return;
  g.think = st.think_tags;
  g.think_open = prompt_opens_thinking(g.think, g.chat->text);
}

void force_tool_call(Server::State& st, Generation& g, const ToolChoice& choice, std::string_view raw_body) {
  if (!choice.forces()) return;
  if (g.params.gen.grammar)
    throw bad_field("tool_choice",
                    "a tool_choice that forces a call cannot be combined with structured output (response_format, "
                    "json_schema, grammar, text.format or output_config.format): the reply would have to be both "
                    "the call and the constrained output");
  g.prefill = forced_call_prefix(st.tool_format, choice.name);
  g.prefill_ids = st.model->tokenizer().encode_continuation(g.prefill, /*parse_special=*/true);
  g.params.gen.prompt.insert(g.params.gen.prompt.end(), g.prefill_ids.begin(), g.prefill_ids.end());
  // A strict tool's arguments follow its schema (the rest of the call after the opener).
  if (!raw_body.empty()) g.params.gen.grammar = forced_call_grammar(st.tool_format, raw_body, choice.name);
}

void apply_test_hooks(Server::State& st, Generation& g, const json& body) {
  const Tokenizer& tok = st.model->tokenizer();
  if (auto f = body.find("test_forced_reply"); f != body.end() && !f->is_null()) {
    if (!st.opt.test_hooks)
      throw ApiError(400, "invalid_request_error",
                     "'test_forced_reply' is a test hook; the server accepts it only with --test-hooks",
                     "test_forced_reply", "test_hooks_disabled");
    if (!f->is_string() || f->get_ref<const std::string&>().empty())
      throw bad_field("test_forced_reply", "'test_forced_reply' must be a non-empty string", "invalid_type");
    // The engine emits these tokens as the generated ones (after any prefill), then
    // the end of generation.
    g.params.gen.forced = tok.encode_continuation(f->get<std::string>(), /*parse_special=*/true);
    if (tok.eos() >= 0) g.params.gen.forced.push_back(tok.eos());
  }
}

void prepare_chat(Server::State& st, Generation& g, const json& sent, const json& extra, ChatRender mode,
                  const nlohmann::ordered_json* key_order) {
  check_prompt_bytes(sent, st.max_prompt_bytes, st.n_ctx, "messages");
  // Clients' per-request nonces normalised: the same harness renders the same prompt.
  json messages = sent;
  g.volatile_rules_applied = st.volatile_rules.apply(messages);
  static const nlohmann::ordered_json kNoOrder;
  const nlohmann::ordered_json& order = key_order ? *key_order : kNoOrder;
  const nlohmann::ordered_json no_key = nullptr;
  auto part_of = [&](const char* key) -> const nlohmann::ordered_json& {
    return order.is_object() && order.contains(key) ? order[key] : no_key;
  };
  g.chat = build_chat_prompt(chat_template_of(st), st.model->tokenizer(), st.memory, g.scope,
                             parse_tool_arguments(keep_key_order(template_messages(messages), part_of("messages"))),
                             keep_key_order(extra, order), st.tool_format, mode);
  split_content_parts(g.chat->parts, messages, g.chat->text, g.chat->token_offsets);
  g.params.gen.prompt = g.chat->ids;
  // Long parts as content-defined chunks: text that moved inside a part is found too.
  // With KV tiers every block is also written there as an entry of its own (engine/
  // approximate/tier_blocks.cc); chunks would multiply those writes and crowd the prefix
  // entries out of what the tier writer may hold back (KvTiers::submit_write), so long
  // parts stay whole blocks then.
  g.params.gen.blocks = blocks_of(g.chat->parts);
  if (!st.opt.tiers.enabled()) {
    std::vector<uint8_t> breaks = paragraph_breaks(g.chat->text, g.chat->token_offsets, g.chat->ids.size());
    mark_content_starts(breaks, g.chat->parts, messages, g.chat->text, g.chat->token_offsets);
    g.params.gen.blocks = chunk_blocks(g.params.gen.blocks, g.chat->ids, breaks);
  }
  g.miss = st.structure.compare(g.scope, g.chat->ids, g.chat->parts);
}

void start_generation(Server::State& st, Generation& g) {
  const bool chat = g.chat.has_value();
  fit_context(st, g, chat);
  g.params.gen.scope = g.scope;
  g.prompt_tokens = int64_t(g.params.gen.prompt.size());
  g.meta = new_meta(st.model_id, chat);
  g.job = std::make_shared<Job>(g.params.gen, g.params.stops, st.model->tokenizer());
  submit(st, g);
}

namespace {

// The finished request in the request log (history, per-tenant totals) and its log line.
void record_request(Server::State& st, const Generation& g, const CacheReport& c, int64_t generated,
                    const std::vector<ToolCall>& calls) {
  const JobOutcome& o = g.job->outcome();
  const auto now = Clock::now();
  RequestRecord r;
  r.time = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  // The request's cache scope: its tenant (without keys one tenant, "") and salt.
  r.tenant = g.scope.tenant;
  r.scope = g.scope;
  r.route = g.trace ? g.trace->path() : g.pml ? "/v1/pml/completions" : g.chat ? "chat" : "completion";
  r.finish_reason = !calls.empty() && o.finish_reason == FinishReason::kStop ? "tool_calls" : to_string(o.finish_reason);
  r.prompt_tokens = c.prompt_tokens;
  r.cached_tokens = c.cached_tokens;
  r.approximate_tokens = c.approximate_tokens;
  r.recomputed_tokens = c.recomputed_tokens;
  r.computed_tokens = c.computed_tokens;
  r.generated_tokens = generated;
  if (g.job->first_token != Clock::time_point{})
    r.ttft_seconds = std::chrono::duration<double>(g.job->first_token - g.job->created).count();
  r.total_seconds = std::chrono::duration<double>(now - g.job->created).count();
  r.miss_reason = c.reason;
  r.miss_tokens = c.miss_tokens;
  if (g.trace) g.trace->set_generation(r);
  st.requests.add(std::move(r));
}

}  // namespace

// After the job ended: cache report, metrics, and the reply remembered for the next turn
// (by its tool call ids when it made `calls`, else by its text).
CacheReport finish_generation(Server::State& st, const Generation& g, const std::vector<ToolCall>& calls) {
  const JobOutcome& o = g.job->outcome();
  CacheReport c;
  c.prompt_tokens = g.prompt_tokens;
  c.cached_tokens = o.result.n_cached;
  c.reusable_tokens = o.result.n_reusable;
  c.approximate_tokens = o.result.n_approximate;
  c.recomputed_tokens = o.result.n_recomputed;
  c.checked_tokens = o.result.n_checked;
  c.timings = o.result.timings;
  c.blocks = o.result.blocks;
  c.reuse = g.params.gen.reuse;
  c.retention = o.result.retention;
  c.max_tokens_capped = g.max_tokens_capped;
  c.volatile_rules_applied = g.volatile_rules_applied;
  // A plan also computes the modules it encodes, so its count comes from the engine.
  c.computed_tokens = o.result.n_computed;
  if (g.pml) {
    c.module_hits = o.result.n_module_hits;
    c.module_misses = o.result.n_module_misses;
  }
  if (o.finish_reason == FinishReason::kError || o.finish_reason == FinishReason::kCancelled) return c;
  const int64_t generated = int64_t(o.result.tokens.size());
  st.metrics.count_tokens(c.prompt_tokens, c.cached_tokens, c.computed_tokens, generated);
  if (!g.chat) {
    record_request(st, g, c, generated, calls);
    return c;
  }
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
  record_request(st, g, c, generated, calls);
  st.structure.remember(g.scope, g.params.gen.prompt, p.parts);
  // The reply is the prefill (tool_choice's call opener, part of the engine's prompt)
  // and the generated ids; it followed the chat prompt.
  RememberedReply r;
  r.ids = g.prefill_ids;
  r.ids.insert(r.ids.end(), o.reply_ids.begin(), o.reply_ids.end());
  r.tail = o.reply_tail;
  r.context = p.ids;
  // KV exists for the prompt and every generated token but the last sampled one.
  r.kv_tokens = std::min<int64_t>(c.prompt_tokens + int64_t(o.reply_ids.size()),
                                  c.prompt_tokens + generated - 1);
  if (calls.empty()) {
    st.memory.remember(g.scope, g.prefill + o.text, std::move(r));
  } else if (r.tail.empty()) {
    std::vector<std::string> ids;
    for (const ToolCall& call : calls) ids.push_back(call.id);
    st.memory.remember_calls(g.scope, ids, std::move(r));
  }
  return c;
}

bool wait_whole(Server::State& st, Generation& g, const HttpRequest& req, Delta* all) {
  // Nothing is written until the end, so a client that left is noticed by
  // watching its connection; it cancels the sequence as a closed stream does.
  for (bool done = false; !done;) {
    Delta d = g.job->wait_delta(100ms, &done);
    all->text += d.text;
    for (TokenLogprobInfo& t : d.logprobs) all->logprobs.push_back(std::move(t));
    if (!done && req.is_connection_closed()) {
      st.scheduler->cancel(*g.job);
      st.metrics.count_disconnect();
      return false;
    }
  }
  return true;
}

namespace {

void throw_outcome_error(const JobOutcome& o) {
  if (o.error_code == "context_length_exceeded")
    throw ApiError(400, "invalid_request_error", o.error, "max_tokens", o.error_code);
  throw ApiError(500, "server_error", o.error.empty() ? "generation failed" : o.error, "",
                 "generation_failed");
}

bool wants_logprobs(const Generation& g) { return g.params.gen.logprobs >= 0; }

// "tool_calls" when a reply that stopped made calls.
std::string finish_reason(const JobOutcome& o, const std::vector<ToolCall>& calls) {
  const std::string f = to_string(o.finish_reason);
  return !calls.empty() && f == "stop" ? "tool_calls" : f;
}

json delta_logprobs(const Server::State& st, const Generation& g, const Delta& d) {
  if (!wants_logprobs(g)) return nullptr;
  return logprobs_json(st.model->tokenizer(), g.meta.chat, d.logprobs);
}

void respond_whole(Server::State& st, Generation& g, const HttpRequest& req,
                   HttpResponse& res) {
  Delta all;
  if (!wait_whole(st, g, req, &all)) {
    res.status = 499;  // nginx's "client closed request"; nobody reads it
    return;
  }
  const JobOutcome& o = g.job->outcome();
  if (o.finish_reason == FinishReason::kError) throw_outcome_error(o);
  if (o.finish_reason == FinishReason::kCancelled)
    throw ApiError(503, "server_error", "the request was cancelled (server shutting down)", "", "cancelled");
  std::string content = all.text, reasoning;
  if (!g.think.empty()) {
    ReasoningSplit split = split_reasoning(g.think, g.think_open, all.text);
    content = std::move(split.content);
    reasoning = std::move(split.reasoning);
  }
  std::vector<ToolCall> calls;
  if (g.tools != ToolFormat::kNone) {
    ToolParse parsed = parse_tool_calls(g.tools, g.prefill + content, {}, g.tool_schemas);
    content = std::move(parsed.content);
    calls = std::move(parsed.calls);
    reasoning += parsed.reasoning;  // harmony: the analysis channel
  }
  const CacheReport c = finish_generation(st, g, calls);
  send_json(res, 200, full_response(g.meta, content, finish_reason(o, calls), c,
                                    int64_t(o.result.tokens.size()), delta_logprobs(st, g, all), calls, reasoning));
}

bool write_event(DataSink& sink, const std::string& data) {
  const std::string ev = "data: " + data + "\n\n";
  return sink.write(ev.data(), ev.size());
}

// A streamed reply's tool calls: the parser over prefill + text, the calls sent so far,
// and the logprobs of text it holds back (sent with the next content, or at the end).
struct StreamTools {
  StreamTools(ToolFormat f, std::shared_ptr<const ToolSchemas> schemas) : parser(f, {}, std::move(schemas)) {}
  ToolCallParser parser;
  bool fed_prefill = false;
  std::vector<ToolCall> calls;
  Delta held;  // logprobs only
};

void respond_stream(Server::State& st, std::shared_ptr<Generation> g, HttpResponse& res) {
  auto first = std::make_shared<bool>(true);
  auto last_write = std::make_shared<Clock::time_point>(Clock::now());
  auto tools = g->tools != ToolFormat::kNone ? std::make_shared<StreamTools>(g->tools, g->tool_schemas) : nullptr;
  auto thinking = !g->think.empty() ? std::make_shared<ReasoningParser>(g->think, g->think_open) : nullptr;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      [&st, g, first, last_write, tools, thinking](size_t, DataSink& sink) {
        bool done = false;
        Delta d = g->job->wait_delta(100ms, &done);
        auto gone = [&] {
          st.scheduler->cancel(*g->job);
          st.metrics.count_disconnect();
          return false;
        };
        if (thinking) {
          // The thinking goes out as delta.reasoning_content (with the logprobs of a
          // delta that holds no content); the answer goes on as content.
          ReasoningSplit split = thinking->next(d.text, done);
          d.text = std::move(split.content);
          if (!split.reasoning.empty()) {
            json lp = nullptr;
            if (d.text.empty()) {
              lp = delta_logprobs(st, *g, d);
              d.logprobs.clear();
            }
            if (!write_event(sink, dump(reasoning_chunk(g->meta, split.reasoning, *first, lp)))) return gone();
            *first = false;
            *last_write = Clock::now();
          }
        }
        std::vector<ToolCall> new_calls;
        if (tools) {
          // Text that may open a call is held until decided; calls go out whole.
          std::string text = std::move(d.text);
          if (!tools->fed_prefill) text = g->prefill + text;
          tools->fed_prefill = true;
          ToolParse parsed = tools->parser.push(text);
          if (done) {
            ToolParse rest = tools->parser.finish();
            parsed.content += rest.content;
            parsed.reasoning += rest.reasoning;
            for (ToolCall& c : rest.calls) parsed.calls.push_back(std::move(c));
          }
          if (!parsed.reasoning.empty()) {  // harmony: the analysis channel
            if (!write_event(sink, dump(reasoning_chunk(g->meta, parsed.reasoning, *first, nullptr)))) return gone();
            *first = false;
            *last_write = Clock::now();
          }
          for (TokenLogprobInfo& t : d.logprobs) tools->held.logprobs.push_back(std::move(t));
          d.logprobs.clear();
          if (!parsed.content.empty()) std::swap(d.logprobs, tools->held.logprobs);
          d.text = std::move(parsed.content);
          new_calls = std::move(parsed.calls);
        }
        if (!d.text.empty() || (*first && g->meta.chat)) {
          const json ev = chunk(g->meta, d.text, "", *first, delta_logprobs(st, *g, d));
          if (!write_event(sink, dump(ev))) return gone();
          *first = false;
          *last_write = Clock::now();
        } else if (!done && new_calls.empty() && Clock::now() - *last_write > 5s) {
          // An SSE comment: keeps proxies patient and notices a client that left.
          if (!sink.write(": keep-alive\n\n", 14)) return gone();
          *last_write = Clock::now();
        }
        for (ToolCall& call : new_calls) {
          const int index = int(tools->calls.size());
          if (!write_event(sink, dump(tool_call_chunk(g->meta, index, call, true, *first)))) return gone();
          *first = false;
          if (!write_event(sink, dump(tool_call_chunk(g->meta, index, call, false, false)))) return gone();
          tools->calls.push_back(std::move(call));
          *last_write = Clock::now();
        }
        if (!done) return true;
        const JobOutcome& o = g->job->outcome();
        if (o.finish_reason == FinishReason::kError || o.finish_reason == FinishReason::kCancelled) {
          const std::string msg = o.finish_reason == FinishReason::kError ? o.error : "the request was cancelled";
          write_event(sink, dump(error_json(msg, "server_error", "", "generation_failed")));
        } else {
          static const std::vector<ToolCall> kNoCalls;
          const std::vector<ToolCall>& calls = tools ? tools->calls : kNoCalls;
          const CacheReport c = finish_generation(st, *g, calls);
          const int64_t n = int64_t(o.result.tokens.size());
          const json held = tools && !tools->held.logprobs.empty() ? delta_logprobs(st, *g, tools->held) : json(nullptr);
          if (!write_event(sink, dump(chunk(g->meta, "", finish_reason(o, calls), *first, held)))) return false;
          if (g->params.include_usage && !write_event(sink, dump(usage_chunk(g->meta, c, n))))
            return false;
        }
        write_event(sink, "[DONE]");
        sink.done();
        return true;
      },
      [&st, g](bool) { cancel_if_running(st, *g); });
}


void handle(Server::State& st, const HttpRequest& req, HttpResponse& res, bool chat) {
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

void submit(Server::State& st, Generation& g) {
  // Counted before the draining check: begin_drain() sets the flag and then waits for
  // the count, so a request either sees the flag or is waited for.
  bool over = false;
  g.in_flight = st.track_generation(g.scope.tenant, &over);
  g.trace = RequestTrace::current();
  if (st.draining.load())
    throw ApiError(503, "server_error",
                   "the server is shutting down (draining); send new requests to another server", "",
                   "server_draining");
  if (over)
    throw ApiError(429, "rate_limit_error",
                   "the tenant has more than " + std::to_string(st.max_tenant_requests) +
                       " generation requests in flight (--tenant-max-requests); retry when one ends",
                   "", "tenant_quota_exceeded");
  if (!st.scheduler->submit(g.job))
    throw ApiError(503, "server_error", "the server is busy (request queue full); retry later", "",
                   "server_overloaded");
}

void respond(Server::State& st, std::shared_ptr<Generation> g, const HttpRequest& req,
             HttpResponse& res) {
  if (g->params.stream) return respond_stream(st, std::move(g), res);
  answer_whole(st, *g, [&] { respond_whole(st, *g, req, res); });
}

void add_generation_routes(Server::State& st) {
  // Also without /v1, as llama-server serves both spellings.
  for (const char* prefix : {"/v1", ""}) {
    add_route(st, "POST", std::string(prefix) + "/completions",
              [&st](const HttpRequest& req, HttpResponse& res) { handle(st, req, res, false); });
    add_route(st, "POST", std::string(prefix) + "/chat/completions",
              [&st](const HttpRequest& req, HttpResponse& res) { handle(st, req, res, true); });
  }
}

void cancel_if_running(Server::State& st, Generation& g) {
  bool done = false;
  g.job->wait_delta(0ms, &done);
  if (!done) st.scheduler->cancel(*g.job);
}

void cancel_generation(Server::State& st, Generation& g) { st.scheduler->cancel(*g.job); }

}  // namespace pc::server
