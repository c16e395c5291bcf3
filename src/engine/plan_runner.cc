// PML execution: module encoding, the module store, and assembling a prompt's
// execution plan into a sequence (see engine.h and pml/plan.h).
//
// A module's KV is stored as segments — runs of its own tokens at consecutive
// positions with no parameter boundary inside — each starting on a fresh page,
// so a plan can include or skip any segment (a filled parameter's placeholder)
// and reference the pages as they are. Assembly appends, in plan order, the
// included segments' pages (by reference) and the plan's uncached tokens
// (computed over everything before them).
#include <algorithm>
#include <cmath>

#include "engine/engine.h"
#include "engine/engine_internal.h"
#include "engine/kv_tiers.h"
#include "gguf/error.h"
#include "kv/kv_storage.h"
#include "model/model.h"
#include "model/relocate.h"
#include "pml/layout.h"
#include "pml/plan.h"

namespace pc {

struct Engine::PlanBuild {
  int64_t hits = 0;              // plan modules found in the store
  int64_t misses = 0;            // modules encoded (plan modules and their context)
  int64_t cached = 0;            // plan tokens whose KV came from the store
  int64_t computed = 0;          // tokens computed (module encodings + uncached runs)
  int64_t promoted = 0;          // module tokens restored from a lower tier
};

namespace {

// Cut points of a module's own tokens: parameter placeholder boundaries and
// position jumps. Returns [b0=0, b1, ..., n].
std::vector<int32_t> segment_cuts(const pml::ModuleLayout& m) {
  std::vector<int32_t> cuts{0, int32_t(m.tokens.size())};
  for (const pml::Param& p : m.params) {
    cuts.push_back(p.begin);
    cuts.push_back(p.end);
  }
  for (size_t i = 1; i < m.positions.size(); ++i)
    if (m.positions[i] != m.positions[i - 1] + 1) cuts.push_back(int32_t(i));
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  return cuts;
}

// The entries holding the first n tokens of a segment.
std::vector<PageEntry> prefix_entries(const ModuleSegment& seg, int32_t n) {
  std::vector<PageEntry> out;
  for (const PageEntry& e : seg.entries) {
    if (n <= 0) break;
    out.push_back({e.page, std::min(e.filled, n)});
    n -= out.back().filled;
  }
  return out;
}

}  // namespace

const float* Engine::compute(PageTable& table, std::span<const int32_t> tokens,
                             std::span<const int32_t> positions, bool want_logits) {
  const float* logits = nullptr;
  std::vector<int32_t> ids, fills;
  std::vector<BatchEntry> batch;
  size_t done = 0;
  while (done < tokens.size()) {
    const int32_t n = int32_t(std::min<size_t>(opt_.max_batch_tokens, tokens.size() - done));
    const int32_t base = table.n_tokens();
    if (!table.prepare_append(n))
      throw Error("out of KV memory while computing " + std::to_string(tokens.size()) +
                  " tokens; raise --kv-memory");
    const SeqKv kv = seq_kv(table, ids, fills);
    batch.clear();
    for (int32_t j = 0; j < n; ++j)
      batch.push_back(BatchEntry{tokens[done + j], positions[done + j], 0, base + j, j + 1 == n});
    logits = fwd_->run(batch, std::span<const SeqKv>(&kv, 1));
    done += n;
  }
  return want_logits ? logits : nullptr;
}

// Encodes module m over its context. The returned table holds the references
// that keep the segments' pages (and the context's) alive until the caller has
// stored or attached them.
ModuleEntry Engine::encode_module(const pml::SchemaLayout& schema, int m, const KvNamespace& ns,
                                  PlanBuild* st) {
  const pml::ModuleLayout& M = schema.modules[m];
  PageTable table(*pages_);
  for (const pml::ContextRef& c : M.context) {
    // ensure_module returns a copy; attaching right away takes sequence
    // references, so a later eviction cannot free these pages.
    const ModuleEntry anc = ensure_module(schema, c.module, ns, st);
    int32_t left = c.n_tokens;
    for (const ModuleSegment& seg : anc.segments) {
      if (left <= 0) break;
      const int32_t take = std::min(left, seg.tok_end - seg.tok_begin);
      const std::vector<PageEntry> es = prefix_entries(seg, take);
      table.attach(es);
      left -= take;
    }
  }
  ModuleEntry out;
  out.path = M.path;
  const std::vector<int32_t> cuts = segment_cuts(M);
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    const int32_t b = cuts[i], e = cuts[i + 1];
    if (b == e) continue;
    table.seal();
    const size_t first = table.entries().size();
    compute(table, std::span<const int32_t>(M.tokens).subspan(b, e - b),
            std::span<const int32_t>(M.positions).subspan(b, e - b), false);
    ModuleSegment seg{b, e, {}};
    const auto entries = table.entries();
    seg.entries.assign(entries.begin() + first, entries.end());
    out.segments.push_back(std::move(seg));
  }
  st->computed += int64_t(M.tokens.size());
  ++st->misses;
  // Keep the segment pages alive until stored/attached: hand the references to
  // a holder the caller releases (see hold_).
  held_.push_back(std::move(table));
  return out;
}

// Inserts an encoded (or restored) module with its PML policy: pin, ttl.
void Engine::store_module(const ModuleKey& key, const pml::ModuleLayout& M, ModuleEntry e) {
  if (M.ttl_seconds > 0)
    e.expires = ModuleEntry::Clock::now() +
                std::chrono::duration_cast<ModuleEntry::Clock::duration>(std::chrono::duration<double>(M.ttl_seconds));
  modules_->insert(key, std::move(e));
  if (M.pin) modules_->pin(key);
}

ModuleEntry Engine::ensure_module(const pml::SchemaLayout& schema, int m, const KvNamespace& ns,
                                  PlanBuild* st, bool* hit) {
  const pml::ModuleLayout& M = schema.modules[m];
  const ModuleKey key{ns, M.digest, 0};
  if (hit) *hit = false;
  if (M.cache) {
    if (const ModuleEntry* e = modules_->find(key)) {
      if (hit) {  // a module of the plan itself (context lookups are not counted)
        ++st->hits;
        *hit = true;
      }
      return *e;
    }
  }
  if (M.cache && tiers_) {
    // A lower tier may have it (encoded before a restart, or by another server).
    KvTiers::Segments segs;
    const std::vector<int32_t> cuts = segment_cuts(M);
    for (size_t i = 0; i + 1 < cuts.size(); ++i)
      if (cuts[i] < cuts[i + 1]) segs.emplace_back(cuts[i], cuts[i + 1]);
    ModuleEntry e;
    if (tiers_->load_module(ns, M.digest, M.tokens, segs, &e, &held_)) {
      e.path = M.path;
      if (hit) {
        ++st->hits;
        *hit = true;
        st->promoted += e.n_tokens();
      }
      store_module(key, M, e);
      return e;
    }
  }
  ModuleEntry e = encode_module(schema, m, ns, st);
  if (M.cache) {
    store_module(key, M, e);
    if (tiers_) tiers_->save_module(ns, M.digest, M.tokens, e);
  }
  return e;
}

// A copy of a segment's pages moved by `shift` positions (model/relocate.h),
// held by held_ until attached.
std::vector<PageEntry> Engine::relocate(const ModuleSegment& seg, int32_t shift) {
  PageTable table(*pages_);
  for (const PageEntry& e : seg.entries) {
    table.seal();
    if (!table.prepare_append(e.filled)) throw Error("out of KV memory while relocating a module");
    const int32_t dst = table.entries().back().page;
    kv_->copy_slots(dst, e.page, e.filled);
    shift_positions(model_, *kv_, dst, e.filled, shift);
  }
  std::vector<PageEntry> out(table.entries().begin(), table.entries().end());
  held_.push_back(std::move(table));
  return out;
}

// A segment's pages moved by `shift`: cached in the module store under
// {digest, shift} (one entry per shift, holding the segments relocated so far),
// so a compact prompt repeated pays for the rotation once. Relocation is
// deterministic, so a cached copy equals a fresh one bit for bit.
std::vector<PageEntry> Engine::relocated(const pml::ModuleLayout& M, const ModuleSegment& seg,
                                         int32_t shift, const KvNamespace& ns) {
  const ModuleKey key{ns, M.digest, shift};
  ModuleEntry entry;
  if (M.cache && modules_->entries().count(key)) {  // peek first: no miss counted
    entry = *modules_->find(key);
    for (const ModuleSegment& r : entry.segments)
      if (r.tok_begin == seg.tok_begin) return r.entries;
  }
  std::vector<PageEntry> out = relocate(seg, shift);
  if (M.cache) {
    const bool fresh = entry.segments.empty();
    entry.path = M.path + " (shifted " + std::to_string(shift) + ")";
    entry.segments.push_back(ModuleSegment{seg.tok_begin, seg.tok_end, out});
    if (fresh) {
      store_module(key, M, std::move(entry));  // the module's pin and ttl apply to its copies
    } else {
      modules_->insert(key, std::move(entry));  // keeps its pins and expiry
    }
  }
  return out;
}

void Engine::build_plan(Seq& s, const pml::SchemaLayout& schema, const pml::PromptPlan& plan) {
  PlanBuild st;
  const bool compact = plan.layout == pml::LayoutMode::kCompact;
  // Uncached runs after the last module are left to step() (batched prefill);
  // earlier ones are computed here, in plan order.
  size_t tail = plan.items.size();
  while (tail > 0 && plan.items[tail - 1].kind == pml::PlanItem::Kind::kTokens) --tail;
  auto add_tokens = [&](std::span<const int32_t> toks, int32_t pos0) {
    for (size_t k = 0; k < toks.size(); ++k) {
      s.tokens.push_back(toks[k]);
      s.positions.push_back(pos0 + int32_t(k));
    }
  };
  try {
    for (size_t i = 0; i < plan.items.size(); ++i) {
      const pml::PlanItem& item = plan.items[i];
      if (item.kind == pml::PlanItem::Kind::kTokens) {
        for (const pml::PlanSpan& sp : item.spans) {
          const auto toks = std::span<const int32_t>(item.tokens).subspan(sp.begin, sp.end - sp.begin);
          const size_t first = s.tokens.size();
          add_tokens(toks, sp.pos);
          if (i < tail) {
            compute(s.table, toks, std::span<const int32_t>(s.positions).subspan(first), false);
            s.n_kv += int32_t(toks.size());
          }
          st.computed += int64_t(toks.size());
        }
        continue;
      }
      const pml::ModuleLayout& M = schema.modules[item.module];
      bool hit = false;
      const ModuleEntry e = ensure_module(schema, item.module, s.ns, &st, &hit);
      for (const ModuleSegment& seg : e.segments) {
        // Included when a plan span covers it (spans are unions of segments).
        const pml::PlanSpan* span = nullptr;
        for (const pml::PlanSpan& sp : item.spans)
          if (sp.begin <= seg.tok_begin && seg.tok_end <= sp.end) span = &sp;
        if (!span) continue;
        const int32_t shift = compact ? span->pos - span->schema_pos : 0;
        const std::vector<PageEntry> es = shift ? relocated(M, seg, shift, s.ns) : seg.entries;
        s.table.attach(es);
        const int32_t pos0 = (compact ? span->pos : span->schema_pos) + (seg.tok_begin - span->begin);
        add_tokens(std::span<const int32_t>(M.tokens).subspan(seg.tok_begin, seg.tok_end - seg.tok_begin), pos0);
        s.n_kv += seg.tok_end - seg.tok_begin;
        if (hit) st.cached += seg.tok_end - seg.tok_begin;
      }
    }
  } catch (...) {
    held_.clear();
    throw;
  }
  held_.clear();  // stored entries and the sequence's table now hold the pages
  if (s.tokens.empty()) throw Error("the PML prompt has no tokens");
  if (s.n_kv == int32_t(s.tokens.size())) {
    // The plan ends with a module: its last token is recomputed to produce
    // logits (it attends to the whole plan, like any uncached token).
    throw Error("the PML prompt must end with text (e.g. <user>...</user> or <assistant/>) after its last import");
  }
  s.plan = true;
  s.n_prompt = int32_t(s.tokens.size());
  s.result.n_prompt = s.n_prompt;
  s.result.n_cached = st.cached;
  s.result.n_computed = st.computed;
  s.result.n_module_hits = st.hits;
  s.result.n_module_misses = st.misses;
  s.result.n_promoted = st.promoted;
  ++stats_.requests;
  stats_.prompt_tokens += s.n_prompt;
  stats_.cached_tokens += st.cached;
  stats_.computed_tokens += st.computed;
}

int64_t Engine::add_plan(const pml::SchemaLayout& schema, const pml::PromptPlan& plan,
                         const GenerateRequest& req, TokenCallback on_token) {
  Seq& s = new_seq(req, std::move(on_token));
  try {
    build_plan(s, schema, plan);
  } catch (...) {
    s.table.release();
    active_.erase(s.id);
    throw;
  }
  return s.id;
}

GenerateResult Engine::generate_plan(const pml::SchemaLayout& schema, const pml::PromptPlan& plan,
                                     const GenerateRequest& req, const TokenCallback& on_token) {
  return wait(add_plan(schema, plan, req, on_token));
}

std::vector<float> Engine::plan_logits(const pml::SchemaLayout& schema, const pml::PromptPlan& plan,
                                       const std::string& tenant) {
  Seq s(*pages_, SamplingParams{});
  s.ns = ns(tenant);
  build_plan(s, schema, plan);
  const float* l = compute(s.table, std::span<const int32_t>(s.tokens).subspan(s.n_kv),
                           std::span<const int32_t>(s.positions).subspan(s.n_kv), true);
  std::vector<float> out(l, l + model_.config().n_vocab);
  s.table.release();
  return out;
}

int64_t Engine::preload(const pml::SchemaLayout& schema, const std::string& tenant) {
  PlanBuild st;
  for (size_t m = 0; m < schema.modules.size(); ++m)
    if (schema.modules[m].cache) ensure_module(schema, int(m), ns(tenant), &st);
  held_.clear();
  return st.computed;
}

}  // namespace pc
