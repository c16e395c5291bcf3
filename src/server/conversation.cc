#include "server/conversation.h"

#include <algorithm>
#include <span>

#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace pc::server {

void ConversationMemory::remember(const std::string& ns, const std::string& text,
                                  RememberedReply r) {
  if (text.empty() || r.ids.empty()) return;
  std::lock_guard lk(mu_);
  r.last_use = ++clock_;
  auto key = std::make_pair(ns, text);
  auto it = replies_.find(key);
  if (it != replies_.end()) {
    tokens_ -= int64_t(it->second.ids.size() + it->second.context.size());
    replies_.erase(it);
  }
  tokens_ += int64_t(r.ids.size() + r.context.size());
  replies_.emplace(std::move(key), std::move(r));
  evict_locked();
}

std::optional<RememberedReply> ConversationMemory::find(const std::string& ns,
                                                        const std::string& text) {
  std::lock_guard lk(mu_);
  auto it = replies_.find({ns, text});
  if (it == replies_.end()) return std::nullopt;
  it->second.last_use = ++clock_;
  return it->second;
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

ChatPrompt build_chat_prompt(const ChatTemplate& tmpl, const Tokenizer& tok,
                             ConversationMemory& memory, const std::string& ns,
                             const nlohmann::json& messages, const nlohmann::json& extra) {
  // The generation prompt is left as template text: no block needs it, and finding it
  // takes a second render.
  const RenderedChat rendered =
      tmpl.apply_with_spans(messages, /*add_generation_prompt=*/true, extra, /*find_generation_prompt=*/false);
  const std::string& text = rendered.text;
  ChatPrompt p;
  bool offsets_ok = true;
  std::optional<Splice> latest;
  bool latest_unknown = false;
  size_t cursor = 0;  // text[0, cursor) is tokenized
  for (const auto& m : messages) {
    if (!m.is_object() || m.value("role", "") != "assistant") continue;
    const auto c = m.find("content");
    if (c == m.end() || !c->is_string() || c->get_ref<const std::string&>().empty()) continue;
    const std::string& content = c->get_ref<const std::string&>();
    ++p.assistant_messages;
    std::optional<RememberedReply> r = memory.find(ns, content);
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
  p.parts = request_parts(spans, messages, tools != extra.end() ? *tools : nlohmann::json(), p.token_offsets);
  if (latest) check_divergence(*latest, p);
  if (latest_unknown && p.reason.empty()) p.reason = "unknown_reply";
  return p;
}

}  // namespace pc::server
