#include "pml/plan.h"

#include <string_view>
#include <unordered_map>

#include "pml/encoder.h"

namespace pc::pml {

namespace {

class Planner {
 public:
  Planner(const PromptDoc& doc, const SchemaLayout& S, const Encoder& enc)
      : doc_(doc), S_(S), enc_(enc), map_("", doc.source), imported_(S.modules.size()), is_imported_(S.modules.size(), false),
        union_choice_(S.unions.size(), -1) {}

  PromptPlan run() {
    if (doc_.schema != S_.name)
      map_.fail(doc_.schema_loc, "unknown schema '" + doc_.schema + "' (the schema given is '" + S_.name + "')");
    P_.schema = S_.name;
    P_.source = doc_.source;
    P_.layout = doc_.layout;
    text_pos_ = S_.length;
    add_module(0, {}, Loc{});
    body(doc_.body, 0);
    if (P_.layout == LayoutMode::kCompact) {
      int32_t cursor = 0;
      for (PlanItem& it : P_.items)
        for (PlanSpan& s : it.spans) {
          s.pos = cursor;
          cursor += s.end - s.begin;
        }
      P_.next_pos = cursor;
    } else {
      P_.next_pos = text_pos_;
    }
    return std::move(P_);
  }

 private:
  void body(const std::vector<Node>& nodes, int scope) {
    for (const Node& n : nodes) node(n, scope);
  }

  void node(const Node& n, int scope) {
    switch (n.kind) {
      case Node::Kind::kText:
        add_text(enc_.text(n.text), n.loc);
        break;
      case Node::Kind::kRole: {
        const RoleMarker& r = enc_.markers()[n.role];
        if (n.children.empty()) {
          add_text(enc_.marker(n.role == Role::kAssistant ? enc_.markers().generation_prompt : r.prefix), n.loc);
          break;
        }
        add_text(enc_.marker(r.prefix), n.loc);
        body(n.children, scope);
        add_text(enc_.marker(r.suffix), n.loc);
        break;
      }
      case Node::Kind::kImport:
        import(n, scope);
        break;
      default:
        break;  // schema-only kinds never reach a prompt
    }
  }

  std::string scope_name(int scope) const {
    return scope == 0 ? "schema '" + S_.name + "'" : "module '" + S_.modules[scope].path + "'";
  }

  void import(const Node& n, int scope) {
    const int m = S_.child(scope, n.name);
    if (m < 0) unknown_module(n, scope);
    const ModuleLayout& mod = S_.modules[m];
    if (is_imported_[m])
      map_.fail(n.loc, "module '" + mod.path + "' imported twice (first at " + describe_loc(imported_[m]) + ")");
    if (mod.union_index >= 0) {
      int& chosen = union_choice_[mod.union_index];
      if (chosen >= 0)
        map_.fail(n.loc, "modules '" + S_.modules[chosen].path + "' (imported at " +
                             describe_loc(imported_[chosen]) + ") and '" + mod.path +
                             "' are members of the same <union>: import one of them");
      chosen = m;
    }
    imported_[m] = n.loc;
    is_imported_[m] = true;

    // Arguments: each names a parameter of this module; its tokens must fit the slot.
    std::vector<std::vector<int32_t>> args(mod.params.size());
    std::vector<bool> given(mod.params.size(), false);
    std::vector<Loc> arg_loc(mod.params.size());
    std::unordered_map<std::string_view, int> param_of;
    for (size_t k = 0; k < mod.params.size(); ++k) param_of.emplace(mod.params[k].name, int(k));
    for (const Node::Arg& a : n.args) {
      const auto found = param_of.find(a.name);
      const int p = found == param_of.end() ? -1 : found->second;
      if (p < 0) {
        std::string have;
        for (const Param& q : mod.params) have += (have.empty() ? "" : ", ") + q.name;
        map_.fail(a.loc, "module '" + mod.path + "' has no parameter '" + a.name + "'" +
                             (have.empty() ? " (it has none)" : " (it has: " + have + ")"));
      }
      args[p] = enc_.text(a.value);
      given[p] = true;
      arg_loc[p] = a.loc;
      const Param& q = mod.params[p];
      if (static_cast<int64_t>(args[p].size()) > q.length)
        map_.fail(a.loc, "argument for parameter '" + q.name + "' of module '" + mod.path + "' is " +
                             std::to_string(args[p].size()) + " tokens; its slot holds " +
                             std::to_string(q.length));
    }
    add_module(m, given, n.loc);
    for (size_t k = 0; k < mod.params.size(); ++k) {
      if (!given[k]) continue;
      PlanItem it;
      it.kind = PlanItem::Kind::kTokens;
      it.module = m;
      it.param = static_cast<int>(k);
      it.loc = arg_loc[k];
      const int32_t n_tok = static_cast<int32_t>(args[k].size());
      it.tokens = std::move(args[k]);
      if (n_tok > 0) it.spans.push_back({0, n_tok, mod.params[k].slot, mod.params[k].slot});
      P_.n_computed_tokens += n_tok;
      P_.items.push_back(std::move(it));
    }
    body(n.children, m);
  }

  [[noreturn]] void unknown_module(const Node& n, int scope) const {
    std::string msg = "unknown module '" + n.name + "' in " + scope_name(scope);
    // A nested module named at the wrong level: say where it lives.
    for (size_t i = 1; i < S_.modules.size(); ++i) {
      const ModuleLayout& x = S_.modules[i];
      if (x.name != n.name) continue;
      std::string open, close;
      for (int a : S_.chain(x.parent)) {
        if (a == 0) continue;
        open += "<" + S_.modules[a].name + ">";
        close = "</" + S_.modules[a].name + ">" + close;
      }
      msg += "; it is '" + x.path + "': import it as " + open + "<" + n.name + "/>" + close;
      break;
    }
    map_.fail(n.loc, msg);
  }

  // Module m with the placeholders of the given slots left out.
  void add_module(int m, const std::vector<bool>& given, Loc loc) {
    const ModuleLayout& mod = S_.modules[m];
    PlanItem it;
    it.kind = PlanItem::Kind::kModule;
    it.module = m;
    it.cache = mod.cache;
    it.loc = loc;
    std::vector<bool> skip(mod.tokens.size(), false);
    for (size_t k = 0; k < given.size(); ++k)
      if (given[k])
        for (int32_t t = mod.params[k].begin; t < mod.params[k].end; ++t) skip[t] = true;
    for (int32_t t = 0; t < static_cast<int32_t>(mod.tokens.size()); ++t) {
      if (skip[t]) continue;
      const bool extend = !it.spans.empty() && it.spans.back().end == t &&
                          mod.positions[t] == mod.positions[t - 1] + 1;
      if (extend) ++it.spans.back().end;
      else it.spans.push_back({t, t + 1, mod.positions[t], mod.positions[t]});
    }
    P_.n_module_tokens += it.n_tokens();
    P_.modules.push_back(m);
    P_.items.push_back(std::move(it));
  }

  void add_text(const std::vector<int32_t>& toks, Loc loc) {
    if (toks.empty()) return;
    const bool merge = !P_.items.empty() && P_.items.back().kind == PlanItem::Kind::kTokens &&
                       P_.items.back().param < 0;
    if (!merge) {
      PlanItem it;
      it.kind = PlanItem::Kind::kTokens;
      it.loc = loc;
      it.spans.push_back({0, 0, text_pos_, text_pos_});
      P_.items.push_back(std::move(it));
    }
    PlanItem& it = P_.items.back();
    it.tokens.insert(it.tokens.end(), toks.begin(), toks.end());
    it.spans.back().end = static_cast<int32_t>(it.tokens.size());
    text_pos_ += static_cast<int32_t>(toks.size());
    P_.n_computed_tokens += static_cast<int32_t>(toks.size());
  }

  const PromptDoc& doc_;
  const SchemaLayout& S_;
  const Encoder& enc_;
  SourceMap map_;                 // only for raising errors with the prompt's source name
  std::vector<Loc> imported_;     // per module: where imported
  std::vector<bool> is_imported_; // per module: imported by an element of the prompt
  std::vector<int> union_choice_; // per union: the member imported, -1 if none
  PromptPlan P_;
  int32_t text_pos_ = 0;          // next schema-mode position for prompt text
};

}  // namespace

int32_t PlanItem::n_tokens() const {
  int32_t n = 0;
  for (const PlanSpan& s : spans) n += s.end - s.begin;
  return n;
}

PromptPlan plan_prompt(const PromptDoc& doc, const SchemaLayout& schema, const Encoder& enc) {
  return Planner(doc, schema, enc).run();
}

PromptPlan plan_prompt(std::string_view text, const SchemaLayout& schema, const Encoder& enc,
                       std::string_view source) {
  return plan_prompt(parse_prompt(text, source), schema, enc);
}

PromptPlan plan_prompt(std::string_view text, const SchemaLookup& find, const Encoder& enc,
                       std::string_view source) {
  const PromptDoc doc = parse_prompt(text, source);
  const SchemaLayout* s = find ? find(doc.schema) : nullptr;
  if (!s) throw PmlError(doc.source, doc.schema_loc, "unknown schema '" + doc.schema + "'");
  return plan_prompt(doc, *s, enc);
}

std::vector<int32_t> plan_tokens(const PromptPlan& plan, const SchemaLayout& schema) {
  std::vector<int32_t> out;
  for (const PlanItem& it : plan.items) {
    if (it.kind == PlanItem::Kind::kTokens) {
      out.insert(out.end(), it.tokens.begin(), it.tokens.end());
      continue;
    }
    const std::vector<int32_t>& t = schema.modules[it.module].tokens;
    for (const PlanSpan& sp : it.spans) out.insert(out.end(), t.begin() + sp.begin, t.begin() + sp.end);
  }
  return out;
}

}  // namespace pc::pml
