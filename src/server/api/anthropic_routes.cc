// POST /v1/messages: Anthropic's Messages API as a translation layer over the chat path.
//
//   Anthropic request ──► OpenAI-style chat messages + tools ──► prepare_chat /
//   (system, messages,     (tool_use → assistant tool_calls,     start_generation
//    tools, cache_control)  tool_result → "tool" messages)        (generation.h: the same
//                                                                  template, caches and
//   Anthropic response ◄── text (and tool calls) + usage ◄──────── scheduler as chat)
//
// cache_control breakpoints become lifetimes (GenerateRequest::retain) for the prompt
// prefix ending at the block: a message's text blocks are sent on as content parts,
// whose template spans (request parts) locate each; a tool, a tool_result or a message
// the template does not render verbatim ends at its own end. Errors are Anthropic's shape
// ({"type": "error", "error": {"type", "message"}}), through guard().
#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>

#include "server/api/anthropic_request.h"
#include "server/api/api_error.h"
#include "server/api/structured_output.h"
#include "server/generation.h"
#include "server/api/lifetime.h"
#include "server/api/openai.h"
#include "server/state.h"
#include "tokenizer/tokenizer.h"

namespace pc::server {

namespace {

using namespace std::chrono_literals;

// Prompt tokens up to the end of the breakpoint's block: its content part's span when
// the template renders the message's text parts as sent (request_structure.h), else the
// end of its tool or message; the whole prompt when the spans place neither.
int32_t breakpoint_tokens(const ChatPrompt& p, const Breakpoint& b) {
  if (b.sub >= 0)
    for (const RequestPart& q : p.parts)
      if (q.kind == RequestPart::Kind::kContentPart && q.index == b.index && q.sub == b.sub && q.tok_end > 0)
        return q.tok_end;
  int32_t end = -1;
  for (const RequestPart& q : p.parts) {
    const bool same = q.index == b.index &&
                      (q.kind == b.kind || (b.kind == RequestPart::Kind::kMessage && q.kind == RequestPart::Kind::kToolCall));
    if (same && q.tok_end > end) end = q.tok_end;
  }
  return end > 0 ? end : int32_t(p.ids.size());
}

// A final assistant message without tool_use blocks is a prefill: the reply continues
// it rather than starting a turn after it.
ChatRender anthropic_render(const json& messages) {
  ChatRender mode;
  if (!messages.is_array() || messages.empty()) return mode;
  const json& last = messages.back();
  const auto calls = last.find("tool_calls");
  mode.continue_final = last.value("role", "") == "assistant" && (calls == last.end() || calls->empty());
  mode.add_generation_prompt = !mode.continue_final;
  return mode;
}

// The template's extra variables: the tools (unless tool_choice is none) and, when the
// request says whether to think, enable_thinking (Qwen3, DeepSeek-R1 templates read it).
json template_extra(const AnthropicTranslation& t, const json& body) {
  json extra = json::object();
  if (!t.tools.empty() && !anthropic_tools_off(body)) extra["tools"] = t.tools;
  if (const std::optional<bool> thinking = anthropic_thinking(body)) extra["enable_thinking"] = *thinking;
  return extra;
}

// The request's tools in chat's shape ({"tools": [{type, function: {name, parameters,
// strict}}]}), read from its text so that schemas keep their key order: what the
// strict-tool grammar reads (forced_call_grammar). translate_anthropic checked them.
std::string chat_shaped_tools(std::string_view raw) {
  using ojson = nlohmann::ordered_json;
  const ojson body = ojson::parse(raw.begin(), raw.end(), nullptr, false);
  ojson tools = ojson::array();
  if (body.is_object() && body.contains("tools") && body["tools"].is_array())
    for (const ojson& t : body["tools"]) {
      ojson fn = {{"name", t["name"]}, {"parameters", t["input_schema"]}};
      if (t.contains("strict")) fn["strict"] = t["strict"];
      tools.push_back({{"type", "function"}, {"function", std::move(fn)}});
    }
  return ojson{{"tools", std::move(tools)}}.dump();
}

struct AnthropicGeneration {
  Generation g;
  bool show_thinking = false;  // thinking enabled: the reply's thinking as thinking blocks
  int32_t breakpoint_end = 0;  // tokens at or before the last cache_control breakpoint (0: none)
  std::string id;
};

AnthropicGeneration prepare(Server::State& st, const HttpRequest& req) {
  AnthropicGeneration a;
  Generation& g = a.g;
  const json body = parse_body(req.body);
  st.tenant_of(req);  // 401 before anything else
  const AnthropicTranslation t = translate_anthropic(body);
  const json common = anthropic_common_body(body);
  g.params = parse_common(common, /*chat=*/true, st.opt.defaults);
  g.params.gen.grammar = parse_anthropic_output_format(body, req.body);
  st.check_model(g.params.model);
  g.scope = st.scope_of_request(req, g.params.cache_salt);
  g.params.gen.reuse = parse_reuse(body, st.reuse_default);
  // tool_choice any / tool: enforced as OpenAI's required / named choice are, by
  // prefilling the reply with the template's call opener (and the name).
  const ToolChoice choice =
      parse_tool_choice({{"tool_choice", common.value("tool_choice", json())}, {"tools", t.tools}}, st.tool_format);
  const ChatRender mode = anthropic_render(t.messages);
  if (mode.continue_final && choice.forces())
    throw bad_field("tool_choice", "a 'tool_choice' that forces a call cannot continue a final assistant message "
                                   "(the call would start a new reply)");
  const json extra = template_extra(t, body);
  // Too long a prompt is a 400 before anything else reads the body again.
  check_prompt_bytes(t.messages, st.max_prompt_bytes, st.n_ctx, "messages");
  // Schemas and tool inputs keep the key order the client sent (the template writes them).
  const nlohmann::ordered_json order =
      translated_key_order(t.messages, extra, nlohmann::ordered_json::parse(req.body, nullptr, false));
  prepare_chat(st, g, t.messages, extra, mode, &order);
  // Replies parsed into tool_use blocks.
  parse_replies_for_tools(st, g, t.tools, extra.contains("tools"));
  // A forced call of a strict tool follows its input_schema, as on chat.
  try {
    if (choice.forces()) force_tool_call(st, g, choice, chat_shaped_tools(req.body));
  } catch (const ApiError& e) {
    // Chat's field (tools[i].function.parameters...) as this request's (tools[i].input_schema...).
    auto own = [](std::string text) {
      const std::string chat_field = ".function.parameters", field = ".input_schema";
      for (size_t at = text.find(chat_field); at != std::string::npos; at = text.find(chat_field, at + field.size()))
        text.replace(at, chat_field.size(), field);
      return text;
    };
    throw ApiError(e.status, e.type, own(e.what()), own(e.param), e.code);
  }
  // The thinking is split from the text always (with --reasoning-format other than
  // none), and shown only when the request enabled thinking, as Anthropic's API does.
  split_thinking(st, g, st.opt.reasoning_format);
  a.show_thinking = anthropic_thinking(body).value_or(false);
  apply_test_hooks(st, g, body);
  for (const Breakpoint& b : t.breakpoints) {
    const int32_t n = breakpoint_tokens(*g.chat, b);
    g.params.gen.retain.push_back({n, b.seconds * st.opt.test_time_scale});
    a.breakpoint_end = std::max(a.breakpoint_end, n);
  }
  start_generation(st, g);
  static std::atomic<uint64_t> counter{0};
  std::mt19937_64 rng(uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()) ^ ++counter);
  char buf[32];
  std::snprintf(buf, sizeof buf, "msg_%016llx", static_cast<unsigned long long>(rng()));
  a.id = buf;
  return a;
}

// usage: input_tokens + cache_creation_input_tokens + cache_read_input_tokens = the prompt.
json usage_of(const AnthropicGeneration& a, const CacheReport& c, int64_t output_tokens) {
  const int64_t read = c.cached_tokens;
  const int64_t creation = std::max<int64_t>(0, std::min<int64_t>(a.breakpoint_end, c.prompt_tokens) - read);
  return {{"input_tokens", c.prompt_tokens - read - creation},
          {"cache_creation_input_tokens", creation},
          {"cache_read_input_tokens", read},
          {"output_tokens", output_tokens}};
}

const char* stop_reason(const JobOutcome& o, bool tool_use = false) {
  if (tool_use) return "tool_use";
  if (o.finish_reason == FinishReason::kLength) return "max_tokens";
  if (!o.stop_sequence.empty()) return "stop_sequence";
  return "end_turn";
}

json stop_sequence_json(const JobOutcome& o) {
  return o.stop_sequence.empty() ? json(nullptr) : json(o.stop_sequence);
}

json message_json(const Server::State& st, const AnthropicGeneration& a, json content) {
  return {{"id", a.id},           {"type", "message"},       {"role", "assistant"},
          {"model", st.model_id}, {"content", std::move(content)}, {"stop_reason", nullptr},
          {"stop_sequence", nullptr}};
}

void throw_outcome_error(const JobOutcome& o) {
  if (o.error_code == "context_length_exceeded")
    throw ApiError(400, "invalid_request_error", o.error, "max_tokens", o.error_code);
  if (o.finish_reason == FinishReason::kCancelled)
    throw ApiError(503, "server_error", "the request was cancelled (server shutting down)", "", "cancelled");
  throw ApiError(500, "server_error", o.error.empty() ? "generation failed" : o.error, "", "generation_failed");
}

// Anthropic's tool ids ("toolu_" + 24 alphanumerics), or what the template requires
// (Mistral's 9 alphanumerics: the id comes back in the history it renders).
std::function<std::string()> tool_use_ids(ToolFormat f) {
  if (f == ToolFormat::kMistral) return [f] { return new_tool_call_id(f); };
  return [] { return "toolu_" + new_tool_call_id(ToolFormat::kNone).substr(5); };
}

json tool_input(const ToolCall& call) {
  json in = json::parse(call.arguments, nullptr, false);
  return in.is_object() ? in : json::object();
}

json tool_use_block(const ToolCall& call) {
  return {{"type", "tool_use"}, {"id", call.id}, {"name", call.name}, {"input", tool_input(call)}};
}

// The signature Anthropic uses to verify thinking sent back is not checked here (the
// block is rendered as the template renders reasoning): it is empty.
json thinking_block(const std::string& thinking) {
  return {{"type", "thinking"}, {"thinking", thinking}, {"signature", ""}};
}

void respond_whole(Server::State& st, AnthropicGeneration& a, const HttpRequest& req, HttpResponse& res) {
  Delta all;
  if (!wait_whole(st, a.g, req, &all)) {
    res.status = 499;  // the client left; nobody reads it
    return;
  }
  const JobOutcome& o = a.g.job->outcome();
  if (o.finish_reason == FinishReason::kError || o.finish_reason == FinishReason::kCancelled) throw_outcome_error(o);
  ReasoningSplit split;
  if (!a.g.think.empty())
    split = split_reasoning(a.g.think, a.g.think_open, all.text);
  else
    split.content = all.text;
  ToolParse parsed;
  if (a.g.tools != ToolFormat::kNone)
    parsed = parse_tool_calls(a.g.tools, a.g.prefill + split.content, tool_use_ids(a.g.tools), a.g.tool_schemas);
  else
    parsed.content = std::move(split.content);
  split.reasoning += parsed.reasoning;  // harmony: the analysis channel
  const CacheReport c = finish_generation(st, a.g, parsed.calls);
  json content = json::array();
  if (a.show_thinking && !split.reasoning.empty()) content.push_back(thinking_block(split.reasoning));
  if (!parsed.content.empty()) content.push_back({{"type", "text"}, {"text", parsed.content}});
  for (const ToolCall& call : parsed.calls) content.push_back(tool_use_block(call));
  json m = message_json(st, a, std::move(content));
  m["stop_reason"] = stop_reason(o, !parsed.calls.empty());
  m["stop_sequence"] = stop_sequence_json(o);
  m["usage"] = usage_of(a, c, int64_t(o.result.tokens.size()));
  m["promptcache"] = cache_json(c);
  send_json(res, 200, m);
}

// Anthropic's SSE framing: a named event and its JSON (whose "type" is the name).
bool write_event(DataSink& sink, const char* name, const json& data) {
  const std::string ev = std::string("event: ") + name + "\ndata: " + dump(data) + "\n\n";
  return sink.write(ev.data(), ev.size());
}

// The stream's state across provider calls.
struct StreamState {
  std::optional<ToolCallParser> tools;  // when the request has tools: text held until decided
  std::optional<ReasoningParser> thinking;  // when the reply's thinking is split
  bool thinking_open = false;  // the open block (open_block) is a thinking block
  std::vector<ToolCall> calls;
  bool started = false;     // message_start sent
  bool pinged = false;
  bool fed_prefill = false; // the tool_choice prefill went to the parser
  int open_block = -1;      // index of the open text block (-1: none)
  int blocks = 0;           // blocks started
  Clock::time_point last_write = Clock::now();
};

void respond_stream(Server::State& st, std::shared_ptr<AnthropicGeneration> a, HttpResponse& res) {
  auto s = std::make_shared<StreamState>();
  if (a->g.tools != ToolFormat::kNone) s->tools.emplace(a->g.tools, tool_use_ids(a->g.tools), a->g.tool_schemas);
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
          // The prompt's cache figures are known when it ends: message_delta carries the
          // final usage; here input_tokens counts the whole prompt.
          json m = message_json(st, *a, json::array());
          m["usage"] = {{"input_tokens", a->g.prompt_tokens},
                        {"cache_creation_input_tokens", 0},
                        {"cache_read_input_tokens", 0},
                        {"output_tokens", 0}};
          if (!write_event(sink, "message_start", {{"type", "message_start"}, {"message", m}})) return gone();
          s->started = true;
          s->last_write = Clock::now();
        }
        bool done = false;
        Delta d = a->g.job->wait_delta(100ms, &done);
        if (s->thinking) {
          ReasoningSplit split = s->thinking->next(d.text, done);
          d.text = std::move(split.content);
          if (a->show_thinking && !split.reasoning.empty()) {
            // The thinking block comes first: it opens before any text block.
            if (s->open_block < 0) {
              s->open_block = s->blocks++;
              s->thinking_open = true;
              json block = thinking_block("");
              if (!write_event(sink, "content_block_start",
                               {{"type", "content_block_start"}, {"index", s->open_block}, {"content_block", block}}))
                return gone();
            }
            if (s->thinking_open &&
                !write_event(sink, "content_block_delta",
                             {{"type", "content_block_delta"}, {"index", s->open_block},
                              {"delta", {{"type", "thinking_delta"}, {"thinking", split.reasoning}}}}))
              return gone();
            s->last_write = Clock::now();
          }
        }
        ToolParse piece;
        if (s->tools) {
          // A forced call's prefill is the start of the reply the parser reads.
          piece = s->tools->push(s->fed_prefill ? d.text : a->g.prefill + d.text);
          s->fed_prefill = true;
          if (done && a->g.job->outcome().finish_reason != FinishReason::kError) {
            ToolParse rest = s->tools->finish();
            piece.content += rest.content;
            for (ToolCall& c : rest.calls) piece.calls.push_back(std::move(c));
          }
        } else {
          piece.content = d.text;
        }
        if ((!piece.content.empty() || !piece.calls.empty()) && s->thinking_open) {
          if (!write_event(sink, "content_block_stop", {{"type", "content_block_stop"}, {"index", s->open_block}}))
            return gone();
          s->open_block = -1;
          s->thinking_open = false;
        }
        if (!piece.content.empty()) {
          if (s->open_block < 0) {
            s->open_block = s->blocks++;
            if (!write_event(sink, "content_block_start",
                             {{"type", "content_block_start"}, {"index", s->open_block},
                              {"content_block", {{"type", "text"}, {"text", ""}}}}))
              return gone();
          }
          if (!s->pinged) {
            if (!write_event(sink, "ping", {{"type", "ping"}})) return gone();
            s->pinged = true;
          }
          if (!write_event(sink, "content_block_delta",
                           {{"type", "content_block_delta"}, {"index", s->open_block},
                            {"delta", {{"type", "text_delta"}, {"text", piece.content}}}}))
            return gone();
          s->last_write = Clock::now();
        }
        // A completed call: its own block, the input as one input_json_delta.
        for (ToolCall& call : piece.calls) {
          if (s->open_block >= 0) {
            if (!write_event(sink, "content_block_stop", {{"type", "content_block_stop"}, {"index", s->open_block}}))
              return gone();
            s->open_block = -1;
          }
          const int index = s->blocks++;
          json block = tool_use_block(call);
          block["input"] = json::object();
          if (!write_event(sink, "content_block_start",
                           {{"type", "content_block_start"}, {"index", index}, {"content_block", block}}) ||
              !write_event(sink, "content_block_delta",
                           {{"type", "content_block_delta"}, {"index", index},
                            {"delta", {{"type", "input_json_delta"}, {"partial_json", dump(tool_input(call))}}}}) ||
              !write_event(sink, "content_block_stop", {{"type", "content_block_stop"}, {"index", index}}))
            return gone();
          s->calls.push_back(std::move(call));
          s->last_write = Clock::now();
        }
        if (piece.content.empty() && piece.calls.empty() && !done && Clock::now() - s->last_write > 5s) {
          if (!write_event(sink, "ping", {{"type", "ping"}})) return gone();  // keeps proxies patient
          s->last_write = Clock::now();
        }
        if (!done) return true;
        const JobOutcome& o = a->g.job->outcome();
        if (o.finish_reason == FinishReason::kError || o.finish_reason == FinishReason::kCancelled) {
          const std::string msg = o.finish_reason == FinishReason::kError ? o.error : "the request was cancelled";
          write_event(sink, "error", {{"type", "error"}, {"error", {{"type", "api_error"}, {"message", msg}}}});
          sink.done();
          return true;
        }
        const CacheReport c = finish_generation(st, a->g, s->calls);
        if (s->open_block >= 0 &&
            !write_event(sink, "content_block_stop", {{"type", "content_block_stop"}, {"index", s->open_block}}))
          return false;
        if (!s->pinged) write_event(sink, "ping", {{"type", "ping"}});
        json md = {{"type", "message_delta"},
                   {"delta", {{"stop_reason", stop_reason(o, !s->calls.empty())}, {"stop_sequence", stop_sequence_json(o)}}},
                   {"usage", usage_of(*a, c, int64_t(o.result.tokens.size()))},
                   {"promptcache", cache_json(c)}};
        if (!write_event(sink, "message_delta", md)) return false;
        write_event(sink, "message_stop", {{"type", "message_stop"}});
        sink.done();
        return true;
      },
      [&st, a](bool) { cancel_if_running(st, a->g); });
}

void handle(Server::State& st, const HttpRequest& req, HttpResponse& res) {
  guard(
      res,
      [&] {
        auto a = std::make_shared<AnthropicGeneration>(prepare(st, req));
        if (a->g.params.stream) return respond_stream(st, std::move(a), res);
        answer_whole(st, a->g, [&] { respond_whole(st, *a, req, res); });
      },
      ErrorStyle::kAnthropic);
}

// POST /v1/messages/count_tokens: the body of /v1/messages without max_tokens →
// {"input_tokens": N}, the tokens of the prompt that request renders (prefill
// included), as tokenized without the replies the server remembers.
void count_tokens(Server::State& st, const HttpRequest& req, HttpResponse& res) {
  const json body = parse_body(req.body);
  st.tenant_of(req);  // 401 before anything else
  if (auto m = body.find("model"); m != body.end() && !m->is_null()) {
    if (!m->is_string()) throw bad_field("model", "'model' must be a string", "invalid_type");
    st.check_model(m->get<std::string>());
  }
  const AnthropicTranslation t = translate_anthropic(body);
  const json extra = template_extra(t, body);
  check_prompt_bytes(t.messages, st.max_prompt_bytes, st.n_ctx, "messages");
  json sent = t.messages;
  st.volatile_rules.apply(sent);  // as /v1/messages renders it
  const json messages = parse_tool_arguments(template_messages(sent));
  const std::string text =
      render_chat(chat_template_of(st), messages, extra, anthropic_render(t.messages), /*spans=*/false).text;
  send_json(res, 200, {{"input_tokens", encode_piece(st.model->tokenizer(), text, true).size()}});
}

}  // namespace

void add_anthropic_routes(Server::State& st) {
  add_route(st, "POST", "/v1/messages",
            [&st](const HttpRequest& req, HttpResponse& res) { handle(st, req, res); });
  add_route(st, "POST", "/v1/messages/count_tokens", [&st](const HttpRequest& req, HttpResponse& res) {
    guard(res, [&] { count_tokens(st, req, res); }, ErrorStyle::kAnthropic);
  });
}

}  // namespace pc::server
