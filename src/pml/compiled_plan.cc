#include "pml/compiled_plan.h"

#include <algorithm>

#include "common/error.h"

namespace pc::pml {

namespace {

// Segment boundaries of a module's own tokens: parameter placeholder boundaries and
// position jumps, [0, ..., n].
std::vector<int32_t> segment_cuts(const ModuleLayout& m) {
  std::vector<int32_t> cuts{0, int32_t(m.tokens.size())};
  for (const Param& p : m.params) {
    cuts.push_back(p.begin);
    cuts.push_back(p.end);
  }
  for (size_t i = 1; i < m.positions.size(); ++i)
    if (m.positions[i] != m.positions[i - 1] + 1) cuts.push_back(int32_t(i));
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  return cuts;
}

}  // namespace

std::shared_ptr<const ModuleSet> module_set(const SchemaLayout& schema) {
  auto set = std::make_shared<ModuleSet>();
  set->reserve(schema.modules.size());
  for (const ModuleLayout& m : schema.modules) {
    ModuleSpec s;
    s.path = m.path;
    s.schema = schema.name;
    s.digest = m.digest;
    s.tokens = m.tokens;
    s.positions = m.positions;
    s.cuts = segment_cuts(m);
    for (const ContextRef& c : m.context) s.context.push_back({int32_t(c.module), c.n_tokens});
    s.cache = m.cache;
    s.pin = m.pin;
    s.ttl_seconds = m.ttl_seconds;
    set->push_back(std::move(s));
  }
  return set;
}

KvPlan kv_plan(const PromptPlan& plan, std::shared_ptr<const ModuleSet> modules) {
  KvPlan out;
  const bool compact = plan.layout == LayoutMode::kCompact;
  for (const PlanItem& item : plan.items) {
    if (item.kind == PlanItem::Kind::kTokens) {
      for (const PlanSpan& sp : item.spans) {
        KvSpan s;
        s.kind = KvSpan::Kind::kCompute;
        s.tokens.assign(item.tokens.begin() + sp.begin, item.tokens.begin() + sp.end);
        for (int32_t k = 0; k < sp.end - sp.begin; ++k) s.positions.push_back(sp.pos + k);
        out.spans.push_back(std::move(s));
      }
      continue;
    }
    const ModuleSpec& m = (*modules)[item.module];
    // A plan span is a union of whole segments; each becomes one kModule span.
    for (const PlanSpan& sp : item.spans) {
      KvSpan s;
      s.kind = KvSpan::Kind::kModule;
      s.module = item.module;
      s.begin = sp.begin;
      s.end = sp.end;
      s.shift = compact ? sp.pos - sp.schema_pos : 0;
      const bool whole = std::binary_search(m.cuts.begin(), m.cuts.end(), sp.begin) &&
                         std::binary_search(m.cuts.begin(), m.cuts.end(), sp.end);
      if (!whole) throw Error("internal: a PML plan span does not cover whole module segments");
      if (s.end > s.begin) out.spans.push_back(std::move(s));
    }
  }
  out.modules = std::move(modules);
  if (out.spans.empty()) throw Error("the PML prompt has no tokens");
  if (out.spans.back().kind == KvSpan::Kind::kModule)
    // The last token is computed to produce logits, attending to the whole plan.
    throw Error("the PML prompt must end with text (e.g. <user>...</user> or <assistant/>) after its last import");
  return out;
}

KvPlan kv_plan(const PromptPlan& plan, const SchemaLayout& schema) {
  return kv_plan(plan, module_set(schema));
}

}  // namespace pc::pml
