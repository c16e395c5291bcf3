// The engine's sequence lifecycle: construction, adding requests and plans,
// finishing, sampling, and the synchronous helpers built on step().
#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "engine/approximate/approximate_reuse.h"
#include "engine/cache_admin.h"
#include "engine/grammar_cache.h"
#include "engine/kv_tiers.h"
#include "engine/module_cache.h"
#include "engine/prefix_cache.h"
#include "engine/sequence.h"
#include "common/error.h"
#include "kernels/thread_pool.h"
#include "kv/kv_storage.h"
#include "kv/page_pool.h"
#include "model/forward.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace pc {

namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

KvShape kv_shape(const Model& m, int page_size, KvType kv_type) {
  const ModelConfig& c = m.config();
  return KvShape{int(c.n_layer), int(c.n_kv_head), int(c.head_dim), page_size, kv_type};
}

}  // namespace

// When the pool runs out of pages: least recently used prefix entries first, then
// least recently used modules (both through kv/lru_heap.h).
struct Engine::Reclaimer : PageReclaimer {
  Reclaimer(PrefixCache& p, ModuleCache& m) : prefix(p), modules(m) {}
  size_t reclaim(size_t bytes) override {
    size_t freed = prefix.reclaim(bytes);
    if (freed < bytes) freed += modules.reclaim(bytes - freed);
    return freed;
  }
  PrefixCache& prefix;
  ModuleCache& modules;
};

Engine::Engine(const Model& model, const EngineOptions& opt)
    : model_(model), opt_(opt), pool_(std::make_unique<ThreadPool>(opt.threads)) {
  if (opt.max_batch_tokens < 1) throw Error("max_batch_tokens must be at least 1");
  const KvShape shape = kv_shape(model, opt.page_size, opt.kv_type);
  if (shape.row_bytes() == 0)
    throw Error(std::string("--kv-type ") + kv_type_name(opt.kv_type) + " cannot store this model's heads of " +
                std::to_string(shape.head_dim) + " dimensions (needs a multiple of 32, or 8 or 16); use f16");
  const int32_t n_pages = PagePool::pages_for_bytes(shape, uint64_t(std::max<int64_t>(0, opt.kv_memory_bytes)));
  if (n_pages < 1)
    throw Error("--kv-memory " + std::to_string(opt.kv_memory_bytes) +
                " bytes holds no KV page (one page of " + std::to_string(opt.page_size) +
                " tokens needs " + std::to_string(shape.bytes_per_page()) + " bytes)");
  kv_ = std::make_unique<KvStorage>(shape, n_pages);
  pages_ = std::make_unique<PagePool>(*kv_);
  // Models with recurrent layers keep no per-token KV in those layers: a cached prefix
  // resumes only where a state snapshot is stored with it (engine/state_snapshots.h),
  // and the tiers carry each snapshot beside its prefix's chain (docs/tiers.md).
  const bool recurrent = model.config().n_recurrent > 0;
  prefix_ = std::make_unique<PrefixCache>(*pages_, opt.prefix_cache,
                                          recurrent ? int64_t(RecurrentState(model.config()).data().size()) : 0);
  modules_ = std::make_unique<ModuleCache>(*pages_, model);
  reclaimer_ = std::make_unique<Reclaimer>(*prefix_, *modules_);
  pages_->set_reclaimer(reclaimer_.get());
  prefix_->set_retention_limit(
      int64_t(std::clamp(opt_.retention_share, 0.0, 1.0) * double(pages_->n_pages())));
  if (opt_.tenant_hold_share > 0)
    tenant_hold_pages_ =
        std::max<int64_t>(1, int64_t(std::clamp(opt_.tenant_hold_share, 0.0, 1.0) * double(pages_->n_pages())));
  fwd_ = std::make_unique<Forward>(model, *kv_, *pool_);
  // The batch buffers of a default step (up to 512 tokens, ~45 MB at the
  // tinyllama shape, ~100 MB at 8B) at start rather than in the first
  // request's time (Forward::reserve); a larger --batch-tokens grows them
  // when a batch needs it, so a large setting costs no memory up front.
  fwd_->reserve(std::min(opt.max_batch_tokens, 512), 1);
  approximate_ = std::make_unique<ApproximateReuse>(model, *pages_, *prefix_, *fwd_, opt.max_batch_tokens);
  if (opt.tiers.enabled() && opt.prefix_cache) {
    tiers_ = std::make_unique<KvTiers>(opt.tiers, *pages_, *prefix_);
    prefix_->set_tiers(tiers_.get());
    modules_->set_tiers(tiers_.get());
    approximate_->set_tiers(tiers_.get());
    if (!tiers_->tiers().empty()) first_tier_ = tiers_->tiers().front()->name();
  }
  admin_ = std::make_unique<CacheAdmin>(CacheAdmin::Parts{*prefix_, *modules_, tiers_.get(), *pages_, stats_,
                                                          ns(CacheScope()).model, tenant_hold_pages_});
}

Engine::~Engine() {
  // Sequences hold page references and radix locks; drop them before the caches go.
  active_.clear();
}

void Engine::flush_tiers() {
  if (tiers_) tiers_->flush();
}

void Engine::poll_tiers() {
  if (tiers_) tiers_->tick();
}


KvNamespace Engine::ns(const CacheScope& scope) const {
  return KvNamespace{model_.fingerprint(), kv_type_name(opt_.kv_type), scope};
}

std::span<const TokenLogprobs> Engine::logprobs(int64_t id) const {
  auto it = active_.find(id);
  if (it == active_.end()) return {};
  return it->second->result.logprobs;
}

// One page of the memory is kept back from what a request may use: a sequence whose
// cached prefix ends inside a page copies that page on its first write while its lease
// keeps the original, so a sequence of n tokens may hold ceil(n / P) + 1 pages.
int64_t Engine::admission_tokens() const {
  // Retained prefixes count their charge (O(1), an upper bound: RadixIndex::retain).
  const int64_t held = admin_->pinned_pages() + prefix_->retained_pages();
  return std::max<int64_t>(0, pages_->n_pages() - held - 1) * pages_->page_size();
}

int64_t Engine::tenant_admission_tokens(int64_t held_pages) const {
  if (tenant_hold_pages_ <= 0) return admission_tokens();
  const int64_t others = tenant_hold_pages_ * std::max(0, opt_.tenants - 1);
  return std::max<int64_t>(0, pages_->n_pages() - others - held_pages - 1) * pages_->page_size();
}

Engine::Seq& Engine::new_seq(const GenerateRequest& req, TokenCallback on_token) {
  if (req.max_tokens < 0) throw Error("max_tokens must be >= 0");
  auto s = std::make_unique<Seq>(*pages_, req.sampling);
  s->id = next_id_++;
  s->req = req;
  s->on_token = std::move(on_token);
  if (req.grammar) {
    if (!grammars_) grammars_ = std::make_unique<GrammarCache>(model_.tokenizer());
    s->matcher = std::make_unique<grammar::Matcher>(grammars_->get(req.grammar));
  }
  s->ns = ns(req.scope);
  s->t_start = Clock::now();
  Seq& ref = *s;
  active_.emplace(s->id, std::move(s));
  return ref;
}

// A request fits when its prompt and max_tokens fit in the KV memory that pinned
// entries leave (a plan's spans each start on a fresh page, so it may need a few
// pages more; those come from what a lone request always has: everything unpinned).
void Engine::check_fits(const Seq& s) const {
  const int64_t tokens = int64_t(s.n_prompt) + s.req.max_tokens;
  const int64_t limit = admission_tokens();
  if (tokens > limit)
    throw ContextLengthError("the request needs " + std::to_string(tokens) + " tokens of KV (" +
                                 std::to_string(s.n_prompt) + " in the prompt, " +
                                 std::to_string(s.req.max_tokens) + " for the completion); the KV memory holds " +
                                 std::to_string(limit) + " besides pinned and retained entries; raise --kv-memory",
                             tokens, limit);
}

int64_t Engine::start(KvPlan plan, const GenerateRequest& req, TokenCallback on_token, bool keep_logits) {
  const int64_t V = model_.config().n_vocab;
  for (const KvSpan& span : plan.spans) {
    for (size_t i = 0; i < span.tokens.size(); ++i)
      if (span.tokens[i] < 0 || span.tokens[i] >= V)
        throw Error("prompt token " + std::to_string(i) + " has id " + std::to_string(span.tokens[i]) +
                    ", outside the vocabulary of " + std::to_string(V));
    if (span.kind == KvSpan::Kind::kModule &&
        (!plan.modules || span.module < 0 || span.module >= int32_t(plan.modules->size())))
      throw Error("a plan span names a module the plan does not have");
  }
  if (plan.n_tokens() == 0) throw Error("the prompt is empty");
  const bool recurrent = model_.config().n_recurrent > 0;
  if (recurrent && !plan.is_prefix())
    throw Error("PML modules are not available for " + model_.config().arch_name +
                ": a module's KV cannot stand in for the state of the model's recurrent layers");
  Seq& s = new_seq(req, std::move(on_token));
  if (recurrent) {
    s.recurrent = RecurrentState(model_.config());
    // Approximate reuse moves per-token KV, which recurrent layers do not have:
    // the request is answered exactly, and says why.
    if (s.req.reuse.mode == CacheReuse::kApproximate) {
      s.req.reuse.mode = CacheReuse::kExact;
      s.result.approximate_unavailable = "recurrent layers";
    }
  }
  s.plan = std::move(plan);
  s.prefix_plan = s.plan.is_prefix();
  s.keep_logits = keep_logits;
  for (const KvSpan& span : s.plan.spans) {
    if (span.kind == KvSpan::Kind::kModule) {
      const ModuleSpec& m = s.spec(span.module);
      for (int32_t k = span.begin; k < span.end; ++k) {
        s.tokens.push_back(m.tokens[k]);
        s.positions.push_back(m.positions[k] + span.shift);
      }
    } else {
      s.tokens.insert(s.tokens.end(), span.tokens.begin(), span.tokens.end());
      s.positions.insert(s.positions.end(), span.positions.begin(), span.positions.end());
    }
  }
  s.n_prompt = int32_t(s.tokens.size());
  s.result.n_prompt = s.n_prompt;
  if (recurrent) s.snapshots.plan(s.plan, s.n_prompt, opt_.snapshots_per_sequence);
  try {
    check_fits(s);
  } catch (...) {
    active_.erase(s.id);
    throw;
  }
  ++stats_.requests;
  stats_.prompt_tokens += s.n_prompt;
  begin(s);
  return s.id;
}

void Engine::begin(Seq& s) {
  // An approximate request's blocks that memory's block index lacks are looked up in the
  // tiers once; the lookup's answer restarts begin().
  if (approximate_->fetch_tier_blocks(s, [this, id = s.id](std::vector<Seq::TierBlock> found) {
        auto it = active_.find(id);
        if (it == active_.end()) return;  // cancelled meanwhile
        Seq& q = *it->second;
        for (Seq::TierBlock& b : found) q.tier_blocks.push_back(std::move(b));
        begin(q);
      })) {
    s.state = Seq::State::kPromoting;
    return;
  }
  // A lower tier may hold more of a plain prompt than memory does: ask it and assemble
  // once it answered.
  if (s.prefix_plan && prefix_->promote(s.ns, s.tokens, [this, id = s.id](int32_t restored) {
        auto it = active_.find(id);
        if (it == active_.end()) return;  // cancelled meanwhile
        Seq& q = *it->second;
        q.state = Seq::State::kWaiting;
        if (assemble(q)) q.result.n_promoted = std::min<int64_t>(restored, q.result.n_cached);
      })) {
    s.state = Seq::State::kPromoting;
    return;
  }
  s.state = Seq::State::kWaiting;
  assemble(s);
}

int64_t Engine::add(const GenerateRequest& req, TokenCallback on_token) {
  if (req.prompt.empty()) throw Error("the prompt is empty");
  KvPlan plan = KvPlan::prompt(req.prompt);
  plan.blocks = req.blocks;
  return start(std::move(plan), req, std::move(on_token), false);
}

int64_t Engine::add_plan(KvPlan plan, const GenerateRequest& req, TokenCallback on_token) {
  return start(std::move(plan), req, std::move(on_token), false);
}

GenerateResult Engine::generate(const GenerateRequest& req, const TokenCallback& on_token) {
  return wait(add(req, on_token));
}

GenerateResult Engine::generate_plan(KvPlan plan, const GenerateRequest& req, const TokenCallback& on_token) {
  return wait(add_plan(std::move(plan), req, on_token));
}

void Engine::finish(Seq& s, FinishReason reason) {
  s.result.finish_reason = reason;
  const Clock::time_point now = Clock::now();
  if (s.result.tokens.empty()) {
    s.result.prompt_ms = ms_between(s.t_start, now);
  } else {
    s.result.decode_ms = ms_between(s.t_first, now);
  }
  // Slots prepared for a step that did not run (a sequence cancelled between
  // planning and the forward pass) hold no KV: publish only what was computed.
  if (s.prefix_plan && s.table.n_tokens() > s.n_kv) s.table.truncate(s.n_kv);
  if (s.prefix_plan && !s.approximate && s.n_kv > 0 && reason != FinishReason::kError &&
      s.state == Seq::State::kRunning) {
    const std::vector<PrefixState> states = s.snapshots.to_publish(s.recurrent, s.n_kv);
    const std::span<const int32_t> tokens(s.tokens.data(), s.n_kv);
    prefix_->insert(s.ns, tokens, s.table, s.plan.blocks, states);
    // What goes below memory, handed to the tiers at once: the chains and snapshots,
    // the blocks (they serve approximate reuse, which recurrent layers rule out), and
    // the prompt prefixes a lifetime keeps beyond the tenant's memory share.
    TierWrites writes;
    const bool through = tiers_ && prefix_->enabled();
    if (through) {
      prefix_->add_tier_writes(tokens, s.n_prompt, states, writes);
      if (!prefix_->with_states()) approximate_->add_tier_blocks(s, writes);
    }
    if (s.kind == Seq::Kind::kRequest) {
      const size_t first_kept = writes.chains.size();
      const std::vector<Clock::time_point> kept_until = retain(s, through ? &writes : nullptr);
      const std::vector<int32_t> covered = through ? tiers_->write(s.ns, tokens, writes) : std::vector<int32_t>();
      report_retention(s, std::span(covered).subspan(std::min(first_kept, covered.size())), kept_until);
    } else if (through) {
      tiers_->write(s.ns, tokens, writes);
    }
  } else if (s.prefix_plan && s.approximate && s.n_kv > 0 && reason != FinishReason::kError &&
             s.state == Seq::State::kRunning && prefix_->enabled()) {
    approximate_->publish(s);
  }
  s.table.release();
  s.snapshots.clear();
  s.tier_blocks.clear();
  s.hold.release();
  s.lease.reset();
  if (s.keep_logits) kept_logits_[s.id] = std::move(s.logits);
  if (s.kind == Seq::Kind::kEncode) {
    // An encoding that did not complete: whoever waits for it will ask again.
    if (ModuleCache::Pending* p = modules_->pending(s.ns, s.spec(s.module).digest); p && p->encoder == s.id)
      modules_->clear_pending(s.ns, s.spec(s.module).digest);
    active_.erase(s.id);
    return;
  }
  finished_.emplace_back(s.id, std::move(s.result));
  active_.erase(s.id);
}

// Whether retaining `prefix` in memory keeps its tenant within tenant_hold_pages (a
// prefix already retained only re-arms: always within).
bool Engine::within_tenant_bound(const KvNamespace& ns, std::span<const int32_t> prefix) const {
  if (tenant_hold_pages_ <= 0) return true;
  if (prefix_->retained_prefix(ns, prefix).tokens >= int32_t(prefix.size())) return true;
  const auto held = admin_->held_pages_by_tenant();
  const auto it = held.find(ns.scope.tenant);
  const int32_t P = pages_->page_size();
  const int64_t pages = (int64_t(prefix.size()) + P - 1) / P;
  return (it == held.end() ? 0 : it->second) + pages <= tenant_hold_pages_;
}

std::vector<Clock::time_point> Engine::retain(Seq& s, TierWrites* tier) {
  const Clock::time_point now = Clock::now();
  std::vector<Clock::time_point> tier_until;
  for (const RetainRequest& r : s.req.retain) {
    const int32_t n = std::min(r.tokens, std::min(s.n_prompt, s.n_kv));
    if (n <= 0 || r.seconds <= 0) continue;
    const auto life = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(r.seconds));
    const std::span<const int32_t> prefix(s.tokens.data(), size_t(n));
    Clock::time_point until;
    if (within_tenant_bound(s.ns, prefix) && prefix_->retain(s.ns, prefix, life, now, &until)) continue;
    if (!tier) continue;
    // Beyond the memory share: the tiers keep the prefix's whole pages that long.
    const int64_t seconds = int64_t(std::ceil(r.seconds));
    tier->chains.push_back({n, seconds});
    // A hybrid model resumes the prefix from the latest snapshot at or before its end:
    // that state entry gets the lifetime too.
    if (prefix_->with_states()) {
      auto states = prefix_->states_on(s.ns, prefix, 1);
      if (!states.empty()) tier->keep_state(states[0].first, std::move(states[0].second), seconds);
    }
    tier_until.push_back(now + life);
  }
  return tier_until;
}

void Engine::report_retention(Seq& s, std::span<const int32_t> tier_covered,
                              std::span<const Clock::time_point> tier_until) {
  const Clock::time_point now = Clock::now();
  const auto unix_at = [&](Clock::time_point t) { return unix_seconds(t, now); };
  RetentionReport tier_kept;
  for (size_t i = 0; i < tier_covered.size() && i < tier_until.size(); ++i)
    if (tier_covered[i] > tier_kept.tokens) tier_kept = {tier_covered[i], unix_at(tier_until[i]), first_tier_};
  const RadixIndex::Retained m =
      prefix_->retained_prefix(s.ns, std::span<const int32_t>(s.tokens.data(), size_t(s.n_prompt)));
  if (m.tokens > 0 && m.tokens >= tier_kept.tokens) {
    s.result.retention = {m.tokens, unix_at(m.until), "memory"};
  } else {
    s.result.retention = tier_kept;
  }
}

void Engine::cancel(int64_t id) {
  auto it = active_.find(id);
  if (it != active_.end() && it->second->kind == Seq::Kind::kRequest) finish(*it->second, FinishReason::kStop);
}

std::vector<std::pair<int64_t, GenerateResult>> Engine::take_finished() {
  return std::exchange(finished_, {});
}

void Engine::sample(Seq& s, const float* logits) {
  const int64_t V = model_.config().n_vocab;
  if (s.keep_logits && s.logits.empty()) s.logits.assign(logits, logits + V);
  if (s.result.tokens.empty()) s.result.prompt_ms = ms_between(s.t_start, Clock::now());
  if (int32_t(s.result.tokens.size()) >= s.req.max_tokens) return finish(s, FinishReason::kLength);
  const size_t n_out = s.result.tokens.size();
  const std::vector<uint64_t>* allowed = s.matcher ? &s.matcher->allowed() : nullptr;
  if (allowed && std::none_of(allowed->begin(), allowed->end(), [](uint64_t w) { return w != 0; })) {
    s.result.error = "the grammar allows no token of the vocabulary after the output so far";
    return finish(s, FinishReason::kError);
  }
  const int32_t tok = n_out < s.req.forced.size()
                          ? s.req.forced[n_out]
                          : s.sampler.sample(std::span<const float>(logits, V), s.tokens, allowed);
  if (s.matcher && !s.matcher->accept(tok)) {
    s.result.error = "forced token " + std::to_string(tok) + " is not allowed by the grammar";
    return finish(s, FinishReason::kError);
  }
  if (s.req.logprobs >= 0)
    s.result.logprobs.push_back(token_logprobs(std::span<const float>(logits, V), tok, s.req.logprobs));
  if (s.result.tokens.empty()) {
    s.t_first = Clock::now();
    s.result.ttft_ms = ms_between(s.t_start, s.t_first);
  }
  s.result.tokens.push_back(tok);
  s.tokens.push_back(tok);
  s.positions.push_back(s.positions.back() + 1);
  ++stats_.generated_tokens;
  const bool keep_going = !s.on_token || s.on_token(tok);
  if (!keep_going || (s.req.stop_at_eog && model_.tokenizer().is_eog(tok))) return finish(s, FinishReason::kStop);
  if (s.matcher && s.matcher->finished()) return finish(s, FinishReason::kStop);
  if (int32_t(s.result.tokens.size()) >= s.req.max_tokens) return finish(s, FinishReason::kLength);
  if (!s.req.forced.empty() && s.result.tokens.size() >= s.req.forced.size()) return finish(s, FinishReason::kStop);
}

GenerateResult Engine::wait(int64_t id) {
  for (;;) {
    for (auto it = finished_.begin(); it != finished_.end(); ++it) {
      if (it->first != id) continue;
      GenerateResult out = std::move(it->second);
      finished_.erase(it);
      if (out.finish_reason == FinishReason::kError) throw Error(out.error);
      return out;
    }
    step();
  }
}

void Engine::wait_idle() {
  while (!active_.empty()) step();
}

int64_t Engine::preload(std::shared_ptr<const ModuleSet> modules, const CacheScope& scope) {
  int64_t tokens = 0;
  const KvNamespace space = ns(scope);
  for (int32_t m = 0; m < int32_t(modules->size()); ++m) {
    const ModuleSpec& spec = (*modules)[m];
    if (!spec.cache || modules_->peek(space, spec)) continue;
    // A plan that is just the module (and a token to compute) would need logits;
    // request the module directly instead.
    start_encoding(0, modules, m, space);
    wait_idle();
    if (modules_->peek(space, spec)) tokens += int64_t(spec.tokens.size());
  }
  return tokens;
}

}  // namespace pc
