// The engine's link to the KV tiers below memory (src/tier, docs/tiers.md): an ordered
// list of KvTier (tier/kv_tier.h), fastest first; today the disk tier, then the Redis
// tier shared by servers.
//
//   memory (radix index, module store)
//     │  write-through when a sequence finishes / a module is encoded   (worker thread)
//     ▼
//   tiers()[0] (disk) ─ tiers()[1] (Redis) ─ ...     every tier gets every entry
//     ▲
//     │  promotion: a prompt's prefix is a chain of one-page links (tier/entry_key.h),
//     │  walked down the list: each tier continues where the faster ones stopped, what
//     │  a slower one supplies is copied into the faster ones, and the links are
//     │  restored into fresh pages beside memory's own and inserted into the index. A
//     │  module's segments are looked up the same way, each one entry.
//
// Why write-through rather than write-on-eviction: an entry must be in Redis before
// another server can reuse it, and on disk before a crash or restart, which eviction
// may never precede; and an eviction has to free pages at once, while serialization
// would have to keep them. Eviction from memory therefore never loses an entry that
// reached a lower tier. A prefix is written as the links of its chain: only those not
// written (or read) recently, and of those only the ones a tier lacks (KvTier::has), so
// a conversation's turns write each page once per tier. An entry or link already
// written is not written again until half the Redis TTL passed. Beyond max_pending_writes in flight, writes wait in a queue of
// their own (deferred, holding their pages) and start as earlier ones finish; only
// when the deferred writes would hold more than a quarter of KV memory is a write
// dropped, and counted (writes_skipped). flush() waits for the deferred ones too.
//
// A shared tier losing its entries. tick() (engine thread, every loop of the
// scheduler) asks each tier for its generation (KvTier::generation) every
// check_interval_ms, on the worker. When a tier's generation changes (Redis restarted
// empty), every prefix memory holds (each radix leaf) is written again: the chain of
// its whole pages, which holds every shorter prefix of its path. Every
// entry a listable tier (the disk) holds is copied into it, a few per job; so sessions
// cached before a Redis restart are found by other servers again without waiting for
// their next turn or for half the TTL.
//
// Threads. Everything here is called on the engine thread. Lookups, serialization and
// I/O run on a TierWorker thread; their completions run in poll() on the engine thread,
// which is the only place the page pool, index and module store are touched. While a
// write is in flight its snapshot holds sequence references on the pages it reads, so
// they cannot be freed or reused (the slots read are below their fill: read-only).
//
// Prefix promotion is asynchronous: the request waits, other sequences keep stepping.
// Module loads come in both forms: load_module_async looks up on the worker and
// restores in poll(); load_module does the same I/O on the calling thread.
//
// Counting. The radix index's hit/miss counts are not touched here: lookups peek
// (MatchUse::kPeek) and restores only insert, so the index counts the same requests
// whether or not tiers are configured.
//
// Block entries (the KV of one request part, engine/approximate/block_index.h) let a restarted
// server, or another one behind the same Redis, reuse blocks approximately. A block's
// entry holds its KV with K rotated back to position 0, so the key is the namespace and
// the block's tokens alone, whatever position it was computed at; a reuse rotates it to
// where it sits then. Its namespace is the request's with kind KvKind::kBlock.
//
// State entries (hybrid models: the prefix cache has states). Each recurrent-state
// snapshot the prefix cache stores is written beside its prefix's chain as its own entry,
// shaped like the link that would end at its position (the page it falls in, then the
// state; tier/entry.h, docs/tiers.md "Hybrid models"): links are written once per page
// and never rewritten, while snapshots arrive later at positions inside pages. A
// promotion asks for the latest state entry after memory's own snapshot and restores its
// page and state with the links.
//
// Module entries use the entry format of prefixes. Each segment of a module (a run of
// its tokens starting on a fresh page, see kv/module_store.h) is one entry whose
// namespace is the request's with kind KvKind::kModule, the module's digest and the
// segment number: the digest covers the module's content, context and positions, so
// the key cannot meet a prefix's.
#pragma once
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/cache_report.h"
#include "kv/page_pool.h"
#include "kv/page_table.h"
#include "kv/radix_index.h"
#include "tier/kv_tier.h"
#include "tier/tier_options.h"

namespace pc {

class TierWorker;
class PrefixCache;
struct PrefixSnapshot;  // tier/prefix_transfer.h
struct ModuleEntry;  // kv/module_store.h: only the synchronous module forms use it

// What a finished sequence writes through to the tiers, handed over in one call
// (KvTiers::write); positions are within the tokens given with it.
struct TierWrites {
  struct Chain {  // the chain of tokens[0, length) (save_prefix)
    int32_t length = 0;
    int64_t keep_seconds = 0;  // > 0: a lifetime for every link
  };
  struct State {  // a recurrent-state snapshot after tokens[0, at) (save_state)
    int32_t at = 0;
    std::span<const float> state;
    int64_t keep_seconds = 0;  // > 0: a lifetime for the entry
  };
  struct Block {  // a request part's KV, tokens[begin, end) (save_block)
    int32_t begin = 0, end = 0;
  };
  std::vector<Chain> chains;
  std::vector<State> states;
  std::vector<Block> blocks;
  // Copies a block's KV rotated to positions 0.. into `at_zero` (the engine's side:
  // relocation needs the model); false when KV memory has no pages for it.
  std::function<bool(const Block&, PageTable& at_zero)> block_at_zero;

  // A state the writes own (one copied out of the prefix cache), kept for a lifetime.
  void keep_state(int32_t at, std::vector<float> state, int64_t keep_seconds) {
    owned_.push_back(std::move(state));  // (moving a vector keeps its floats where they are)
    states.push_back({at, owned_.back(), keep_seconds});
  }

 private:
  std::vector<std::vector<float>> owned_;
};

// A module restored from the tiers into fresh pages.
struct RestoredModule {
  std::vector<std::vector<PageEntry>> segments;  // [segment]: its pages, slot 0 onward
  PageTable hold;  // one sequence reference on every page above; the caller keeps it
                   // until the pages are referenced elsewhere (stored), then releases
  explicit RestoredModule(PagePool& pool) : hold(pool) {}
};

class KvTiers {
 public:
  // Opens the tiers TierOptions names: disk, then Redis. Throws pc::Error for a disk
  // directory that cannot be used or a malformed Redis URL; an unreachable Redis is
  // not an error (it is retried).
  KvTiers(const TierOptions& opt, PagePool& pool, PrefixCache& prefix);
  // Over the given tiers, fastest first (opt supplies the write-through settings).
  KvTiers(std::vector<std::unique_ptr<KvTier>> tiers, const TierOptions& opt, PagePool& pool,
          PrefixCache& prefix);
  ~KvTiers();  // finishes the writes already queued; completions not yet run are dropped
  KvTiers(const KvTiers&) = delete;
  KvTiers& operator=(const KvTiers&) = delete;

  // Looks for a prefix of `tokens` longer than `have` (the tokens memory already
  // has) down the tiers; restores what it finds into the index and calls
  // done(tokens restored, 0 when nothing) from poll().
  // have_state >= 0 (hybrid models): memory's latest snapshot on the path ends there;
  // the tiers are also asked for the latest state entry after it (the prefix's chain
  // ending before it must be in memory or found in the walk), which is restored with
  // its partial page. The restored count is then at least the tokens the snapshot
  // moved the resume point by.
  void promote_prefix(const KvNamespace& ns, std::span<const int32_t> tokens, int32_t have,
                      std::function<void(int32_t)> done, int32_t have_state = -1);
  // Writes the chain of the whole cached pages of `tokens` to every tier, in the
  // background: the links not written recently that a tier lacks. keep_seconds > 0: a
  // lifetime for every link (KvTier::put), written even when the links were written
  // before. Returns the tokens the chain covers (0: nothing to write).
  int32_t save_prefix(const KvNamespace& ns, std::span<const int32_t> tokens, int64_t keep_seconds = 0);
  // Writes the recurrent state after `tokens` (a snapshot the prefix cache stores) as
  // a state entry beside the prefix's chain (tier/entry.h): the partial page it ends in
  // (held until written) and the state (copied), serialized and written in the
  // background. Skipped when written recently or the prefix is not cached.
  // keep_seconds > 0: a lifetime for the entry (KvTier::put), written even when it was
  // written before.
  void save_state(const KvNamespace& ns, std::span<const int32_t> tokens, std::span<const float> state,
                  int64_t keep_seconds = 0);

  // Everything a finished sequence writes through: its chains (save_prefix), states
  // (save_state) and the blocks not written recently (save_block; block_at_zero is
  // asked for their rotated KV, and once it fails the rest are skipped). Returns the
  // tokens each chain covers, in order (0: nothing to write).
  std::vector<int32_t> write(const KvNamespace& ns, std::span<const int32_t> tokens, const TierWrites& w);

  // A module's segments: [begin, end) ranges of its own tokens, consecutive from 0.
  using Segments = std::vector<std::pair<int32_t, int32_t>>;
  // Looks a module up in the tiers (all segments or nothing) on the worker thread,
  // restores it into fresh pages in poll() and calls done(restored) there, or
  // done(nullptr) when some segment is in no tier or KV memory cannot hold it. The
  // RestoredModule lives until done returns (move its hold out to keep the pages).
  void load_module_async(const KvNamespace& ns, uint64_t digest, std::vector<int32_t> tokens,
                         Segments segments, std::function<void(RestoredModule*)> done);
  // Writes a module's segments to every tier, in the background. segments[i]: the
  // pages of segment i, slot 0 onward; their fills sum to tokens.size() (segment i
  // covers the tokens after those of segments [0, i)). The pages need only stay
  // referenced until this returns (the writes hold their own references).
  void save_module(const KvNamespace& ns, uint64_t digest, std::span<const int32_t> tokens,
                   const std::vector<std::vector<PageEntry>>& segments);

  // Whether a block's entry was written recently (then save_block would skip it).
  bool block_written(const KvNamespace& ns, std::span<const int32_t> tokens) const;
  // Writes a block's entry: `at_zero` holds its KV rotated to positions 0..n-1, packed
  // from slot 0 (a relocated_copy). The table need only live until this returns.
  void save_block(const KvNamespace& ns, std::span<const int32_t> tokens, const PageTable& at_zero);
  // Looks each block up down the tiers (off this thread), restores the ones found into
  // fresh pages in poll() and calls done(tables) there: tables[i] holds block i's KV at
  // positions 0..n-1, or is empty (a miss, or KV memory could not hold it).
  void find_blocks(const KvNamespace& ns, std::vector<std::vector<int32_t>> blocks,
                   std::function<void(std::vector<PageTable>&)> done);

  // The synchronous module forms, over the ones above (the lookup runs on the calling
  // thread). load_module: on success fills `out` (segments with their pages) and
  // appends the table holding the pages' sequence references to `hold` (the caller
  // releases it once the entry is stored).
  bool load_module(const KvNamespace& ns, uint64_t digest, std::span<const int32_t> tokens,
                   const Segments& segments, ModuleEntry* out, std::vector<PageTable>* hold);
  void save_module(const KvNamespace& ns, uint64_t digest, std::span<const int32_t> tokens,
                   const ModuleEntry& entry);

  // Adds what a tier that lost its entries gets again besides the resident prefixes
  // (the module store's entries): `rewrite` writes them and returns how many. Runs on
  // the engine thread.
  void on_reset(std::function<int64_t()> rewrite) { on_reset_.push_back(std::move(rewrite)); }

  // Runs finished jobs' completions (engine thread) and starts deferred writes.
  // Returns how many completions ran.
  size_t poll();
  // poll(), and every check_interval_ms the tiers' generation check (see above).
  void tick();
  // Waits up to timeout_ms for a completion to be ready.
  bool wait(int timeout_ms);
  // Waits for every job and runs its completion.
  void flush();
  size_t in_flight() const;

  TierCounters stats() const { return stats_; }
  // The tiers, fastest first (TierCounters::hits is indexed alike).
  std::vector<const KvTier*> tiers() const;
  // Each tier's own stats, in the same order.
  std::vector<TierStats> tier_stats() const;

  // The admin face (engine/cache_admin.h, engine/kv_tiers_admin.cc): plain data only.
  TierReport report() const;
  // Entries of one model's scope in the tiers that can list theirs (the disk), most
  // recently used first; Redis cannot be listed cheaply (its counters are in report()).
  std::vector<TierEntryView> entries(const std::string& model, const CacheScope& scope) const;
  // Entries and bytes per tier name and scope (every kind of entry counted as its
  // scope's), in the tiers that can list theirs.
  std::map<std::string, std::map<CacheScope, NamespaceBytes>> usage() const;
  const TierOptions& options() const { return opt_; }

 private:
  struct Write;
  struct FoundModule;
  // One entry to copy from a listable tier into one that lost its entries.
  struct Copy {
    size_t from, to;
    uint64_t key;
  };
  bool recently_written(uint64_t key) const;
  bool should_write(uint64_t key);
  // Queues the links of tokens' whole cached pages not written recently (all of them
  // with a lifetime); returns how many.
  size_t queue_chain(const KvNamespace& ns, std::span<const int32_t> tokens, int64_t keep_seconds);
  // Worker thread: writes a chain's links to the tiers lacking them.
  void write_chain(Write& w);
  // A write that stored nothing or was dropped: its keys are written again next time.
  void forget(const Write& w);
  // After a reset: writes again the chain of `tokens` (a radix leaf's path). Returns how
  // many links were queued.
  int64_t rewrite_prefix(const KvNamespace& ns, std::span<const int32_t> tokens);
  // Starts `w` now, or defers it when max_pending_writes are in flight.
  void submit_write(std::shared_ptr<Write> w);
  void start_write(std::shared_ptr<Write> w);
  // Starts deferred writes and copies while fewer than max_pending_writes are in flight.
  void pump();
  size_t max_pending() const;
  int64_t max_deferred_pages() const;
  // The tier `tier` lost its entries: write what memory and the other tiers hold again.
  void rewrite(size_t tier);
  // Every prefix tree leaf's tokens (root → leaf), with its namespace.
  std::vector<std::pair<KvNamespace, std::vector<int32_t>>> resident_prefixes() const;
  // Runs on any thread: the first tier holding what `probe` asks for answers, and its
  // entry is copied into the tiers above it. *tier: the index of that tier (-1: none).
  TierLookup find(const std::function<TierLookup(KvTier&)>& probe, int* tier);
  // Worker thread: the latest state entry after have_state whose chain before it is
  // held (avail: the whole pages memory and the walk have), copied into faster tiers.
  void find_state(const KvNamespace& ns, const KvShape& shape, std::span<const int32_t> query, int32_t avail,
                  int32_t have_state, uint64_t state_bytes, Entry* out, int32_t* at, int* tier, uint64_t* key);
  FoundModule find_module(const KvNamespace& ns, uint64_t digest, std::span<const int32_t> tokens,
                          const Segments& segments);
  // Engine thread: restores what find_module found and counts it; null on a miss or
  // when KV memory cannot hold it.
  std::unique_ptr<RestoredModule> restore_module(FoundModule& f, int64_t n_tokens);

  TierOptions opt_;
  std::vector<std::function<int64_t()>> on_reset_;
  PagePool& pool_;
  PrefixCache& prefix_;  // the only owner of the prefix index: restores and snapshots go through it
  std::vector<std::unique_ptr<KvTier>> tiers_;  // fastest first; fixed after construction
  std::unordered_map<uint64_t, int64_t> written_;  // entry or link key → when written or read (s)
  std::deque<std::shared_ptr<Write>> deferred_;     // writes waiting for a slot, oldest first
  int64_t deferred_pages_ = 0;                      // pages their holds reference
  std::deque<Copy> copies_;                         // entries to copy after a reset
  std::vector<uint64_t> generations_;               // [tier]: last generation seen (0: none yet)
  bool checking_ = false;                           // a generation check is in flight
  std::chrono::steady_clock::time_point next_check_{};
  TierCounters stats_;
  std::unique_ptr<TierWorker> worker_;  // last: stops (finishing writes) before the tiers go
};

// The namespace of a module segment's entry (see above).
KvNamespace module_entry_ns(const KvNamespace& ns, uint64_t digest, size_t segment);

// The namespace of a block's entry (see above).
KvNamespace block_entry_ns(const KvNamespace& ns);

}  // namespace pc
