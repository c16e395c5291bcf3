// Radix prefix index: which token prefixes have their KV cached, and in which pages.
//
// One token-granular radix tree per namespace; all trees share one node arena and
// one LRU, so eviction is global. A node covers a run of tokens and the page slices
// holding their KV (the slices' sizes add up to the run length). Boundaries fall
// anywhere, mid-page included, so two nodes may reference the same page (different
// slots); each slice holds one cache reference on its page (PagePool::ref_cache).
//
//   ns {smollm, f16, ""} root
//    └─ [1 2 3 4 5 6]         A[0,4) B[0,2)        page_size 4
//        ├─ [7 8]             B[2,4)               ← B is referenced by two nodes
//        └─ [9 9 9]           C[2,4) D[0,1)        ← C: copy-on-write of B, slots 0-1
//                                                     are copies of tokens 5, 6
// Invariants
//  - aligned: the token at depth d (0-based from the root) is in slot d % page_size;
//    matched slices therefore rebuild an aligned PageTable (PageTable::from_slices).
//  - slice slots are below their page's fill, so they never change while referenced.
//  - lock_ref(n) = direct locks of n + sum of lock_ref of its children: a lock taken
//    on a node counts on its whole path to the root.
//  - evictable = a non-root leaf with lock_ref == 0 and pins == 0. Eviction pops the
//    least recently used evictable leaf; a parent left childless becomes a candidate.
//  - expiry (TTL): a node past its expiry goes with its whole subtree (pinned or
//    not) once no sequence locks it, before any LRU eviction; a split node's upper
//    half inherits the expiry, so the run up to the entry's branch point expires.
//  - state snapshots (hybrid models, kv/state_store.h): a node may hold one snapshot
//    of the recurrent state after its last token (depth + run length tokens). It is a
//    cache reference of the node: released when the node is evicted; a split keeps
//    it on the deeper half (the id), which still ends at the same depth.
//  - retention (a sliding lifetime, retain()): until `retain_until` the node and its
//    ancestors are not evicted by LRU (like a pin); every request match or insert
//    through the node re-arms it to now + its lifetime. Retained nodes are charged the pages of
//    their whole prefix (ceil(end depth / page size), shared ancestors counted once
//    per retained node: an upper bound) and the charges stay within the retention
//    limit. A lapsed retention is released (the node is an LRU candidate again) by
//    release_lapsed(), which evict() and evict_expired() call first. Expiry (TTL)
//    and evict(..., kOverrideRetention) win over retention.
//
// Engine protocol for one request:
//   PrefixMatch m = index.match_prefix(ns, prompt, prompt.size() - 1);
//   index.lock(m.node);
//   PageTable t = PageTable::from_slices(pool, m.slices);
//   t.prepare_append(prompt.size() - m.length); ... forward pass writes ...
//   index.insert(ns, tokens_with_kv, t);               // prompt + generated tokens
//   t.release();
//   index.unlock(m.node);
//
// Not thread-safe: the engine thread owns the index.
#pragma once
#include <chrono>
#include <climits>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "kv/kv_namespace.h"
#include "kv/lru_heap.h"
#include "kv/page_pool.h"
#include "kv/page_table.h"

namespace pc {

class StateStore;

struct PrefixMatch {
  int32_t length = 0;             // tokens whose KV is cached; < query length
  int32_t node = -1;              // handle for lock()/unlock(): the node where the
                                  // match ends (a root when length == 0; -1 when
                                  // the namespace has no tree)
  std::vector<PageSlice> slices;  // KV of tokens [0, length), in token order
};

struct RadixStats {
  int64_t entries = 0;     // nodes, roots excluded
  int64_t tokens = 0;      // tokens over all nodes
  int64_t bytes = 0;       // bytes of the pages the index references
  int64_t hits = 0;        // matches with length > 0
  int64_t misses = 0;      // matches with length 0
  int64_t hit_tokens = 0;  // sum of matched lengths
  int64_t evicted = 0;     // nodes evicted
  int64_t retained = 0;            // nodes under a retention now
  int64_t retained_pages = 0;      // pages charged to them (see retention above)
  int64_t retention_refused = 0;   // retain() calls refused by the retention limit
  int64_t retention_overridden = 0;  // retentions ended early by an admin eviction
};

class RadixIndex : public PageReclaimer {
 public:
  using Clock = std::chrono::steady_clock;

  // `pool` must outlive the index. The caller wires it: pool.set_reclaimer(&index).
  explicit RadixIndex(PagePool& pool);
  ~RadixIndex() override;  // drops every cache reference
  RadixIndex(const RadixIndex&) = delete;
  RadixIndex& operator=(const RadixIndex&) = delete;

  // Longest cached prefix of `tokens`, at most `max_length` long: the caller says how
  // much it may take (the engine asks for size - 1 where it needs the last token's
  // logits, and for all of it where it does not).
  //   kRequest  a request reusing the prefix: counts a hit or miss, per node and in
  //             stats(), marks the path recently used, and splits the node where the
  //             match ends mid-run so that m.node covers exactly the match.
  //   kPeek     a look (tier promotion checks, write-through snapshots, listings):
  //             changes nothing — no counts, no LRU order, no split. m.node is the
  //             node whose run holds the last matched token (its run may go on past
  //             the match); locking it keeps the matched slices alive.
  enum class MatchUse { kRequest, kPeek };
  PrefixMatch match_prefix(const KvNamespace& ns, std::span<const int32_t> tokens, int32_t max_length,
                           MatchUse use = MatchUse::kRequest);

  // Where a cached token sequence ends: the node whose run holds its last token, and
  // that node's generation. Splits keep the deeper half under the node's id, so an
  // anchor stays valid until the node is evicted; then path_slices() rejects it.
  struct Anchor {
    int32_t node = -1;
    uint32_t gen = 0;
  };
  // The anchor of `tokens` when the whole sequence is cached (no split, no use
  // recorded); node -1 otherwise.
  Anchor anchor(const KvNamespace& ns, std::span<const int32_t> tokens) const;
  // When the anchor is still alive in ns's tree and the tokens at depths
  // [begin, begin + tokens.size()) of its path are `tokens`: appends their KV slices
  // to *out and returns true.
  bool path_slices(const KvNamespace& ns, Anchor a, int32_t begin, std::span<const int32_t> tokens,
                   std::vector<PageSlice>* out) const;

  // Recurrent-state snapshots at node ends (the invariant above). The store releases
  // a node's snapshot when the node is evicted; set once, before any snapshot.
  void set_state_store(StateStore* store) { states_ = store; }
  // The node ending exactly after `tokens` (split there if needed), or -1 when the
  // prefix is not cached; its snapshot handle (-1: none), and setting it (the node
  // must have none; the index owns `handle` from then on).
  int32_t node_ending(const KvNamespace& ns, std::span<const int32_t> tokens) {
    return find_exact(ns, tokens, /*do_split=*/true);
  }
  int32_t node_state(int32_t node) const { return nodes_[node].state; }
  void set_node_state(int32_t node, int32_t handle);
  // The longest prefix of `tokens`, at most `max_length` long, that is cached and
  // ends at a node holding a snapshot: its length (0: none) and the snapshot handle
  // (*handle, -1 when none). Changes nothing (a look, like MatchUse::kPeek).
  int32_t state_prefix(const KvNamespace& ns, std::span<const int32_t> tokens, int32_t max_length,
                       int32_t* handle) const;

  // Lock references along node → root; locked nodes are not evicted. -1 is a no-op.
  void lock(int32_t node);
  void unlock(int32_t node);

  // Caches the KV of a sequence: tokens[i] must be the token in the table's slot i
  // (tokens.size() == table.n_tokens(), table aligned). The uncached suffix becomes a
  // new leaf referencing the table's pages; the cached part keeps its pages.
  // Returns the number of newly cached tokens.
  int32_t insert(const KvNamespace& ns, std::span<const int32_t> tokens, const PageTable& table);

  // Pins the entry ending exactly at `tokens` (splitting a node if needed) so that
  // neither it nor its ancestors are evicted. False when the prefix is not cached.
  bool pin(const KvNamespace& ns, std::span<const int32_t> tokens);
  // Undoes one pin(); false when no pin ends exactly at `tokens`.
  bool unpin(const KvNamespace& ns, std::span<const int32_t> tokens);

  // Evicts expired entries (evict_expired), then least recently used evictable
  // leaves until `bytes` bytes of pages became free or nothing is evictable.
  // kOverrideRetention (admin eviction): when that is not enough, retentions are
  // ended too, soonest to lapse first, and their entries evicted (pins still hold).
  // Returns the bytes freed.
  enum class Retention { kRespect, kOverrideRetention };
  size_t evict(size_t bytes, Retention r = Retention::kRespect);

  // Retention: the entry ending exactly at `tokens` (splitting a node if needed) is
  // kept from LRU eviction until now + lifetime, re-armed by every match through it.
  // An entry already retained keeps the later end and the longer lifetime. False
  // (nothing changes) when the prefix is not cached or retaining it would take the
  // charged pages past the limit; *until gets the end on success.
  bool retain(const KvNamespace& ns, std::span<const int32_t> tokens, Clock::duration lifetime,
              Clock::time_point now, Clock::time_point* until);
  // Pages retained entries may be charged in all (retain() refuses beyond it).
  void set_retention_limit(int64_t pages) { retention_limit_ = pages; }
  int64_t retention_limit() const { return retention_limit_; }
  // Ends retentions that lapsed by `now` (their nodes become LRU candidates).
  void release_lapsed(Clock::time_point now);
  bool has_retained() const { return stats_.retained > 0; }
  // The longest retained prefix of `tokens` (no split, nothing re-armed): its length
  // (0: none) and when its retention ends.
  struct Retained {
    int32_t tokens = 0;
    Clock::time_point until = Clock::time_point::min();
  };
  Retained retained_prefix(const KvNamespace& ns, std::span<const int32_t> tokens) const;

  // Sets the expiry of the entry ending exactly at `tokens` (splitting a node if
  // needed); it and every entry extending it are dropped once `at` has passed.
  // Clock::time_point::max() clears it. False when the prefix is not cached.
  bool set_expiry(const KvNamespace& ns, std::span<const int32_t> tokens, Clock::time_point at);
  // Drops every expired node that no sequence locks, with its subtree. O(nodes)
  // when some node has an expiry, O(1) otherwise. Returns the bytes freed.
  size_t evict_expired(Clock::time_point now);
  size_t reclaim(size_t bytes) override { return evict(bytes); }

  RadixStats stats() const;
  // Whether any entry is pinned (O(1): admission checks ask on every request).
  bool has_pins() const { return n_pinned_ > 0; }
  // One entry by the id a listing gives it (a leaf: for_each_leaf).
  // Whether `id` is a live leaf of ns's tree.
  bool is_entry(const KvNamespace& ns, int32_t id) const;
  // Pins node `id` itself (as pin() does the node ending at a prompt).
  bool pin_entry(int32_t id);
  // Undoes one pin of the deepest pinned node on root → id; false when none is pinned.
  bool unpin_entry(int32_t id);
  // Evicts entry `id` and each ancestor it leaves childless, up to the first one that
  // is pinned, locked or shared with another entry; a lifetime on them ends (an admin
  // eviction wins, counted in retention_overridden). Returns the bytes freed (0 when
  // the entry itself is pinned or in use).
  size_t evict_entry(int32_t id);
  // Approximate heap bytes of the index's own metadata (nodes, runs, slices).
  size_t metadata_bytes() const;

  // Introspection (tests, cache admin).
  struct NodeView {
    int32_t parent;
    std::span<const int32_t> tokens;
    std::span<const PageSlice> slices;
    int32_t lock_ref;
    int32_t pins;
    bool leaf;
    int32_t depth;               // tokens from the root to the start of the run
    int64_t hits;                // matches that reused at least one token of the run
    Clock::time_point created;   // when its tokens were inserted
    Clock::time_point used;      // last match or insert through it
    Clock::time_point expires;   // Clock::time_point::max(): never
    Clock::time_point retain_until;  // Clock::time_point::min(): not retained
    Clock::duration retain_for;      // the lifetime each match re-arms
    int64_t retain_pages;            // pages charged while retained (0: not retained)
    int32_t state;                   // snapshot after its last token (-1: none)
  };
  NodeView node(int32_t id) const;
  // Namespaces that have a tree, and the leaves of one namespace's tree (the
  // entries a listing shows: each is the prefix root → leaf), depth first. fn
  // must not change the index.
  std::vector<KvNamespace> namespaces() const;
  void for_each_leaf(const KvNamespace& ns, const std::function<void(int32_t leaf)>& fn) const;
  // Cache references the index holds, per page: adds 1 to per_page[p] per slice.
  void count_page_refs(std::vector<int32_t>& per_page) const;
  // Checks the invariants above and the counters; throws std::logic_error.
  void check_invariants() const;

 private:
  struct Child {
    int32_t token;  // first token of the child's run
    int32_t node;
  };
  struct Node {
    int32_t parent = -1;             // -1: a namespace root (or a free node)
    bool alive = false;
    int32_t depth = 0;               // tokens from the root to the start of the run
    int32_t lock_ref = 0;
    int32_t pins = 0;
    uint64_t last_use = 0;           // logical clock
    uint32_t gen = 0;                // bumped on free: invalidates stale heap entries
    int64_t hits = 0;                // matches through it (listings)
    Clock::time_point created, used; // wall time of insertion and last use (listings)
    Clock::time_point expires = Clock::time_point::max();
    Clock::time_point retain_until = Clock::time_point::min();
    Clock::duration retain_for{};
    int64_t retain_pages = 0;        // pages charged while retained
    int32_t state = -1;              // StateStore handle: snapshot after the run's end
    std::vector<int32_t> tokens;     // the run
    std::vector<PageSlice> slices;   // its KV, sizes summing to tokens.size()
    std::vector<Child> children;     // sorted by token
  };

  int32_t new_node();
  void free_node(int32_t id);
  int32_t find_root(const KvNamespace& ns) const;
  int32_t get_root(const KvNamespace& ns);
  void drop_root_if_empty(int32_t id);
  int32_t find_child(int32_t node, int32_t token) const;
  void add_child(int32_t parent, int32_t child);
  void remove_child(int32_t parent, int32_t child);
  int32_t descend(int32_t root, std::span<const int32_t> tokens, bool split, int32_t* len);
  int32_t split(int32_t node, int32_t k);
  int32_t add_leaf(int32_t parent, std::span<const int32_t> tokens, int32_t start,
                   const PageTable& table);
  void ref_page(int32_t page);
  size_t unref_page(int32_t page);  // bytes freed in the pool (0 or one page)
  void touch(int32_t node);
  bool evictable(int32_t id) const;
  void push_lru(int32_t id);
  int32_t pop_lru();
  size_t remove_leaf(int32_t id);
  size_t remove_subtree(int32_t id);  // bytes freed
  void set_node_expiry(int32_t id, Clock::time_point at);
  void end_retention(int32_t id);
  bool retained(int32_t id) const { return nodes_[id].retain_until != Clock::time_point::min(); }
  int32_t find_exact(const KvNamespace& ns, std::span<const int32_t> tokens, bool split);

  PagePool* pool_;
  StateStore* states_ = nullptr;
  std::map<KvNamespace, int32_t> roots_;
  std::vector<Node> nodes_;          // arena; ids are indices
  std::vector<int32_t> free_nodes_;  // dead ids, reused first
  LruHeap lru_;                      // evictable leaves, least recently used first
  std::vector<int32_t> page_refs_;   // [n_pages] cache references this index holds
  int32_t n_pages_held_ = 0;         // pages with page_refs_ > 0
  std::vector<int32_t> path_;        // scratch for match_prefix
  uint64_t clock_ = 0;
  int64_t n_expiring_ = 0;           // alive nodes with an expiry
  int64_t n_pinned_ = 0;             // alive nodes with pins > 0
  int64_t retention_limit_ = INT64_MAX;  // pages retained nodes may be charged
  Clock::time_point next_lapse_ = Clock::time_point::max();  // earliest retain_until
  RadixStats stats_;
};

}  // namespace pc
