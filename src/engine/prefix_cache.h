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
#include <memory>
#include <span>
#include <vector>

#include "engine/approximate/block_index.h"
#include "kv/kv_namespace.h"
#include "kv/kv_plan.h"
#include "kv/page_pool.h"
#include "kv/page_table.h"
#include "kv/radix_index.h"

namespace pc {

class KvTiers;

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
  PrefixCache(PagePool& pool, bool enabled);
  ~PrefixCache();
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // The tiers below memory, or null (set once, by the engine).
  void set_tiers(KvTiers* tiers) { tiers_ = tiers; }

  // The longest cached prefix of `tokens` (never all of them: the last token is
  // computed to produce logits), referenced into a fresh table. Counts a hit or miss.
  // `whole` = false: the tokens are followed by more of the prompt, so all of them
  // may come from the cache.
  PrefixHit attach(const KvNamespace& ns, std::span<const int32_t> tokens, bool whole = true);

  // When a lower tier may hold more of `tokens` than memory does, asks it (off this
  // thread) and returns true; done(tokens restored) runs later on the engine thread
  // (KvTiers::poll). Returns false when there is nothing to ask. Only whole pages can
  // come from a tier.
  bool promote(const KvNamespace& ns, std::span<const int32_t> tokens, std::function<void(int32_t)> done);
  // Synchronous promotion (tools and tests that run one prompt to completion).
  void promote_now(const KvNamespace& ns, std::span<const int32_t> tokens);

  // Publishes the KV of a finished (or preempted) sequence: tokens[i] is the token in
  // the table's slot i. With tiers, writes through what the next turn probes (all of
  // it) and what a repeat of the prompt probes (its first n_prompt - 1 tokens).
  // `blocks` (token ranges within `tokens`) are recorded in the block index.
  // write_through = false: memory only (KV that must not reach the tiers).
  void insert(const KvNamespace& ns, std::span<const int32_t> tokens, const PageTable& table,
              int32_t n_prompt, std::span<const KvBlock> blocks = {}, bool write_through = true);

  // Tokens of `blocks` (ranges of `tokens`) from `from` on whose KV the block index
  // holds at some position: what reusing moved blocks could save.
  int64_t reusable_tokens(const KvNamespace& ns, std::span<const int32_t> tokens,
                          std::span<const KvBlock> blocks, int32_t from);
  BlockIndex& blocks() { return blocks_; }

  bool enabled() const { return enabled_; }
  RadixIndex& index() { return index_; }
  const RadixIndex& index() const { return index_; }

 private:
  PagePool& pool_;
  RadixIndex index_;
  BlockIndex blocks_;
  KvTiers* tiers_ = nullptr;
  bool enabled_;
};

}  // namespace pc
