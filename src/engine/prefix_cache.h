// The prefix cache: the radix index over token ids (kv/radix_index.h), the protocol a
// sequence follows to reuse and publish a prefix, and promotion from the KV tiers.
//
//   PrefixHit h = cache.attach(ns, tokens);   // longest cached prefix, referenced
//   ... compute tokens [h.length, n) into h.table ...
//   cache.insert(ns, tokens_with_kv, table);  // publish (and write through to tiers)
//   // h.lease unlocks the matched path when destroyed
//
// The lease (an RAII lock on the matched radix path) and the page table (sequence
// references) are the only things that keep a reused prefix alive; nothing is held on
// the cache's side between calls.
//
// Engine thread only.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <memory>
#include <span>
#include <vector>

#include "engine/approximate/block_index.h"
#include "engine/cache_report.h"
#include "kv/kv_namespace.h"
#include "kv/kv_plan.h"
#include "kv/page_pool.h"
#include "kv/page_table.h"
#include "kv/radix_index.h"
#include "kv/state_store.h"
#include "tier/prefix_transfer.h"

namespace pc {

class KvTiers;
struct TierWrites;  // engine/kv_tiers.h
class RecurrentState;

// A recurrent-state snapshot a sequence took: the state after its first `at` tokens
// (state->n_tokens() == at), to store with the prefix (PrefixCache::insert).
struct PrefixState {
  int32_t at = 0;
  const RecurrentState* state = nullptr;
};

// Keeps a matched radix path from eviction (RadixIndex::lock) until destroyed or reset.
class PrefixLease {
 public:
  PrefixLease() = default;
  PrefixLease(RadixIndex* index, int32_t node) : index_(index), node_(node) {
    if (index_) index_->lock(node_);
  }
  ~PrefixLease() { reset(); }
  PrefixLease(PrefixLease&& o) noexcept : index_(o.index_), node_(o.node_) { o.index_ = nullptr; }
  PrefixLease& operator=(PrefixLease&& o) noexcept {
    if (this != &o) {
      reset();
      index_ = o.index_;
      node_ = o.node_;
      o.index_ = nullptr;
    }
    return *this;
  }
  PrefixLease(const PrefixLease&) = delete;
  PrefixLease& operator=(const PrefixLease&) = delete;
  void reset() {
    if (index_) index_->unlock(node_);
    index_ = nullptr;
  }

 private:
  RadixIndex* index_ = nullptr;
  int32_t node_ = -1;
};

struct PrefixHit {
  explicit PrefixHit(PagePool& pool) : table(pool) {}
  int32_t length = 0;  // tokens whose KV the table already holds
  PageTable table;     // aligned: the cached prefix, ready to append to
  PrefixLease lease;
};

class PrefixCache {
 public:
  // enabled = false: attach() never reuses and insert() never publishes.
  // state_floats > 0: the model has recurrent layers, whose state has that many floats;
  // prefixes resume only where a state snapshot is stored (docs/architecture.md "State
  // beside KV").
  PrefixCache(PagePool& pool, bool enabled, int64_t state_floats = 0);
  ~PrefixCache();
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // The tiers below memory, or null (set once, by the engine).
  void set_tiers(KvTiers* tiers) { tiers_ = tiers; }

  // The longest cached prefix of `tokens` (never all of them: the last token is
  // computed to produce logits), referenced into a fresh table. Counts a hit or miss.
  // `whole` = false: the tokens are followed by more of the prompt, so all of them
  // may come from the cache.
  // With states: the match is cut back to the longest prefix that ends at a stored
  // snapshot, which is restored into *state (reset when there is none) — or, when
  // *state is already the state after its first n_tokens() tokens of `tokens` (a
  // parked sequence's own) and the index holds their KV, to those, *state kept.
  PrefixHit attach(const KvNamespace& ns, std::span<const int32_t> tokens, bool whole = true,
                   RecurrentState* state = nullptr);

  // When a lower tier may hold more of `tokens` than memory does, asks it (off this
  // thread) and returns true; done(tokens restored) runs later on the engine thread
  // (KvTiers::poll). Returns false when there is nothing to ask. Only whole pages can
  // come from a tier, and with states a snapshot with the partial page it ends in:
  // asked whenever memory's latest snapshot ends before the prompt's last token.
  bool promote(const KvNamespace& ns, std::span<const int32_t> tokens, std::function<void(int32_t)> done);
  // Synchronous promotion (tools and tests that run one prompt to completion).
  void promote_now(const KvNamespace& ns, std::span<const int32_t> tokens);

  // Publishes the KV of a finished (or preempted) sequence: tokens[i] is the token in
  // the table's slot i; memory only (add_tier_writes says what goes below it).
  // `blocks` (token ranges within `tokens`) are recorded in the block index.
  // `states` (with_states only): snapshots to store at the nodes ending at their
  // positions (split there), while the pool can supply their pages; a position that
  // already holds one keeps it (the state after a prefix is a function of it).
  void insert(const KvNamespace& ns, std::span<const int32_t> tokens, const PageTable& table,
              std::span<const KvBlock> blocks = {}, std::span<const PrefixState> states = {});
  // What an insert of `tokens` (a prompt of n_prompt tokens and its reply) writes
  // through to the tiers: the chains the next turn and a repeat of the prompt probe,
  // and the snapshots inserted with them. Nothing when the cache is disabled.
  void add_tier_writes(std::span<const int32_t> tokens, int32_t n_prompt, std::span<const PrefixState> states,
                       TierWrites& w) const;

  // Tokens of `blocks` (ranges of `tokens`) from `from` on whose KV the block index
  // holds at some position: what reusing moved blocks could save.
  int64_t reusable_tokens(const KvNamespace& ns, std::span<const int32_t> tokens,
                          std::span<const KvBlock> blocks, int32_t from);

  bool enabled() const { return enabled_; }
  bool with_states() const { return state_floats_ > 0; }
  int64_t state_floats() const { return state_floats_; }

  // Lifetimes (docs/api.md "Lifetimes", RadixIndex::retain): keeps the cached prefix
  // `tokens` from LRU eviction until now + lifetime; false beyond the retention limit
  // or when it is not cached. retained_prefix: the longest retained prefix of tokens.
  using Clock = RadixIndex::Clock;
  bool retain(const KvNamespace& ns, std::span<const int32_t> tokens, Clock::duration lifetime,
              Clock::time_point now, Clock::time_point* until) {
    return index_.retain(ns, tokens, lifetime, now, until);
  }
  RadixIndex::Retained retained_prefix(const KvNamespace& ns, std::span<const int32_t> tokens) const {
    return index_.retained_prefix(ns, tokens);
  }
  void set_retention_limit(int64_t pages) { index_.set_retention_limit(pages); }
  int64_t retained_pages() const { return index_.stats().retained_pages; }

  // Frees at least `bytes` of unreferenced cached pages, least recently used first
  // (the page pool's reclaimer); retained and pinned entries stay.
  size_t reclaim(size_t bytes) { return index_.evict(bytes); }

  // The tiers' door (engine/kv_tiers.h): a prefix a tier returned is restored into
  // fresh pages and inserted (never written back to the tiers); returns the tokens the
  // index did not have, or -1 when its pages could not be restored. A snapshot is the
  // cached part of `tokens` (all of them included) with references on its pages, for a
  // tier write, taken without counting a use or splitting a node (tier/prefix_transfer.h).
  int32_t restore(const KvNamespace& ns, const Entry& entry);
  // A chain's links read from the tiers (tier/entry_key.h): `tokens` is the prefix they
  // end, links[0] starting at `from` (a multiple of the page size); the index must still
  // hold tokens [0, from) (their pages are shared, not copied). Returns the tokens the
  // index did not have, or -1 when memory lost [0, from) or the links' pages could not
  // be restored.
  int32_t restore_chain(const KvNamespace& ns, std::span<const int32_t> tokens, int32_t from,
                        std::span<const Entry> links);
  PrefixSnapshot snapshot(const KvNamespace& ns, std::span<const int32_t> tokens, bool page_aligned);
  // A state entry read from the tiers (tier/entry.h): the state after `tokens`, whose
  // last link.start.. tokens' KV the entry holds (the index must hold [0, start)).
  // Restores that page and stores the snapshot at the node ending at tokens.size().
  // Returns the tokens the index did not have (0 or more), or -1 when memory lost
  // [0, start), the pages or the snapshot could not be stored, or the entry's state is
  // not this model's size.
  int32_t restore_state(const KvNamespace& ns, std::span<const int32_t> tokens, const Entry& entry);
  // The snapshots stored on the path of `tokens` (at or before its end), latest first,
  // at most max_count: position and floats (copied), to write to a tier that lost its
  // entries or to give a lifetime.
  std::vector<std::pair<int32_t, std::vector<float>>> states_on(const KvNamespace& ns, std::span<const int32_t> tokens,
                                                                size_t max_count = SIZE_MAX) const;
  // Every exact prefix the index holds (root → leaf), to write again to a tier that
  // lost its entries.
  std::vector<std::pair<KvNamespace, std::vector<int32_t>>> resident_prefixes() const;

  // The longest cached prefix of `tokens` (at most max_length), without counting a
  // use: its slices, and a lease that keeps them while the caller copies or attaches
  // them (approximate continuation).
  struct Peek {
    int32_t length = 0;
    std::vector<PageSlice> slices;  // KV of tokens [0, length)
    PrefixLease lease;
  };
  Peek peek(const KvNamespace& ns, std::span<const int32_t> tokens, int32_t max_length);
  // Where the block index finds the KV of a block's tokens (engine/block_index.h).
  std::optional<BlockHit> block_hit(const KvNamespace& ns, std::span<const int32_t> tokens) {
    return blocks_.find(index_, ns, tokens);
  }

  // The admin face (engine/prefix_cache_admin.cc, composed by engine/cache_admin.h):
  // plain data in and out.
  PrefixCounters counters(bool with_metadata) const;
  std::vector<CacheScope> scopes() const;                      // every kind's scope
  std::vector<PrefixEntryView> entries(const KvNamespace& ns) const;
  std::map<CacheScope, NamespaceBytes> usage() const;          // every kind counted as its scope's
  bool pin(const KvNamespace& ns, std::span<const int32_t> tokens);
  bool unpin(const KvNamespace& ns, std::span<const int32_t> tokens);
  bool set_expiry(const KvNamespace& ns, std::span<const int32_t> tokens, Clock::time_point at);
  // One entry by its listing id (PrefixEntryView::id, decimal): kRefused evicting a
  // pinned or in-use entry.
  EntryResult entry_op(const KvNamespace& ns, const std::string& id, EntryOp op, size_t* freed);
  // Admin eviction: lifetimes do not stop it (pins do); *retentions_ended += those ended.
  size_t evict(size_t bytes, int64_t* retentions_ended);
  // evict() of `model`'s entries in the scopes `mine` accepts, least recently used
  // first and entries under a lifetime last.
  size_t evict_scopes(const std::string& model, const std::function<bool(const CacheScope&)>& mine,
                      size_t bytes, int64_t* retentions_ended);
  size_t evict_expired(Clock::time_point now);
  // What requests cannot have: each pinned page (a pin keeps its ancestors) by its
  // tenant, and each retained node's page charge (once per node) by its tenant.
  void visit_held(const std::function<void(const std::string& tenant, int32_t page)>& pinned,
                  const std::function<void(const std::string& tenant, int64_t pages)>& retained) const;
  std::optional<BlockLocation> find_block(const KvNamespace& ns, std::span<const int32_t> tokens);

 private:
  // Appends to `table` the whole cached pages of tokens' first n (a multiple of the page
  // size) as memory holds them; false when memory no longer has them all.
  bool attach_cached_head(const KvNamespace& ns, std::span<const int32_t> tokens, int32_t n, PageTable& table);
  // Appends a tier entry's pages, restored into fresh ones; false (and `table`
  // released) when that fails.
  bool attach_restored(const Entry& e, PageTable& table);
  friend struct EngineTestPeer;  // tests/engine_test_peer.h
  void store_states(const KvNamespace& ns, std::span<const int32_t> tokens, std::span<const PrefixState> states);
  PagePool& pool_;
  StateStore states_;  // before index_: the index releases snapshots as it goes
  RadixIndex index_;
  BlockIndex blocks_;
  KvTiers* tiers_ = nullptr;
  bool enabled_;
  int64_t state_floats_;
};

}  // namespace pc
