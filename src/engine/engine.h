// The engine: one thread's owner of the model, the KV pages, the prefix index
// and every running sequence.
//
// A request becomes a Sequence. Its prompt is first matched against the radix
// prefix index: the longest cached prefix (never the whole prompt — the last
// token is computed to produce logits) is reused by reference, and only the
// rest is computed. Each step() runs one forward batch over all active
// sequences: a chunk of prompt for those still prefilling, one token for those
// decoding (continuous batching). When a sequence finishes, its prompt and
// generated tokens are inserted into the index, so the next turn of a
// conversation pays only for its new tokens.
//
// Because the forward pass is batch-invariant, logits with a cached prefix are
// bit-identical to a full recomputation.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "kernels/cpu_count.h"
#include "kv/module_store.h"
#include "kv/page_table.h"
#include "kv/radix_index.h"
#include "tier/tier_options.h"

namespace pc {

namespace pml {
struct SchemaLayout;
struct PromptPlan;
struct ModuleLayout;
}  // namespace pml

class Model;
class KvStorage;
class PagePool;
class PageTable;
class ThreadPool;
class Forward;
class KvTiers;

struct EngineOptions {
  int threads = default_thread_count();
  int64_t kv_memory_bytes = int64_t(1) << 30;  // KV page capacity
  int page_size = 16;
  int max_batch_tokens = 512;  // tokens per forward step (prompt chunks + decodes)
  bool prefix_cache = true;    // reuse and insert prefixes
  TierOptions tiers;           // disk / Redis tiers (with prefix_cache)
};

struct GenerateRequest {
  std::vector<int32_t> prompt;  // token ids (BOS included if wanted)
  int32_t max_tokens = 64;
  SamplingParams sampling;
  bool stop_at_eog = true;      // stop at end-of-generation tokens
  std::string tenant;           // cache namespace salt ("" = shared)
  // Log-probabilities of the sampled tokens (TokenLogprobs, engine/sampler.h):
  // -1 = off (nothing computed); N >= 0 = each token's own and the N most likely.
  int32_t logprobs = -1;
};

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated ids
  int64_t n_prompt = 0;
  int64_t n_cached = 0;         // prompt tokens whose KV was reused
  int64_t n_computed = 0;       // prompt tokens computed
  double prompt_ms = 0;         // request start → prompt fully processed
  double ttft_ms = 0;           // request start → first token sampled
  double decode_ms = 0;         // first token → last token
  int64_t n_module_hits = 0;    // PML: modules reused from the module store
  int64_t n_module_misses = 0;  // PML: modules encoded by this request
  int64_t n_promoted = 0;       // cached tokens restored from the disk or Redis tier
  std::string finish_reason;    // "stop", "length" or "error"
  std::string error;            // when finish_reason == "error"
  std::vector<TokenLogprobs> logprobs;  // [i] for tokens[i] when req.logprobs >= 0
};

// Called with each new token; return false to stop the sequence.
using TokenCallback = std::function<bool(int32_t)>;

struct EngineStats {
  int64_t requests = 0;
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;
  int64_t computed_tokens = 0;   // prompt tokens computed
  int64_t generated_tokens = 0;
};

class Engine {
 public:
  Engine(const Model& model, const EngineOptions& opt);
  ~Engine();

  // Runs one request to completion (other active sequences advance too).
  // Throws pc::Error for invalid requests or when KV memory runs out.
  GenerateResult generate(const GenerateRequest& req, const TokenCallback& on_token = nullptr);

  // Continuous batching: add() registers a sequence and returns its id; step()
  // advances every active sequence by one forward batch; finished sequences are
  // collected with take_finished(). Throws pc::Error for an invalid request.
  int64_t add(const GenerateRequest& req, TokenCallback on_token = nullptr);
  void step();
  bool idle() const { return active_.empty(); }
  std::vector<std::pair<int64_t, GenerateResult>> take_finished();
  void cancel(int64_t id);  // finishes the sequence now ("stop"); no-op if unknown

  // PML: runs a prompt's execution plan. Modules are taken from the module
  // store or encoded now (at their schema positions, over their context only)
  // and referenced, not copied; the plan's uncached text is computed in plan
  // order, attending to everything before it. req.prompt is ignored; its
  // max_tokens, sampling and tenant apply. Throws pc::Error.
  int64_t add_plan(const pml::SchemaLayout& schema, const pml::PromptPlan& plan,
                   const GenerateRequest& req, TokenCallback on_token = nullptr);
  GenerateResult generate_plan(const pml::SchemaLayout& schema, const pml::PromptPlan& plan,
                               const GenerateRequest& req, const TokenCallback& on_token = nullptr);
  // Logits at the end of a plan (no generation), [n_vocab]. For tests.
  std::vector<float> plan_logits(const pml::SchemaLayout& schema, const pml::PromptPlan& plan,
                                 const std::string& tenant = "");
  // Encodes a schema's cacheable modules now (--preload). Returns tokens encoded.
  int64_t preload(const pml::SchemaLayout& schema, const std::string& tenant = "");

  // Logits of every prompt position from `begin` on, [n - begin][n_vocab],
  // computed in chunks of `chunk` tokens. With use_cache, the longest cached
  // prefix is reused (returned in *n_cached, and `begin` must be <= it) and the
  // prompt is inserted into the index afterwards. For tests and tools.
  std::vector<float> prompt_logits(const std::vector<int32_t>& prompt, int chunk,
                                   bool use_cache = false, int64_t* n_cached = nullptr,
                                   const std::string& tenant = "");

  const Model& model() const { return model_; }
  ThreadPool& pool() { return *pool_; }
  PagePool& page_pool() { return *pages_; }
  RadixIndex& index() { return *index_; }
  ModuleStore& modules() { return *modules_; }
  KvNamespace ns(const std::string& tenant) const;
  const EngineStats& stats() const { return stats_; }
  // The log-probabilities of a running sequence's tokens so far (req.logprobs >= 0),
  // for a token callback that streams them; empty for an unknown id.
  std::span<const TokenLogprobs> logprobs(int64_t id) const;
  // The disk / Redis tiers, or null when none is configured.
  KvTiers* tiers() { return tiers_.get(); }
  // Waits until every queued tier write has finished (tests, shutdown, benchmarks).
  void flush_tiers();
  const EngineOptions& options() const { return opt_; }

 private:
  struct Seq;
  struct Reclaimer;
  struct PlanBuild;
  Seq& start(const GenerateRequest& req, TokenCallback on_token);
  Seq& new_seq(const GenerateRequest& req, TokenCallback on_token);
  void attach_prefix(Seq& s);  // reuses the longest cached prefix of s's prompt
  GenerateResult wait(int64_t id);
  // Runs tokens (with positions) appended to `table` through the forward pass
  // in chunks; returns the last token's logits when want_logits.
  const float* compute(PageTable& table, std::span<const int32_t> tokens,
                       std::span<const int32_t> positions, bool want_logits);
  ModuleEntry ensure_module(const pml::SchemaLayout& schema, int m, const KvNamespace& ns,
                            PlanBuild* stats, bool* hit = nullptr);
  ModuleEntry encode_module(const pml::SchemaLayout& schema, int m, const KvNamespace& ns,
                            PlanBuild* stats);
  void store_module(const ModuleKey& key, const pml::ModuleLayout& M, ModuleEntry e);
  std::vector<PageEntry> relocate(const ModuleSegment& seg, int32_t shift);
  std::vector<PageEntry> relocated(const pml::ModuleLayout& M, const ModuleSegment& seg, int32_t shift,
                                   const KvNamespace& ns);
  void build_plan(Seq& s, const pml::SchemaLayout& schema, const pml::PromptPlan& plan);
  void finish(Seq& s, const std::string& reason);
  void sample(Seq& s, const float* logits);

  const Model& model_;
  EngineOptions opt_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<KvStorage> kv_;
  std::unique_ptr<PagePool> pages_;
  std::unique_ptr<RadixIndex> index_;
  std::unique_ptr<ModuleStore> modules_;
  std::unique_ptr<Reclaimer> reclaimer_;
  std::unique_ptr<Forward> fwd_;
  std::unique_ptr<KvTiers> tiers_;  // after the pool and index: destroyed before them
  std::map<int64_t, std::unique_ptr<Seq>> active_;  // by id (stable order)
  std::vector<PageTable> held_;  // keeps freshly encoded pages alive while a plan is built
  std::vector<std::pair<int64_t, GenerateResult>> finished_;
  int64_t next_id_ = 1;
  EngineStats stats_;
};

}  // namespace pc
