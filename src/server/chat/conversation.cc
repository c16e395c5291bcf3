#include "server/chat/conversation.h"

#include <algorithm>
#include <span>
#include <unordered_map>

#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace pc::server {

std::string ConversationMemory::flat_key(const Key& key) {
  const auto& [scope, calls, text] = key;
  return scope + '\x1f' + (calls ? "calls" : "text") + '\x1f' + text;
}

void ConversationMemory::put(Key key, RememberedReply r, bool write_through) {
  if (r.ids.empty()) return;
  if (write_through && shared_) shared_->store(flat_key(key), r);
  std::lock_guard lk(mu_);
  r.last_use = ++clock_;
  auto it = replies_.find(key);
  if (it != replies_.end()) {
    tokens_ -= int64_t(it->second.ids.size() + it->second.context.size());
    replies_.erase(it);
  }
  tokens_ += int64_t(r.ids.size() + r.context.size());
  replies_.emplace(std::move(key), std::move(r));
  evict_locked();
}

std::optional<RememberedReply> ConversationMemory::get(const Key& key) {
  {
    std::lock_guard lk(mu_);
    auto it = replies_.find(key);
    if (it != replies_.end()) {
      it->second.last_use = ++clock_;
      return it->second;
    }
  }
  if (!shared_) return std::nullopt;
  // Another server generated it (this session moved here): keep it for its next turns.
  std::optional<RememberedReply> r = shared_->load(flat_key(key));
  if (r) put(key, *r, /*write_through=*/false);
  return r;
}

namespace {
std::string join_ids(const std::vector<std::string>& ids) {
  std::string k;
  for (const std::string& id : ids) k += id + '\n';
  return k;
}
}  // namespace

void ConversationMemory::remember(const CacheScope& scope, const std::string& text, RememberedReply r) {
  if (!text.empty()) put({scope_key(scope), false, text}, std::move(r));
}

std::optional<RememberedReply> ConversationMemory::find(const CacheScope& scope, const std::string& text) {
  return get({scope_key(scope), false, text});
}

void ConversationMemory::remember_calls(const CacheScope& scope, const std::vector<std::string>& call_ids,
                                        RememberedReply r) {
  if (!call_ids.empty()) put({scope_key(scope), true, join_ids(call_ids)}, std::move(r));
}

std::optional<RememberedReply> ConversationMemory::find_calls(const CacheScope& scope,
                                                              const std::vector<std::string>& call_ids) {
  if (call_ids.empty()) return std::nullopt;
  return get({scope_key(scope), true, join_ids(call_ids)});
}

void ConversationMemory::reshare() {
  if (!shared_) return;
  std::vector<std::pair<std::string, RememberedReply>> all;
  {
    std::lock_guard lk(mu_);
    for (const auto& [k, r] : replies_) all.emplace_back(flat_key(k), r);
  }
  for (const auto& [k, r] : all) shared_->store(k, r);
}

size_t ConversationMemory::size() const {
  std::lock_guard lk(mu_);
  return replies_.size();
}

int64_t ConversationMemory::tokens() const {
  std::lock_guard lk(mu_);
  return tokens_;
}

void ConversationMemory::evict_locked() {
  while (tokens_ > max_tokens_ && !replies_.empty()) {
    auto oldest = std::min_element(replies_.begin(), replies_.end(), [](auto& a, auto& b) {
      return a.second.last_use < b.second.last_use;
    });
    tokens_ -= int64_t(oldest->second.ids.size() + oldest->second.context.size());
    replies_.erase(oldest);
  }
}

std::vector<int32_t> encode_piece(const Tokenizer& tok, const std::string& text, bool first) {
  std::vector<int32_t> out;
  if (first && tok.add_bos() && tok.bos() >= 0) {
    const std::string& bos_text = tok.token_text(tok.bos());
    if (bos_text.empty() || text.compare(0, bos_text.size(), bos_text) != 0) out.push_back(tok.bos());
  }
  std::vector<int32_t> ids = first ? tok.encode(text, /*add_special=*/false, /*parse_special=*/true)
                                   : tok.encode_continuation(text, /*parse_special=*/true);
  out.insert(out.end(), ids.begin(), ids.end());
  return out;
}

namespace {

// Appends the byte offsets of `ids`, which spell text[start, end): each token is the
// text's next bytes — its piece, the vocabulary text of a special token parsed from the
// text, or (SentencePiece's space prefix) its piece without the leading space; an added
// BOS spells nothing. False when the ids do not spell the range.
bool add_offsets(const Tokenizer& tok, std::span<const int32_t> ids, const std::string& text, size_t start,
                 size_t end, bool first, std::vector<int64_t>& out) {
  size_t at = start;
  auto here = [&](const std::string& s) { return at + s.size() <= end && text.compare(at, s.size(), s) == 0; };
  for (size_t i = 0; i < ids.size(); ++i) {
    out.push_back(int64_t(at));
    const std::string piece = tok.token_to_piece(ids[i]);
    if (!piece.empty() && here(piece)) {
      at += piece.size();
    } else if (const std::string& vt = tok.token_text(ids[i]); !vt.empty() && here(vt)) {
      at += vt.size();
    } else if (!piece.empty() && piece[0] == ' ' && here(piece.substr(1)) &&
               ((at == start && first) || (i > 0 && tok.is_control(ids[i - 1])))) {
      // The space SentencePiece puts before the first text of a prompt and after a
      // special token.
      at += piece.size() - 1;
    } else if (!(first && i == 0 && ids[i] == tok.bos())) {
      return false;
    }
  }
  return at == end;
}

// How many bytes of text[start..] the ids spell from its start, by add_offsets' rules
// (`prev`: the token before ids[0], -1 = none); the byte offset of each token that
// spells whole bytes goes to *offsets. The first token that differs ends the count
// (its matching bytes included).
size_t spelled_bytes(const Tokenizer& tok, std::span<const int32_t> ids, const std::string& text, size_t start,
                     bool first, int32_t prev, std::vector<int64_t>* offsets) {
  size_t at = start;
  auto common = [&](const std::string& s) {
    size_t n = 0;
    while (n < s.size() && at + n < text.size() && s[n] == text[at + n]) ++n;
    return n;
  };
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t before = i ? ids[i - 1] : prev;
    // What the token may spell here: its piece, a special token's vocabulary text, or
    // its piece without SentencePiece's space prefix (at the start, after a special
    // token); an added BOS spells nothing.
    const std::string piece = tok.token_to_piece(ids[i]);
    const std::string& vt = tok.token_text(ids[i]);
    const bool space_prefix = !piece.empty() && piece[0] == ' ' &&
                              ((at == start && first) || (before >= 0 && tok.is_control(before)));
    const std::string candidates[] = {piece, vt, space_prefix ? piece.substr(1) : std::string()};
    size_t spelled = std::string::npos, partial = 0;
    for (const std::string& c : candidates) {
      if (c.empty()) continue;
      const size_t n = common(c);
      if (n == c.size()) {
        spelled = n;
        break;
      }
      partial = std::max(partial, n);
    }
    if (spelled == std::string::npos && space_prefix && piece.size() == 1) spelled = 0;  // the lone prefix
    if (spelled == std::string::npos && first && i == 0 && ids[i] == tok.bos()) spelled = 0;
    if (spelled == std::string::npos) return at + partial - start;
    offsets->push_back(int64_t(at));
    at += spelled;
  }
  return at - start;
}

// The ids of an assistant message's tool calls, in order; empty when it has none or a
// call has no string id.
std::vector<std::string> call_ids_of(const nlohmann::json& m) {
  std::vector<std::string> ids;
  const auto c = m.find("tool_calls");
  if (c == m.end() || !c->is_array()) return ids;
  for (const auto& call : *c) {
    const auto id = call.is_object() ? call.find("id") : call.end();
    if (!call.is_object() || id == call.end() || !id->is_string()) return {};
    ids.push_back(id->get<std::string>());
  }
  return ids;
}

// Where message `mi`'s tool calls sit in the rendered text: `data_before` is the end
// of the last byte of data (any part but this message) before the message's first
// byte, `end` the end of the format's region marker after its last byte (before the
// next part's data). ok false when the marker is not there.
struct ToolTurn {
  bool ok = false;
  size_t data_before = 0, end = 0;
};

ToolTurn tool_turn(const RenderedChat& r, int mi, ToolFormat f) {
  auto of_message = [mi](const TemplateSpan& s) {
    return s.part.index == mi && (s.part.kind == TemplatePart::Kind::kMessage ||
                                  s.part.kind == TemplatePart::Kind::kContentPart ||
                                  s.part.kind == TemplatePart::Kind::kToolCall);
  };
  auto is_data = [](const TemplateSpan& s) {
    return s.part.kind != TemplatePart::Kind::kNone && s.part.kind != TemplatePart::Kind::kGenerationPrompt;
  };
  size_t first = std::string::npos, last = 0;
  for (const TemplateSpan& s : r.spans)
    if (of_message(s)) {
      first = std::min(first, s.begin);
      last = std::max(last, s.end);
    }
  ToolTurn t;
  const std::string_view marker = call_region_end(f);
  if (first == std::string::npos || marker.empty()) return t;
  size_t next = r.text.size();
  for (const TemplateSpan& s : r.spans) {
    if (!is_data(s) || of_message(s)) continue;
    if (s.end <= first) t.data_before = std::max(t.data_before, s.end);
    if (s.begin >= last) next = std::min(next, s.begin);
  }
  const size_t at = r.text.find(marker, last);
  if (at == std::string::npos || at + marker.size() > next) return t;
  // Harmony's <|call|> is the end-of-generation token the reply stopped at: the
  // remembered ids end before it, so the template's <|call|> stays template text.
  t.end = at + (call_region_end_is_eog(f) ? 0 : marker.size());
  t.ok = true;
  return t;
}

// The latest remembered reply of the request, to compare with what the model saw.
struct Splice {
  RememberedReply reply;
};

void check_divergence(const Splice& s, ChatPrompt& p) {
  // The model saw context + ids; the new prompt should repeat that exactly.
  std::vector<int32_t> seen = s.reply.context;
  seen.insert(seen.end(), s.reply.ids.begin(), s.reply.ids.end());
  const size_t n = std::min(seen.size(), p.ids.size());
  size_t i = 0;
  while (i < n && seen[i] == p.ids[i]) ++i;
  p.expected_hit = std::min<int64_t>(s.reply.kv_tokens, int64_t(p.ids.size()) - 1);
  if (i < seen.size() && i < p.ids.size()) {
    p.diverged_at = int64_t(i);
    p.reason = "template_rerender";
    p.expected_hit = std::min<int64_t>(p.expected_hit, int64_t(i));
  }
}

}  // namespace

std::optional<nlohmann::ordered_json> tool_call_content_as_empty(const nlohmann::ordered_json& messages) {
  nlohmann::ordered_json fixed = messages;
  bool changed = false;
  for (auto& m : fixed)
    if (m.is_object() && m.contains("tool_calls") && (!m.contains("content") || m["content"].is_null())) {
      m["content"] = "";
      changed = true;
    }
  if (!changed) return std::nullopt;
  return fixed;
}

nlohmann::ordered_json keep_key_order(const nlohmann::json& value, const nlohmann::ordered_json& order) {
  if (value.is_array()) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (size_t i = 0; i < value.size(); ++i)
      out.push_back(keep_key_order(value[i], order.is_array() && i < order.size() ? order[i] : nullptr));
    return out;
  }
  if (!value.is_object()) return value;
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  if (order.is_object())
    for (auto it = order.begin(); it != order.end(); ++it)
      if (auto v = value.find(it.key()); v != value.end()) out[it.key()] = keep_key_order(*v, it.value());
  for (auto it = value.begin(); it != value.end(); ++it)
    if (!out.contains(it.key())) out[it.key()] = keep_key_order(it.value(), nullptr);
  return out;
}

namespace {

// Every object in a request's ordered text, by its content (keys sorted, as nlohmann::json
// writes it): what the translation copied from the request is found here.
using SentObjects = std::unordered_map<std::string, const nlohmann::ordered_json*>;

void index_sent(const nlohmann::ordered_json& v, SentObjects& out) {
  if (v.is_object()) {
    out.emplace(nlohmann::json(v).dump(), &v);
    for (const auto& [key, child] : v.items()) index_sent(child, out);
  } else if (v.is_array()) {
    for (const auto& child : v) index_sent(child, out);
  }
}

nlohmann::ordered_json order_of(const nlohmann::json& value, const SentObjects& sent,
                                const nlohmann::ordered_json& shape) {
  static const nlohmann::ordered_json kNone;
  if (value.is_array()) {
    const nlohmann::ordered_json& each = shape.is_array() && !shape.empty() ? shape[0] : kNone;
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const auto& v : value) out.push_back(order_of(v, sent, each));
    return out;
  }
  if (!value.is_object()) return nullptr;
  if (auto it = sent.find(value.dump()); it != sent.end()) return *it->second;
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  if (shape.is_object())
    for (auto it = shape.begin(); it != shape.end(); ++it)
      if (auto v = value.find(it.key()); v != value.end()) out[it.key()] = order_of(*v, sent, it.value());
  for (auto it = value.begin(); it != value.end(); ++it)
    if (!out.contains(it.key())) out[it.key()] = order_of(it.value(), sent, kNone);
  return out;
}

}  // namespace

nlohmann::ordered_json translated_key_order(const nlohmann::json& messages, const nlohmann::json& extra,
                                            const nlohmann::ordered_json& sent) {
  static const nlohmann::ordered_json kMessages = nlohmann::ordered_json::parse(R"([{
    "role": null, "content": null, "reasoning_content": null,
    "tool_calls": [{"id": null, "type": null, "function": {"name": null, "arguments": null}}],
    "tool_call_id": null, "name": null}])");
  static const nlohmann::ordered_json kExtra = nlohmann::ordered_json::parse(
      R"({"tools": [{"type": null, "function": {"name": null, "description": null, "parameters": null}}]})");
  SentObjects objects;
  index_sent(sent, objects);
  nlohmann::ordered_json order = order_of(extra, objects, kExtra);
  if (!order.is_object()) order = nlohmann::ordered_json::object();
  order["messages"] = order_of(messages, objects, kMessages);
  return order;
}

nlohmann::ordered_json parse_tool_arguments(nlohmann::ordered_json messages) {
  if (!messages.is_array()) return messages;
  for (auto& m : messages) {
    if (!m.is_object()) continue;
    auto calls = m.find("tool_calls");
    if (calls == m.end() || !calls->is_array()) continue;
    for (auto& call : *calls) {
      if (!call.is_object()) continue;
      auto fn = call.find("function");
      if (fn == call.end() || !fn->is_object()) continue;
      auto args = fn->find("arguments");
      if (args == fn->end() || !args->is_string()) continue;
      nlohmann::ordered_json parsed =
          nlohmann::ordered_json::parse(args->get_ref<const std::string&>(), nullptr, false);
      if (parsed.is_object()) *args = std::move(parsed);
    }
  }
  return messages;
}

ChatPrompt build_chat_prompt(const ChatTemplate& tmpl, const Tokenizer& tok,
                             ConversationMemory& memory, const CacheScope& scope,
                             const nlohmann::ordered_json& messages, const nlohmann::ordered_json& extra,
                             ToolFormat tool_format, ChatRender mode) {
  // The generation prompt is left as template text: no block needs it, and finding it
  // takes a second render.
  const RenderedChat rendered = render_chat(tmpl, messages, extra, mode, /*spans=*/true);
  const std::string& text = rendered.text;
  ChatPrompt p;
  bool offsets_ok = true;
  std::optional<Splice> latest;
  bool latest_unknown = false;
  size_t cursor = 0;  // text[0, cursor) is tokenized
  for (size_t mi = 0; mi < messages.size(); ++mi) {
    const auto& m = messages[mi];
    if (!m.is_object() || m.value("role", "") != "assistant") continue;
    if (const auto calls = m.find("tool_calls"); calls != m.end() && calls->is_array() && !calls->empty()) {
      // A tool-call turn: found by its call ids, spliced as a whole (build_chat_prompt).
      ++p.assistant_messages;
      std::optional<RememberedReply> r = memory.find_calls(scope, call_ids_of(m));
      if (!r) {
        latest_unknown = true;
        continue;
      }
      latest = Splice{*r};
      latest_unknown = false;
      const ToolTurn turn = tool_turn(rendered, int(mi), tool_format);
      const std::vector<int32_t>& ctx = r->context;
      if (!turn.ok || turn.end < cursor || ctx.size() < p.ids.size() ||
          !std::equal(p.ids.begin(), p.ids.end(), ctx.begin()))
        continue;
      const std::span<const int32_t> rest(ctx.data() + p.ids.size(), ctx.size() - p.ids.size());
      std::vector<int64_t> offsets;
      const size_t spelled = spelled_bytes(tok, rest, text, cursor, cursor == 0,
                                           p.ids.empty() ? -1 : p.ids.back(), &offsets);
      if (cursor + spelled < turn.data_before) continue;  // an earlier message changed since
      // Offsets: the context's tokens where they spell the text, the rest (a generation
      // prompt the template no longer renders, the reply) spread over the region.
      offsets.resize(std::min(offsets.size(), rest.size()));
      const size_t n_rest = rest.size() - offsets.size() + r->ids.size();
      const int64_t from = offsets.empty() ? int64_t(cursor)
                                           : std::min<int64_t>(int64_t(cursor + spelled), int64_t(turn.end));
      for (size_t k = 0; k < n_rest; ++k)
        offsets.push_back(from + int64_t(k) * (int64_t(turn.end) - from) / int64_t(n_rest));
      p.token_offsets.insert(p.token_offsets.end(), offsets.begin(), offsets.end());
      p.ids.insert(p.ids.end(), rest.begin(), rest.end());
      p.ids.insert(p.ids.end(), r->ids.begin(), r->ids.end());
      ++p.spliced;
      cursor = turn.end;
      continue;
    }
    const auto c = m.find("content");
    if (c == m.end() || !c->is_string() || c->get_ref<const std::string&>().empty()) continue;
    const std::string& content = c->get_ref<const std::string&>();
    ++p.assistant_messages;
    std::optional<RememberedReply> r = memory.find(scope, content);
    if (!r) {
      latest_unknown = true;
      continue;
    }
    const size_t pos = text.find(content, cursor);
    if (pos == std::string::npos) {
      // The template changed the reply's text (e.g. dropped its reasoning): its
      // ids cannot be reused; the divergence check still runs against it.
      latest = Splice{std::move(*r)};
      latest_unknown = false;
      continue;
    }
    const std::vector<int32_t> before = encode_piece(tok, text.substr(cursor, pos - cursor), cursor == 0);
    offsets_ok = offsets_ok && add_offsets(tok, before, text, cursor, pos, cursor == 0, p.token_offsets);
    p.ids.insert(p.ids.end(), before.begin(), before.end());
    latest = Splice{*r};
    latest_unknown = false;
    offsets_ok = offsets_ok && add_offsets(tok, r->ids, text, pos, pos + content.size() - r->tail.size(), false, p.token_offsets);
    p.ids.insert(p.ids.end(), r->ids.begin(), r->ids.end());
    ++p.spliced;
    // The tail (text the ids do not cover) is tokenized with the next piece.
    cursor = pos + content.size() - r->tail.size();
  }
  const std::vector<int32_t> rest = encode_piece(tok, text.substr(cursor), cursor == 0);
  offsets_ok = offsets_ok && add_offsets(tok, rest, text, cursor, text.size(), cursor == 0, p.token_offsets);
  p.ids.insert(p.ids.end(), rest.begin(), rest.end());
  p.token_offsets.push_back(int64_t(text.size()));
  if (!offsets_ok || p.token_offsets.size() != p.ids.size() + 1) p.token_offsets.clear();
  p.text = text;
  std::vector<PartSpan> spans;
  for (const TemplateSpan& s : rendered.spans) {
    PartSpan ps{s.begin, s.end, -1, s.part.index, s.part.sub};
    switch (s.part.kind) {
      case TemplatePart::Kind::kTool: ps.kind = 0; break;
      case TemplatePart::Kind::kMessage: ps.kind = 1; break;
      case TemplatePart::Kind::kContentPart: ps.kind = 2; break;
      case TemplatePart::Kind::kToolCall: ps.kind = 3; break;
      case TemplatePart::Kind::kGenerationPrompt: ps.kind = 4; break;
      case TemplatePart::Kind::kNone: break;
    }
    spans.push_back(ps);
  }
  const auto tools = extra.is_object() ? extra.find("tools") : extra.end();
  p.parts = request_parts(spans, messages, tools != extra.end() ? nlohmann::json(*tools) : nlohmann::json(), p.token_offsets);
  if (latest) check_divergence(*latest, p);
  if (latest_unknown && p.reason.empty()) p.reason = "unknown_reply";
  return p;
}

}  // namespace pc::server
