#include "server/chat/request_structure.h"

#include "server/chat/chat_request.h"

#include <xxhash.h>

#include <algorithm>
#include <set>
#include <string_view>
#include <tuple>

namespace pc::server {

namespace {

uint64_t hash_text(const std::string& s) { return XXH64(s.data(), s.size(), 0x5eedULL); }

// The request data a part renders, hashed: equal hashes mean the client sent the same.
uint64_t part_hash(const RequestPart& p, const nlohmann::json& messages, const nlohmann::json& tools) {
  auto dump = [](const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); };
  switch (p.kind) {
    case RequestPart::Kind::kTool:
      if (tools.is_array() && p.index >= 0 && p.index < int(tools.size())) return hash_text("tool" + dump(tools[p.index]));
      break;
    case RequestPart::Kind::kMessage:
      if (messages.is_array() && p.index >= 0 && p.index < int(messages.size()))
        return hash_text("message" + dump(messages[p.index]));
      break;
    case RequestPart::Kind::kToolCall:
      if (messages.is_array() && p.index >= 0 && p.index < int(messages.size())) {
        const nlohmann::json& m = messages[p.index];
        if (auto c = m.find("tool_calls"); c != m.end() && c->is_array() && p.sub >= 0 && p.sub < int(c->size()))
          return hash_text("call" + dump((*c)[p.sub]));
      }
      break;
    case RequestPart::Kind::kGenerationPrompt:
      return hash_text("generation prompt");
    case RequestPart::Kind::kContentPart:
      break;  // hashed from its text (split_content_parts)
  }
  return 0;
}

// The tokens overlapping bytes [p.byte_begin, p.byte_end), and the block: the tokens
// inside them.
void locate_tokens(RequestPart& p, const std::vector<int64_t>& offsets) {
  if (offsets.size() < 2) return;
  const int64_t B = int64_t(p.byte_begin), E = int64_t(p.byte_end);
  const auto lo = std::upper_bound(offsets.begin(), offsets.end(), B) - offsets.begin() - 1;
  const auto hi = std::lower_bound(offsets.begin(), offsets.end(), E) - offsets.begin();
  p.tok_begin = int32_t(std::max<int64_t>(0, lo));
  p.tok_end = int32_t(std::min<int64_t>(int64_t(offsets.size()) - 1, hi));
  // Token i spans bytes [offsets[i], offsets[i + 1]).
  const int64_t first = std::lower_bound(offsets.begin(), offsets.end(), B) - offsets.begin();
  const int64_t end = std::upper_bound(offsets.begin(), offsets.end(), E) - offsets.begin() - 1;
  p.is_block = first < end && end <= int64_t(offsets.size()) - 1;
  if (!p.is_block) return;
  p.block_begin = int32_t(first);
  p.block_end = int32_t(end);
  p.whole_block = offsets[first] == B && offsets[end] == E;
}

// A part whose extent holds another part's bytes (a template interleaving them) is no
// block of its own. `parts` are sorted by byte_begin and each is non-empty, so part i
// overlaps an earlier one exactly when the furthest end before it passes its begin, and
// a later one exactly when the next one begins before its end: one pass, not a
// comparison of every pair (a request may have thousands of parts).
void clear_overlapping(std::vector<RequestPart>& parts) {
  size_t furthest_end = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    RequestPart& p = parts[i];
    const bool before = i > 0 && furthest_end > p.byte_begin;
    const bool after = i + 1 < parts.size() && parts[i + 1].byte_begin < p.byte_end;
    if (before || after) p.is_block = p.whole_block = false;
    furthest_end = std::max(furthest_end, p.byte_end);
  }
}

RequestPart::Kind kind_of(int k) {
  switch (k) {
    case 0: return RequestPart::Kind::kTool;
    case 3: return RequestPart::Kind::kToolCall;
    case 4: return RequestPart::Kind::kGenerationPrompt;
    default: return RequestPart::Kind::kMessage;  // messages and their content parts
  }
}

}  // namespace

std::vector<RequestPart> request_parts(const std::vector<PartSpan>& spans, const nlohmann::json& messages,
                                       const nlohmann::json& tools, const std::vector<int64_t>& offsets) {
  // One part per (kind, index, sub); content parts count as their message.
  std::map<std::tuple<int, int, int>, RequestPart> by_key;
  for (const PartSpan& s : spans) {
    if (s.kind < 0 || s.begin >= s.end) continue;
    const RequestPart::Kind k = kind_of(s.kind);
    const int sub = k == RequestPart::Kind::kToolCall ? s.sub : -1;
    auto [it, fresh] = by_key.try_emplace({int(k), s.index, sub});
    RequestPart& p = it->second;
    if (fresh) {
      p.kind = k;
      p.index = s.index;
      p.sub = sub;
      p.byte_begin = s.begin;
      p.byte_end = s.end;
    }
    p.byte_begin = std::min(p.byte_begin, s.begin);
    p.byte_end = std::max(p.byte_end, s.end);
  }
  std::vector<RequestPart> parts;
  for (auto& [key, p] : by_key) parts.push_back(p);
  std::sort(parts.begin(), parts.end(), [](const RequestPart& a, const RequestPart& b) { return a.byte_begin < b.byte_begin; });
  for (RequestPart& p : parts) {
    p.hash = part_hash(p, messages, tools);
    if (p.kind == RequestPart::Kind::kMessage && messages.is_array() && p.index < int(messages.size()) &&
        messages[p.index].is_object())
      p.role = messages[p.index].value("role", "");
    locate_tokens(p, offsets);
  }
  clear_overlapping(parts);
  return parts;
}

void split_content_parts(std::vector<RequestPart>& parts, const nlohmann::json& messages, const std::string& text,
                         const std::vector<int64_t>& token_offsets) {
  if (!messages.is_array()) return;
  std::vector<RequestPart> out;
  for (RequestPart& p : parts) {
    out.push_back(p);
    if (p.kind != RequestPart::Kind::kMessage || p.index < 0 || p.index >= int(messages.size())) continue;
    const nlohmann::json& m = messages[p.index];
    const auto c = m.is_object() ? m.find("content") : m.end();
    if (c == m.end() || !c->is_array() || c->size() < 2) continue;
    std::string joined;
    std::vector<RequestPart> subs;
    for (size_t j = 0; j < c->size(); ++j) {
      const nlohmann::json& part = (*c)[j];
      const auto t = part.is_object() ? part.find("text") : part.end();
      if (t == part.end() || !t->is_string()) {
        subs.clear();
        break;
      }
      const std::string& s = t->get_ref<const std::string&>();
      if (j > 0) joined += kContentPartJoiner;  // as template_messages joins them
      RequestPart q;
      q.kind = RequestPart::Kind::kContentPart;
      q.index = p.index;
      q.sub = int(j);
      q.role = p.role;
      q.hash = hash_text("content part" + s);
      q.byte_begin = joined.size();  // within the content, for now
      q.byte_end = q.byte_begin + s.size();
      joined += s;
      if (!s.empty()) subs.push_back(q);
    }
    // Only where the template rendered the content as it is, inside the message's
    // bytes (which may hold its role too).
    // Searched within the message's bytes only: a search to the end of the text for
    // every message would cost the text's length per message.
    const size_t in = subs.empty() || p.byte_end > text.size() || p.byte_begin > p.byte_end
                          ? std::string::npos
                          : std::string_view(text).substr(p.byte_begin, p.byte_end - p.byte_begin).find(joined);
    if (in == std::string::npos) continue;
    const size_t at = p.byte_begin + in;
    out.back().is_block = out.back().whole_block = false;
    for (RequestPart& q : subs) {
      q.byte_begin += at;
      q.byte_end += at;
      locate_tokens(q, token_offsets);
      out.push_back(q);
    }
  }
  parts = std::move(out);
}

std::vector<KvBlock> blocks_of(const std::vector<RequestPart>& parts) {
  std::vector<KvBlock> out;
  for (const RequestPart& p : parts)
    if (p.is_block && p.kind != RequestPart::Kind::kGenerationPrompt) out.push_back({p.block_begin, p.block_end});
  return out;
}

namespace {

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

// The first part whose tokens reach past token d.
const RequestPart* part_at(const std::vector<RequestPart>& parts, int64_t d) {
  for (const RequestPart& p : parts)
    if (p.tok_end > d) return &p;
  return nullptr;
}

std::vector<uint64_t> message_hashes(const std::vector<RequestPart>& parts) {
  std::vector<uint64_t> h;
  for (const RequestPart& p : parts)
    if (p.kind == RequestPart::Kind::kMessage) {
      if (int(h.size()) <= p.index) h.resize(p.index + 1, 0);
      h[p.index] = p.hash;
    }
  return h;
}

}  // namespace

MissReport StructureMemory::compare(const std::string& ns, const std::vector<int32_t>& ids,
                                    const std::vector<RequestPart>& parts) const {
  MissReport r;
  std::lock_guard lk(mu_);
  auto it = by_ns_.find(ns);
  if (it == by_ns_.end() || it->second.empty()) return r;
  const Entry* best = nullptr;
  size_t best_len = 0;
  for (const Entry& e : it->second) {
    const size_t n = common_prefix(e.ids, ids);
    if (!best || n > best_len) {
      best = &e;
      best_len = n;
    }
  }
  // The new request repeats all of the earlier one (a continuation): nothing diverged.
  if (best_len >= best->ids.size() || best_len >= ids.size()) return r;
  const int64_t d = int64_t(best_len);
  r.diverged_at = d;
  const RequestPart* now = part_at(parts, d);
  const RequestPart* was = part_at(best->parts, d);
  const RequestPart* p = now ? now : was;
  const bool tool = (now && now->kind == RequestPart::Kind::kTool) || (was && was->kind == RequestPart::Kind::kTool);
  if (!p) {
    r.reason = "template_rerender";
  } else if (tool) {
    r.reason = "tools_changed";
    r.index = (now && now->kind == RequestPart::Kind::kTool) ? now->index : was->index;
  } else if (p->kind == RequestPart::Kind::kMessage && p->role == "system") {
    r.reason = "system_changed";
    r.index = p->index;
  } else if (p->kind == RequestPart::Kind::kMessage || p->kind == RequestPart::Kind::kToolCall) {
    const std::vector<uint64_t> hn = message_hashes(parts), ho = message_hashes(best->parts);
    const int i = p->index;
    const uint64_t hi = i < int(hn.size()) ? hn[i] : 0;
    r.index = i;
    if ((i < int(ho.size()) && hi != 0 && hi == ho[i]) || i >= int(ho.size())) {
      // The same message rendered or tokenized differently, or a message appended after
      // all the earlier ones where that request's generation prompt was: the template
      // renders what the model saw differently.
      r.reason = "template_rerender";
    } else {
      r.reason = "messages_changed";
      auto in = [](const std::vector<uint64_t>& v, uint64_t h) { return h != 0 && std::find(v.begin(), v.end(), h) != v.end(); };
      const uint64_t was_i = i < int(ho.size()) ? ho[i] : 0;
      if (i + 1 < int(ho.size()) && hi != 0 && hi == ho[i + 1] && !in(hn, was_i)) {
        r.change = "removed";   // the earlier request's message i is gone
      } else if (i + 1 < int(hn.size()) && was_i != 0 && hn[i + 1] == was_i && !in(ho, hi)) {
        r.change = "inserted";  // a new message i, the earlier one follows it
      } else if (in(ho, hi)) {
        r.change = "reordered"; // message i was elsewhere before
      } else {
        r.change = "edited";
      }
    }
  } else {
    r.reason = "template_rerender";
  }
  // The cost: tokens after the divergence of blocks the earlier request also had (of a
  // block the divergence falls inside, those after it).
  std::set<uint64_t> before;
  for (const RequestPart& q : best->parts) before.insert(q.hash);
  for (const RequestPart& q : parts)
    if (q.is_block && q.block_end > d && q.hash != 0 && q.kind != RequestPart::Kind::kGenerationPrompt &&
        before.count(q.hash))
      r.tokens += q.block_end - std::max<int64_t>(q.block_begin, d);
  return r;
}

void StructureMemory::remember(const std::string& ns, std::vector<int32_t> ids, std::vector<RequestPart> parts) {
  std::lock_guard lk(mu_);
  std::vector<Entry>& v = by_ns_[ns];
  for (auto e = v.begin(); e != v.end(); ++e)
    if (e->ids == ids) {
      v.erase(e);
      break;
    }
  v.push_back({std::move(ids), std::move(parts), ++clock_});
  if (v.size() > per_ns_)
    v.erase(std::min_element(v.begin(), v.end(), [](const Entry& a, const Entry& b) { return a.last_use < b.last_use; }));
  if (by_ns_.size() > 4096) by_ns_.erase(by_ns_.begin());  // a bound on namespaces
}

}  // namespace pc::server
