// Approximate reuse (docs/api.md "Approximate reuse", docs/architecture.md): KV cached in
// another context — a block of the request found at another position, a PML module that
// did not see everything before it — reused with K rotated to where it sits now, the
// recompute policy computing a share of it again.
//
//   assembly ──assemble()──► candidates            (approximate_reuse.cc)
//                              continuation of an earlier approximate request's KV
//                              blocks found in the block index / restored from a tier
//                           ─► recompute policy    (recompute_policy.h)
//                              scored by the check pass (check_pass.h)
//                           ─► runs: computed, reused (K rotated, relocation.h)
//   finish ──publish()──────► approximate_ns      (approximate_namespace.h)
//   begin / finish ──────────► tier blocks         (tier_blocks.cc)
//
// Engine thread only.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "engine/approximate/block_index.h"
#include "engine/approximate/recompute_policy.h"
#include "engine/engine.h"
#include "engine/sequence.h"

namespace pc {

struct TierWrites;  // engine/kv_tiers.h

class Forward;
class KvTiers;
class Model;
class PagePool;
class PrefixCache;

class ApproximateReuse {
 public:
  using Seq = Engine::Seq;
  ApproximateReuse(const Model& model, PagePool& pages, PrefixCache& prefix, Forward& fwd, int max_batch_tokens)
      : model_(model), pages_(pages), prefix_(prefix), fwd_(fwd), max_batch_tokens_(max_batch_tokens) {}
  // The tiers below memory, or null (set once, by the engine).
  void set_tiers(KvTiers* tiers) { tiers_ = tiers; }

  // The one entry point from assembly. s.runs holds what assembly resolved, in prompt
  // order. A plain prompt (s.prefix_plan): the runs end at the exact prefix `exact`; the
  // rest of the prompt is laid out here (continuation, moved blocks, tokens to compute).
  // A PML plan: `modules` are its module spans that did not see everything before them,
  // disjoint from s.runs. Sets s.result's n_approximate, n_recomputed and n_checked on
  // the first assembly. False when no pages are left for the copies or the check (the
  // caller lets go and retries).
  bool assemble(Seq& s, int32_t exact, std::vector<ReuseCandidate> modules);

  // Publishes an approximate sequence's KV in approximate_ns (memory only).
  void publish(Seq& s);

  // An approximate request's blocks that memory's block index lacks are looked up in
  // the tiers once: true when a lookup started; `found` runs later on the engine thread
  // with the blocks restored (KvTiers::poll).
  bool fetch_tier_blocks(Seq& s, std::function<void(std::vector<Seq::TierBlock>)> found);
  // Each block of a finished exact prompt goes to the tiers with its K rotated to
  // position 0 (once: an entry written recently is not rewritten): adds them to what
  // the sequence writes through, with the rotation (s must outlive w's use).
  void add_tier_blocks(const Seq& s, TierWrites& w);

 private:
  // A plain prompt after its exact prefix [0, exact): the continuation, then each later
  // block found at another position is a candidate; everything else is computed.
  bool assemble_blocks(Seq& s, int32_t exact);
  // The longest prefix an earlier approximate request published (approximate_ns) beyond
  // `*t`, as cached runs; advances *t.
  void continue_approximate(Seq& s, int32_t* t);
  // Where block b of s's prompt has KV: memory's block index (the request's namespace,
  // then approximate_ns), or a block restored from a tier (position 0).
  std::optional<BlockHit> find_block(Seq& s, const KvBlock& b);
  // Turns the candidates into runs by the request's recompute policy (s.runs holds the
  // rest of the prompt's runs, in order, disjoint from the candidates).
  bool apply_recompute(Seq& s, std::vector<ReuseCandidate>& cands);

  const Model& model_;
  PagePool& pages_;
  PrefixCache& prefix_;
  Forward& fwd_;
  int max_batch_tokens_;
  KvTiers* tiers_ = nullptr;
};

}  // namespace pc
