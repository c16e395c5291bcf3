// Assembly: a sequence's plan resolved against the caches into runs of cached KV and
// tokens to compute (engine/sequence.h), and the module requests that make missing
// modules ready — a tier load, or an encoding sequence the engine batches like any
// prompt.
//
// A module's encoding is itself a plan: its context (the first tokens of the
// enclosing modules, each a kModule span) followed by one computed span per own
// segment, each starting on a fresh page. So an encoding waits for its context
// modules exactly as a request waits for its modules.
#include <algorithm>
#include <set>

#include "engine/approximate/approximate_reuse.h"
#include "engine/engine.h"
#include "engine/kv_tiers.h"
#include "engine/module_cache.h"
#include "engine/prefix_cache.h"
#include "engine/approximate/recompute_policy.h"
#include "engine/sequence.h"
#include "common/error.h"
#include "common/stopwatch.h"

namespace pc {

bool Engine::note_if_missing(Seq& s, const KvSpan& span, std::vector<int32_t>* missing) {
  const ModuleSpec& m = s.spec(span.module);
  if (!modules_->peek(s.ns, m)) {
    if (std::find(missing->begin(), missing->end(), span.module) == missing->end())
      missing->push_back(span.module);
    return false;
  }
  return true;
}

// A PML module span whose KV saw everything before it in the prompt: only module spans
// come before it, as many tokens as its context and its own earlier tokens.
static bool sees_all_before(const KvPlan& plan, size_t i, int32_t t) {
  const KvSpan& span = plan.spans[i];
  const ModuleSpec& m = (*plan.modules)[span.module];
  int32_t visible = span.begin;
  for (const ModuleSpec::Context& c : m.context) visible += c.n_tokens;
  for (size_t j = 0; j < i; ++j)
    if (plan.spans[j].kind != KvSpan::Kind::kModule && plan.spans[j].n_tokens() > 0) return false;
  return visible == t;
}

int32_t Engine::attach_prefix(Seq& s, std::span<const int32_t> tokens, bool whole) {
  PrefixHit h = prefix_->attach(s.ns, tokens, whole, s.recurrent.empty() ? nullptr : &s.recurrent);
  s.table = std::move(h.table);
  s.lease = std::move(h.lease);
  s.n_kv = h.length;
  if (h.length > 0) {
    Run r = make_run(true, 0, h.length);
    r.attached = true;
    s.runs.push_back(std::move(r));
  }
  return h.length;
}

bool Engine::assemble(Seq& s) {
  ScopedMs timer(s.result.timings.assemble_ms);
  auto release = [&s] {
    s.runs.clear();
    s.run = 0;
    s.n_kv = 0;
    s.table.release();
    s.hold.release();
    s.lease.reset();
    // s.recurrent stays: the state after tokens [0, its n_tokens()), which attach
    // keeps (a parked sequence resuming where it stopped) or replaces.
  };
  // Out of pages for copies: everything let go, the next step tries again.
  auto retry_later = [&] {
    release();
    s.state = Seq::State::kWaiting;
    return false;
  };
  release();
  // Every module must be ready before anything is referenced.
  std::vector<int32_t> missing;
  for (const KvSpan& span : s.plan.spans)
    if (span.kind == KvSpan::Kind::kModule) note_if_missing(s, span, &missing);
  if (!missing.empty()) {
    for (int32_t m : missing) request_module(s, m, s.ns);
    s.state = Seq::State::kWaiting;
    return false;
  }
  const bool first = !s.assembled_once;
  int64_t cached = 0, computed = 0;
  std::set<int32_t> hit_modules;
  int32_t t = 0;
  std::vector<ReuseCandidate> cands;  // approximate PML reuse: module spans for the policy
  if (s.prefix_plan) {
    // The plan is a token sequence from position 0: it is one prefix, all of its tokens
    // so far (a resumed sequence's generated ones too) but the last, which is always
    // computed. The rest is computed, or reused approximately when asked.
    const int32_t exact = attach_prefix(s, s.tokens, /*whole=*/true);
    cached = exact;
    computed = s.n_prompt - exact;
    if (s.req.reuse.mode == CacheReuse::kApproximate && s.kind == Seq::Kind::kRequest) {
      if (!approximate_->assemble(s, exact, {})) return retry_later();  // no pages to relocate into
      if (first) computed -= s.result.n_approximate;
    } else {
      s.runs.push_back(make_run(false, exact, int32_t(s.tokens.size())));
    }
    if (first && !s.plan.blocks.empty())
      s.result.n_reusable = prefix_->reusable_tokens(s.ns, s.tokens, s.plan.blocks, exact);
    t = int32_t(s.tokens.size());
  } else {
    // A PML plan: spans resolved in order; a kPrefix span (first, if any) covers its own
    // tokens only, all of which may come from the cache (the prompt goes on after it).
    for (size_t i = 0; i < s.plan.spans.size(); ++i) {
      const KvSpan& span = s.plan.spans[i];
      const int32_t n = span.n_tokens();
      if (n == 0) continue;
      switch (span.kind) {
        case KvSpan::Kind::kPrefix: {
          if (t != 0) throw Error("a kPrefix span must come first in a plan");
          const int32_t hit = attach_prefix(s, span.tokens, /*whole=*/false);
          if (hit < n) s.runs.push_back(make_run(false, hit, n));
          cached += hit;
          computed += n - hit;
          break;
        }
        case KvSpan::Kind::kModule: {
          Run r = make_run(true, t, t + n);
          const ModuleSpec& m = s.spec(span.module);
          // Approximate reuse asked for: a module that did not see everything before it
          // is a candidate for the recompute policy (never the prompt's last token).
          const bool candidate = s.req.reuse.mode == CacheReuse::kApproximate && s.kind == Seq::Kind::kRequest &&
                                 t + n < int32_t(s.tokens.size()) && !sees_all_before(s.plan, i, t);
          // Evicted meanwhile, or no page left to relocate into: try again next step.
          if (!modules_->take(s.ns, m, span.begin, span.end, span.shift, s.hold, r.pages)) return retry_later();
          const bool mine = std::find(s.encoded_by_me.begin(), s.encoded_by_me.end(), span.module) !=
                            s.encoded_by_me.end();
          if (!mine) hit_modules.insert(span.module);
          if (candidate) {
            ReuseCandidate c{t, t + n, {}, 0};
            for (const PageEntry& e : r.pages) c.src.push_back({e.page, 0, e.filled});
            cands.push_back(std::move(c));
          } else {
            if (!mine) cached += n;
            s.runs.push_back(std::move(r));
          }
          break;
        }
        case KvSpan::Kind::kCompute:
          Run r = make_run(false, t, t + n);
          r.fresh_page = s.kind == Seq::Kind::kEncode;
          s.runs.push_back(std::move(r));
          computed += n;
          break;
      }
      t += n;
    }
    // A resumed sequence's generated tokens.
    if (t < int32_t(s.tokens.size())) s.runs.push_back(make_run(false, t, int32_t(s.tokens.size())));
    if (!cands.empty()) {
      if (!approximate_->assemble(s, t, std::move(cands))) return retry_later();  // no pages for the copies
      if (first) computed += s.result.n_recomputed;
    }
    // Modules that are not cached live only as long as the sequences holding them.
    for (const KvSpan& span : s.plan.spans)
      if (span.kind == KvSpan::Kind::kModule && !s.spec(span.module).cache) modules_->drop(s.ns, s.spec(span.module).digest);
  }
  s.state = Seq::State::kRunning;
  if (first && s.kind == Seq::Kind::kRequest) {
    s.assembled_once = true;
    for (int32_t m : s.encoded_by_me) computed += int64_t(s.spec(m).tokens.size());
    for (int32_t m : hit_modules) modules_->use(s.ns, s.spec(m));
    s.result.n_cached = cached;
    s.result.n_computed = computed;
    s.result.n_module_hits = int64_t(hit_modules.size());
    s.result.n_module_misses = int64_t(s.encoded_by_me.size());
    stats_.cached_tokens += cached;
    stats_.computed_tokens += computed;
  }
  s.assembled_once = true;
  return true;
}

void Engine::request_module(Seq& s, int32_t module, const KvNamespace& ns) {
  const ModuleSpec& spec = s.spec(module);
  if (modules_->pending(ns, spec.digest)) return;  // being encoded or loaded for someone
  const int64_t owner = s.kind == Seq::Kind::kEncode ? s.owner : s.id;
  if (tiers_ && spec.cache) {
    // A lower tier may have it (encoded before a restart, or by another server).
    KvTiers::Segments segs;
    for (int32_t i = 0; i < spec.n_segments(); ++i) segs.emplace_back(spec.cuts[i], spec.cuts[i + 1]);
    modules_->set_pending(ns, spec.digest, {true, 0});
    std::shared_ptr<const ModuleSet> set = s.plan.modules;
    tiers_->load_module_async(ns, spec.digest, spec.tokens, segs,
                              [this, owner, set, module, ns](RestoredModule* got) {
                                const ModuleSpec& m = (*set)[module];
                                modules_->clear_pending(ns, m.digest);
                                if (!got) {
                                  start_encoding(owner, set, module, ns);
                                  return;
                                }
                                ModuleEntry e;
                                for (int32_t i = 0; i < m.n_segments(); ++i)
                                  e.segments.push_back(ModuleSegment{m.cuts[i], m.cuts[i + 1], got->segments[i]});
                                modules_->store(ns, m, std::move(e), /*write_through=*/false);
                                got->hold.release();
                                if (auto it = active_.find(owner); it != active_.end())
                                  it->second->result.n_promoted += int64_t(m.tokens.size());
                              });
    return;
  }
  start_encoding(owner, s.plan.modules, module, ns);
}

void Engine::start_encoding(int64_t owner, std::shared_ptr<const ModuleSet> set, int32_t module,
                            const KvNamespace& ns) {
  const ModuleSpec& spec = (*set)[module];
  GenerateRequest req;
  req.max_tokens = 0;
  req.scope = ns.scope;
  Seq& e = new_seq(req, nullptr);
  e.kind = Seq::Kind::kEncode;
  e.ns = ns;
  e.module = module;
  e.owner = owner;
  e.plan.modules = set;
  for (const ModuleSpec::Context& c : spec.context) {
    if (c.n_tokens == 0) continue;
    KvSpan span;
    span.kind = KvSpan::Kind::kModule;
    span.module = c.module;
    span.begin = 0;
    span.end = c.n_tokens;
    e.plan.spans.push_back(span);
    const ModuleSpec& cm = (*set)[c.module];
    e.tokens.insert(e.tokens.end(), cm.tokens.begin(), cm.tokens.begin() + c.n_tokens);
    e.positions.insert(e.positions.end(), cm.positions.begin(), cm.positions.begin() + c.n_tokens);
  }
  for (int32_t i = 0; i < spec.n_segments(); ++i) {
    KvSpan span;
    span.kind = KvSpan::Kind::kCompute;
    span.tokens.assign(spec.tokens.begin() + spec.cuts[i], spec.tokens.begin() + spec.cuts[i + 1]);
    span.positions.assign(spec.positions.begin() + spec.cuts[i], spec.positions.begin() + spec.cuts[i + 1]);
    e.plan.spans.push_back(std::move(span));
  }
  e.tokens.insert(e.tokens.end(), spec.tokens.begin(), spec.tokens.end());
  e.positions.insert(e.positions.end(), spec.positions.begin(), spec.positions.end());
  e.n_prompt = int32_t(e.tokens.size());
  modules_->set_pending(ns, spec.digest, {false, e.id});
  ++stats_.module_encodes;
  assemble(e);
}

// The encoding sequence computed every own segment: store the module.
void Engine::finish_encoding(Seq& e) {
  const ModuleSpec& spec = e.spec(e.module);
  ModuleEntry entry;
  const auto entries = e.table.entries();
  std::vector<int32_t> starts;
  for (const Run& r : e.runs)
    if (!r.cached && r.fresh_page) starts.push_back(r.first_entry);
  for (int32_t i = 0; i < spec.n_segments(); ++i) {
    const size_t b = size_t(starts[i]);
    const size_t end = i + 1 < int32_t(starts.size()) ? size_t(starts[i + 1]) : entries.size();
    ModuleSegment seg{spec.cuts[i], spec.cuts[i + 1], {}};
    seg.entries.assign(entries.begin() + b, entries.begin() + end);
    entry.segments.push_back(std::move(seg));
  }
  modules_->store(e.ns, spec, std::move(entry), /*write_through=*/spec.cache);
  modules_->clear_pending(e.ns, spec.digest);
  if (auto it = active_.find(e.owner); it != active_.end()) it->second->encoded_by_me.push_back(e.module);
  finish(e, FinishReason::kLength);
}

}  // namespace pc
