#include "pml/describe.h"

#include <cstdio>

#include "tokenizer/tokenizer.h"

namespace pc::pml {

namespace {

std::string range(int32_t a, int32_t b) { return "[" + std::to_string(a) + ", " + std::to_string(b) + ")"; }

// Pads `s` to `w` columns (ASCII-width approximation: counts UTF-8 characters).
std::string pad(std::string s, size_t w) {
  size_t chars = 0;
  for (unsigned char c : s) chars += (c & 0xC0) != 0x80;
  if (chars < w) s.append(w - chars, ' ');
  return s + " ";
}

std::string num(int64_t v, int w) {
  std::string s = std::to_string(v);
  return (s.size() < static_cast<size_t>(w) ? std::string(w - s.size(), ' ') : "") + s + " ";
}

// Text shown on one line: control characters escaped, cut after `max` bytes.
std::string snippet(const std::string& text, size_t max = 60) {
  std::string out = "\"";
  size_t n = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (n >= max && (c & 0xC0) != 0x80) {
      out += "...";
      break;
    }
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '"') out += "\\\"";
    else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else out += static_cast<char>(c);
    ++n;
  }
  return out + "\"";
}

std::string decode(const Tokenizer& tok, const std::vector<int32_t>& ids, int32_t begin, int32_t end) {
  std::string s;
  for (int32_t i = begin; i < end; ++i) s += tok.token_to_piece(ids[i]);
  return s;
}

std::string module_label(const SchemaLayout& L, int m) { return m == 0 ? "(root)" : L.modules[m].path; }

}  // namespace

std::string describe(const SchemaLayout& L, const Tokenizer* tok) {
  std::string out = "schema '" + L.name + "'";
  if (!L.source.empty()) out += " (" + L.source + ")";
  out += ": " + std::to_string(L.length) + " positions, " + std::to_string(L.modules.size() - 1) +
         " modules, " + std::to_string(L.unions.size()) + " unions, digest " + L.digest_hex() + "\n";
  out += pad("module", 28) + pad("positions", 16) + "length tokens  notes\n";
  std::vector<bool> union_shown(L.unions.size(), false);
  for (size_t i = 0; i < L.modules.size(); ++i) {
    const ModuleLayout& m = L.modules[i];
    const int depth = static_cast<int>(L.chain(static_cast<int>(i)).size()) - 1;
    if (m.union_index >= 0 && !union_shown[m.union_index]) {
      const UnionLayout& u = L.unions[m.union_index];
      union_shown[m.union_index] = true;
      std::string members;
      for (int x : u.members) members += (members.empty() ? "" : ", ") + L.modules[x].name;
      out += pad(std::string(2 * (depth - 1), ' ') + "<union " + std::to_string(m.union_index) + ">", 28) +
             pad(range(u.start, u.start + u.length), 16) + num(u.length, 6) + "        one of: " + members + "\n";
    }
    std::string notes;
    if (i == 0) notes += "always included";
    if (m.union_index >= 0) notes += "union " + std::to_string(m.union_index);
    if (!m.cache) notes += std::string(notes.empty() ? "" : "; ") + "cache=false";
    for (const Param& p : m.params)
      notes += std::string(notes.empty() ? "" : "; ") + "param " + p.name + " " +
               range(p.slot, p.slot + p.length) + " placeholder " + std::to_string(p.end - p.begin) + " tokens";
    std::string runs;
    for (const TokenRun& r : token_runs(m)) runs += (runs.empty() ? "" : " ") + range(r.pos, r.pos + r.end - r.begin);
    out += pad(std::string(2 * depth, ' ') + module_label(L, static_cast<int>(i)), 28) +
           pad(range(m.start, m.start + m.length), 16) + num(m.length, 6) + num(static_cast<int64_t>(m.tokens.size()), 6) +
           " " + notes + "\n";
    if (!runs.empty() && token_runs(m).size() > 1) out += pad("", 28) + "tokens at " + runs + "\n";
    if (tok && !m.tokens.empty())
      out += pad("", 28) + snippet(decode(*tok, m.tokens, 0, static_cast<int32_t>(m.tokens.size()))) + "\n";
  }
  return out;
}

std::string describe(const PromptPlan& P, const SchemaLayout& L, const Tokenizer* tok) {
  std::string out = "plan for schema '" + P.schema + "'";
  if (!P.source.empty()) out += " (" + P.source + ")";
  out += ", layout " + std::string(P.layout == LayoutMode::kSchema ? "schema" : "compact") + ": " +
         std::to_string(P.items.size()) + " items, " + std::to_string(P.n_tokens()) + " tokens (" +
         std::to_string(P.n_module_tokens) + " from modules, " + std::to_string(P.n_computed_tokens) +
         " computed), next position " + std::to_string(P.next_pos) + "\n";
  out += pad("  #", 4) + pad("item", 34) + "tokens positions\n";
  for (size_t i = 0; i < P.items.size(); ++i) {
    const PlanItem& it = P.items[i];
    std::string label;
    if (it.kind == PlanItem::Kind::kModule) {
      label = "module " + module_label(L, it.module) + (it.cache ? "" : " (cache=false)");
    } else if (it.is_argument()) {
      label = "argument " + L.modules[it.module].path + "." + L.modules[it.module].params[it.param].name;
    } else {
      label = "text";
    }
    std::string pos;
    for (const PlanSpan& s : it.spans) {
      const int32_t n = s.end - s.begin;
      pos += (pos.empty() ? "" : " ") + range(s.pos, s.pos + n);
      if (s.pos != s.schema_pos) pos += "<-" + range(s.schema_pos, s.schema_pos + n);
    }
    out += num(static_cast<int64_t>(i), 3) + pad(label, 34) + num(it.n_tokens(), 6) + pos + "\n";
    if (tok && it.kind == PlanItem::Kind::kTokens && !it.tokens.empty())
      out += pad("", 42) + snippet(decode(*tok, it.tokens, 0, static_cast<int32_t>(it.tokens.size()))) + "\n";
  }
  return out;
}

}  // namespace pc::pml
