// The engine: one thread's owner of the model, the KV pages, the caches and every
// running sequence.
//
//   request ──► KvPlan (kv/kv_plan.h) ──► assembly (engine/assembly.cc) ──► step()
//                                          prefix cache: longest cached prefix
//                                          module cache: encoded modules, or an
//                                          encoding sequence batched like any prompt
//
// Every prompt is an assembly plan: a plain request is one kPrefix span, a PML prompt
// a list of module and computed spans. The engine resolves the plan against its
// caches and runs the result on one path: each step() is one forward batch over all
// active sequences — a chunk of prompt (or of a module being encoded) for those still
// prefilling, one token for those decoding (continuous batching). When a sequence
// finishes, a plain prompt's tokens (generated ones included) are published in the
// prefix cache, so the next turn of a conversation pays only for its new tokens.
//
// KV admission: a request that fits alone (engine.h admission_tokens()) never fails
// because others run: when pages run out, the youngest running sequence is preempted
// — its KV published in the prefix cache, so resuming it is a cache hit — and resumed
// when pages are free again.
//
// Because the forward pass is batch-invariant, logits with cached KV are bit-identical
// to a full recomputation.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/finish_reason.h"
#include "kernels/kv_quant.h"
#include "common/error.h"
#include "engine/sampler.h"
#include "kernels/cpu_count.h"
#include "kv/kv_namespace.h"
#include "kv/kv_plan.h"
#include "tier/tier_options.h"

namespace pc {

namespace grammar {
struct Grammar;
}
class GrammarCache;
class Model;
class KvStorage;
class PagePool;
class ThreadPool;
class Forward;
class KvTiers;
struct TierWrites;
class PrefixCache;
class ModuleCache;
class CacheAdmin;
class RadixIndex;
class ModuleStore;
class ApproximateReuse;
struct Run;

struct EngineOptions {
  int threads = default_thread_count();
  int64_t kv_memory_bytes = int64_t(1) << 30;  // KV page capacity, in the KV type's real bytes
  int page_size = 16;
  // How pages store K and V (kernels/kv_quant.h). Exactness holds within a type: a hit
  // gives bitwise the logits of recomputing in that type; namespaces keep types apart.
  KvType kv_type = KvType::kF16;
  int max_batch_tokens = 512;  // tokens per forward step (prompt chunks + decodes)
  bool prefix_cache = true;    // reuse and insert prefixes
  // While sequences decode, module-encoding chunks are sized so that a step takes at
  // most this many times a decode-only step (measured as the engine runs); at least
  // one token a step. 0: encodings take the whole step budget like prompt chunks.
  double encode_stall_factor = 2.0;
  TierOptions tiers;           // disk / Redis tiers (with prefix_cache)
  // Share of the KV pages that retained prefixes (GenerateRequest::retain) may hold in
  // memory; a retention beyond it is kept by the tiers instead (docs/api.md "Lifetimes").
  double retention_share = 0.5;
  // Per-tenant bound, as a share of the KV pages, on what one API tenant (CacheScope::tenant
  // of a namespace) may hold out of requests' reach: its pinned entries and the
  // charge of its retained prefixes. 0: no per-tenant bound. With it, `tenants` is how
  // many tenants there are, so each can be promised the memory the others can never
  // take (tenant_admission_tokens).
  double tenant_hold_share = 0;
  int tenants = 1;
  // Models with recurrent layers: recurrent-state snapshots a sequence stores with its
  // prefix at most (the latest kept; engine/state_snapshots.h).
  int snapshots_per_sequence = 16;
};

// A lifetime asked for a prefix of the prompt: the prefix of `tokens` tokens stays
// cached for `seconds` after the request finishes, re-armed by every request that
// uses it (a sliding guarantee; docs/api.md "Lifetimes").
struct RetainRequest {
  int32_t tokens = 0;
  double seconds = 0;
};

// Where the longest guaranteed prefix of a request's prompt is kept, after it ran.
struct RetentionReport {
  int32_t tokens = 0;      // its length; 0: no prefix of the prompt is guaranteed
  double expires_at = 0;   // unix seconds
  std::string tier;        // "memory", or the tier that holds it ("disk", "redis")
};

// How a request may reuse KV (docs/api.md "Approximate reuse").
//   kExact        a hit never changes the answer: only an exact token prefix is reused.
//   kApproximate  after the exact prefix, each block (a request part, KvPlan::blocks)
//                 found at another position in the block index is reused with K rotated
//                 to its new position; for a PML plan, each module segment whose KV did
//                 not see everything before it in the prompt. The recompute policy
//                 (engine/approximate/recompute_policy.h) computes `budget` (0-1) of those tokens again,
//                 attending to everything before them, and everything not found is
//                 computed. Budget 1 is bitwise the exact result. KV made this way is
//                 never published (prefix index, block index, module store, tiers).
enum class CacheReuse { kExact, kApproximate };
// kPrefix: each reused block's first tokens; kDeviation: the tokens whose layer-1 KV
// deviates most (a check pass of layer 0); kImpact: that deviation weighted by the
// attention the prompt's last token pays each token at layer 1. engine/approximate/recompute_policy.h.
enum class RecomputePolicy { kPrefix, kDeviation, kImpact };
struct ReusePolicy {
  CacheReuse mode = CacheReuse::kExact;
  // The defaults: the setting chosen from `bench quality` (docs/benchmarks.md).
  RecomputePolicy policy = RecomputePolicy::kImpact;
  double budget = 0.15;
  int32_t run = 1;  // kDeviation, kImpact: tokens per selection window (fewer, longer recomputed runs)
  // Continue from KV an earlier approximate request built (approximate_ns) where it
  // extends the exact prefix (never at budget 1, which is the exact result). Off: every
  // approximate request starts from exact KV (bench quality measures one step so).
  bool continue_approximate = true;
  // Report how each block of a plain prompt's plan was served (GenerateResult::blocks).
  bool report_blocks = false;
};

// One block of a plain prompt's plan (KvPlan::blocks) and where its KV came from, in an
// approximate request: the exact prefix, an earlier approximate request's KV continued
// (ReusePolicy::continue_approximate), the block index (found at another position;
// the recompute policy may still compute some of its tokens), or nowhere (computed).
struct BlockReuse {
  enum class Source { kExact, kContinued, kFound, kMissed };
  int32_t begin = 0, end = 0;
  Source source = Source::kMissed;
};

struct GenerateRequest {
  std::vector<int32_t> prompt;  // token ids (BOS included if wanted); ignored by add_plan
  int32_t max_tokens = 64;
  SamplingParams sampling;
  bool stop_at_eog = true;      // stop at end-of-generation tokens
  CacheScope scope;             // whose cached KV it may reuse (API tenant, cache_salt)
  // Log-probabilities of the sampled tokens (TokenLogprobs, engine/sampler.h):
  // -1 = off (nothing computed); N >= 0 = each token's own and the N most likely.
  int32_t logprobs = -1;
  // Token ranges of the prompt that are parts of the request (tools, messages): their
  // KV is indexed by content when the sequence finishes (engine/approximate/block_index.h).
  std::vector<KvBlock> blocks;
  ReusePolicy reuse;
  // Test hook (serve --test-hooks): when non-empty, the generated tokens are these, in
  // order, instead of sampled ones (their KV is computed and cached as a sampled
  // token's is); the sequence finishes after the last one (kStop), or earlier at an
  // end-of-generation token or max_tokens.
  std::vector<int32_t> forced;
  // Lifetimes for prefixes of the prompt, applied when the sequence finishes.
  std::vector<RetainRequest> retain;
  // Constrained decoding (grammar/): when set, each sampled token is drawn from the
  // tokens the grammar allows after the generated ones (any temperature), an
  // end-of-generation token only once the grammar is complete, and the sequence
  // stops (kStop) as soon as nothing can follow. The masks depend only on the
  // generated tokens, so cached and uncached runs give the same tokens. Forced
  // tokens (test hook) must obey it too.
  std::shared_ptr<const grammar::Grammar> grammar;
};

// Where a request's prompt time went on the engine thread, in milliseconds (the
// response's `promptcache.timings`; `bench agent --profile`). Lookups, the check pass and
// the selection are inside assemble_ms; relocate_ms is not (reused KV is copied when the
// step that reaches it is planned); forward_ms is the forward passes that computed the
// request's prompt tokens, whole (a pass batching other requests' tokens counts in full
// for each).
struct PromptTimings {
  double assemble_ms = 0;       // Engine::assemble (every time it ran)
  double lookup_ms = 0;         // approximate: block index and approximate-prefix lookups
  double relocate_ms = 0;       // approximate: reused KV copied into the table, K rotated
  double check_forward_ms = 0;  // approximate: the check pass's layer-0 runs
  double check_score_ms = 0;    // approximate: the check pass's deviations and attention weights
  double select_ms = 0;         // approximate: the policy's choice of tokens
  double forward_ms = 0;        // forward passes computing its prompt tokens
  int32_t forward_passes = 0;
};

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated ids
  int64_t n_prompt = 0;
  int64_t n_cached = 0;         // prompt tokens whose KV was reused
  int64_t n_computed = 0;       // prompt tokens computed (module encodings included)
  double prompt_ms = 0;         // request start → prompt fully processed
  double ttft_ms = 0;           // request start → first token sampled
  double decode_ms = 0;         // first token → last token
  int64_t n_module_hits = 0;    // PML: modules reused from the module cache
  int64_t n_module_misses = 0;  // PML: modules encoded for this request
  int64_t n_promoted = 0;       // cached tokens restored from the disk or Redis tier
  int64_t n_preempted = 0;      // times the sequence was preempted (KV admission)
  // Prompt tokens computed although their block's KV is cached at another position
  // (the block index): what approximate reuse of moved blocks could save.
  int64_t n_reusable = 0;
  int64_t n_approximate = 0;    // prompt tokens whose KV was reused approximately (moved blocks)
  int64_t n_recomputed = 0;     // tokens of found blocks the policy recomputed (all layers)
  // kDeviation: tokens run through layer 0 for the deviation check (each costs about
  // 1 / n_layer of a computed token; not counted in n_computed).
  int64_t n_checked = 0;
  // Approximate reuse of a plain prompt, when the request asked (ReusePolicy::report_blocks).
  std::vector<BlockReuse> blocks;
  // Why approximate reuse was asked for but not applied (the request was answered
  // exactly): "recurrent layers" on models whose recurrent layers keep no per-token KV.
  std::string approximate_unavailable;
  FinishReason finish_reason = FinishReason::kNone;
  std::string error;            // when finish_reason == kError
  std::vector<TokenLogprobs> logprobs;  // [i] for tokens[i] when req.logprobs >= 0
  // The longest prefix of the prompt under a lifetime (asked by this request or by an
  // earlier one and re-armed by this one), when it finished.
  RetentionReport retention;
  PromptTimings timings;
};

// Called with each new token; return false to stop the sequence.
using TokenCallback = std::function<bool(int32_t)>;

struct EngineStats {
  int64_t requests = 0;
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;
  int64_t computed_tokens = 0;   // prompt tokens computed
  int64_t generated_tokens = 0;
  int64_t preemptions = 0;       // sequences preempted to free KV pages
  int64_t module_encodes = 0;    // modules encoded (as batched sequences)
};

// A request that cannot fit in the KV memory even alone (HTTP 400
// context_length_exceeded at the server).
class ContextLengthError : public Error {
 public:
  ContextLengthError(const std::string& what, int64_t needed, int64_t limit)
      : Error(what), needed(needed), limit(limit) {}
  int64_t needed, limit;  // tokens
};

// A tenant's pin or other hold that would exceed EngineOptions::tenant_hold_pages
// (HTTP 429 tenant_quota_exceeded at the server).
class TenantQuotaError : public Error {
 public:
  using Error::Error;
};

class Engine {
 public:
  Engine(const Model& model, const EngineOptions& opt);
  ~Engine();

  // Runs one request to completion (other active sequences advance too).
  // Throws pc::Error for invalid requests, ContextLengthError for one that cannot fit.
  GenerateResult generate(const GenerateRequest& req, const TokenCallback& on_token = nullptr);

  // Continuous batching: add() registers a sequence and returns its id; step()
  // advances every active sequence by one forward batch; finished sequences are
  // collected with take_finished(). Throws pc::Error for an invalid request.
  int64_t add(const GenerateRequest& req, TokenCallback on_token = nullptr);
  void step();
  bool idle() const { return active_.empty(); }
  std::vector<std::pair<int64_t, GenerateResult>> take_finished();
  void cancel(int64_t id);  // finishes the sequence now (kStop); no-op if unknown

  // Runs an assembly plan (e.g. a PML prompt compiled by pml/compiled_plan.h): modules are
  // taken from the module cache, or restored from a tier or encoded by batched
  // encoding sequences first; the plan's computed spans attend to everything before
  // them. req.prompt is ignored; its max_tokens, sampling and tenant apply.
  int64_t add_plan(KvPlan plan, const GenerateRequest& req, TokenCallback on_token = nullptr);
  GenerateResult generate_plan(KvPlan plan, const GenerateRequest& req, const TokenCallback& on_token = nullptr);
  // Encodes (or restores) every cacheable module of a set now (--preload). Returns
  // the tokens encoded.
  int64_t preload(std::shared_ptr<const ModuleSet> modules, const CacheScope& scope = {});

  // The admin face of the caches (stats, listings, pins, TTLs, eviction).
  CacheAdmin& cache() { return *admin_; }
  // Tokens a request may need (prompt + max_tokens) to be admitted: the KV capacity
  // minus the pages pinned entries hold and those retained prefixes are charged.
  int64_t admission_tokens() const;
  // What a tenant holding `held_pages` (CacheAdmin::held_pages_by_tenant) is promised
  // with a per-tenant bound: the capacity less every other tenant's full bound and
  // its own hold. It depends on no other tenant's use. Without a bound:
  // admission_tokens(). Thread-safe (constants only) when given the hold.
  int64_t tenant_admission_tokens(int64_t held_pages) const;
  int64_t tenant_hold_pages() const { return tenant_hold_pages_; }  // 0: no per-tenant bound

  const Model& model() const { return model_; }
  ThreadPool& pool() { return *pool_; }
  KvNamespace ns(const CacheScope& scope) const;  // the exact namespace of a scope
  const EngineStats& stats() const { return stats_; }
  // The log-probabilities of a running sequence's tokens so far (req.logprobs >= 0),
  // for a token callback that streams them; empty for an unknown id.
  std::span<const TokenLogprobs> logprobs(int64_t id) const;
  // Waits until every queued tier write has finished (tests, shutdown, benchmarks).
  void flush_tiers();
  // Runs finished tier jobs' completions, starts deferred writes and, now and then,
  // checks whether a shared tier lost its entries (KvTiers::tick). For an idle engine:
  // step() polls by itself.
  void poll_tiers();
  const EngineOptions& options() const { return opt_; }

  // Internals other engine files share (engine/sequence.h).
  struct Seq;

 private:
  struct Reclaimer;
  struct Part;
  friend struct EngineTestPeer;  // tests/engine_test_peer.h: the caches' insides, for tests only
  friend struct EngineProbe;     // probe/engine_logits.cc: logits without generation (tests, benchmarks)
  Seq& new_seq(const GenerateRequest& req, TokenCallback on_token);
  int64_t start(KvPlan plan, const GenerateRequest& req, TokenCallback on_token, bool keep_logits);
  // The lower-tier lookups a new sequence needs (the blocks approximate reuse may take
  // from a tier, then a longer prefix), each answered off the engine thread, then the
  // first assembly.
  void begin(Seq& s);
  void check_fits(const Seq& s) const;
  GenerateResult wait(int64_t id);
  void wait_idle();

  // Assembly (engine/assembly.cc): resolves a sequence's plan into runs of cached KV
  // and tokens to compute; false while a module it needs is not ready yet (missing
  // modules are requested: a tier load or an encoding sequence).
  bool assemble(Seq& s);
  // The longest cached prefix of `tokens` (PrefixCache::attach; `whole`: they end the
  // sequence, so the last is computed) becomes s's table, lease and first cached run.
  // Returns its length.
  int32_t attach_prefix(Seq& s, std::span<const int32_t> tokens, bool whole);
  // Adds span.module to *missing unless the module cache holds it; false when missing.
  bool note_if_missing(Seq& s, const KvSpan& span, std::vector<int32_t>* missing);
  void request_module(Seq& owner, int32_t module, const KvNamespace& ns);
  void start_encoding(int64_t owner, std::shared_ptr<const ModuleSet> set, int32_t module, const KvNamespace& ns);
  void finish_encoding(Seq& s);

  // Steps (engine/step.cc).
  void resume_waiting();
  bool plan_part(Seq& s, int64_t& budget, std::vector<Part>& parts);
  // Puts a cached run's KV into s.table once: by reference, or copied (Run::copied).
  // False when the pool has no pages for the copy (the table is then as before).
  bool attach_run(Seq& s, Run& r);
  int64_t encode_budget() const;
  bool preempt_for(Seq& s, std::vector<Part>& parts, int64_t& budget);
  void preempt(Seq& s);
  void run_parts(std::vector<Part>& parts);

  void finish(Seq& s, FinishReason reason);
  // Applies s.req.retain in memory; what the tenant's memory share cannot hold goes to
  // *tier (null: no tiers) as chains with a lifetime, whose ends are returned in order.
  std::vector<std::chrono::steady_clock::time_point> retain(Seq& s, TierWrites* tier);
  // The prompt's longest guaranteed prefix (s.result.retention): memory's, or the
  // longest chain the tiers keep (tier_covered: KvTiers::write's counts for retain's
  // chains, tier_until: their ends).
  void report_retention(Seq& s, std::span<const int32_t> tier_covered,
                        std::span<const std::chrono::steady_clock::time_point> tier_until);
  bool within_tenant_bound(const KvNamespace& ns, std::span<const int32_t> prefix) const;
  void sample(Seq& s, const float* logits);

  const Model& model_;
  EngineOptions opt_;
  int64_t tenant_hold_pages_ = 0;  // EngineOptions::tenant_hold_share of the pages (0: none)
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<KvStorage> kv_;
  std::unique_ptr<PagePool> pages_;
  std::unique_ptr<PrefixCache> prefix_;
  std::unique_ptr<ModuleCache> modules_;
  std::unique_ptr<Reclaimer> reclaimer_;
  std::unique_ptr<Forward> fwd_;
  std::unique_ptr<ApproximateReuse> approximate_;  // engine/approximate/approximate_reuse.h
  std::unique_ptr<KvTiers> tiers_;  // after the pool and caches: destroyed before them
  std::string first_tier_;          // the fastest tier's name (retention reports)
  std::unique_ptr<CacheAdmin> admin_;
  std::unique_ptr<GrammarCache> grammars_;  // automata of requests' grammars
  std::map<int64_t, std::unique_ptr<Seq>> active_;  // by id: oldest first
  std::vector<std::pair<int64_t, GenerateResult>> finished_;
  std::map<int64_t, std::vector<float>> kept_logits_;  // probe/engine_logits.h: by sequence id
  // Step costs, moving averages (step.cc): a decode-only step, and each prompt token
  // beyond it. 0 until measured.
  double decode_step_ms_ = 0;
  double prompt_token_ms_ = 0;
  int64_t next_id_ = 1;
  EngineStats stats_;
};

}  // namespace pc
