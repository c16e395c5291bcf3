// Module store: the KV of encoded PML modules, keyed by content.
//
// A module's KV is its own tokens computed at their schema positions over its
// context (enclosing modules' preceding text). It is kept as segments — runs
// of its tokens, each starting on a fresh page — so that a prompt can leave
// out a parameter's placeholder (its own segment) and reference everything
// else without copying:
//
//   module "reply": "Reply in" [lang placeholder] ", briefly."
//   segment 0  tokens [0, 3)   pages (p7, 3)
//   segment 1  tokens [3, 5)   pages (p8, 2)        ← skipped when lang is given
//   segment 2  tokens [5, 9)   pages (p9, 4)
//
// Entries hold one cache reference per page (PagePool::ref_cache); running
// sequences hold their own sequence references, so evicting an entry never
// pulls pages from under a sequence. Eviction follows the policy the prefix index
// uses (kv/lru_heap.h): expired entries first, then least recently used unpinned
// entries, each victim found in O(log n).
//
// Keys: (namespace, module digest, shift). shift 0 is the module as encoded; a
// shift != 0 entry is a copy of some of its segments with K rotated by that many
// positions (a compact-layout prompt placed it elsewhere), cached so a repeated
// prompt rotates once. erase_digest() drops the module and every such copy.
//
// Not thread-safe: the engine thread owns it.
#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kv/page_pool.h"
#include "kv/page_table.h"
#include "kv/kv_namespace.h"
#include "kv/lru_heap.h"

namespace pc {

struct ModuleKey {
  KvNamespace ns;
  uint64_t digest = 0;   // pml::ModuleLayout::digest: content, context, positions
  int32_t shift = 0;     // RoPE relocation applied to K (0 = schema positions)
  auto operator<=>(const ModuleKey&) const = default;
};

struct ModuleSegment {
  int32_t tok_begin = 0, tok_end = 0;  // indices into the module's own tokens
  std::vector<PageEntry> entries;      // their KV, slot 0 onward
};

struct ModuleEntry {
  using Clock = std::chrono::steady_clock;
  std::string path;                    // for listings
  std::vector<ModuleSegment> segments;
  uint64_t last_use = 0;
  int32_t pins = 0;
  int64_t hits = 0;
  Clock::time_point expires = Clock::time_point::max();  // PML ttl="S": dropped after, pinned or not
  int32_t id = -1;                     // the store's handle (eviction order)
  // The module's tokens when it belongs in the tiers (encoded here and written through,
  // or restored from one; empty otherwise): what writing it again takes when a shared
  // tier lost its entries.
  std::vector<int32_t> tier_tokens;
  int64_t n_tokens() const;
};

struct ModuleStats {
  int64_t entries = 0;
  int64_t tokens = 0;
  int64_t bytes = 0;
  int64_t hits = 0;
  int64_t misses = 0;
  int64_t evicted = 0;
};

class ModuleStore {
 public:
  explicit ModuleStore(PagePool& pool) : pool_(&pool) {}
  ~ModuleStore();
  ModuleStore(const ModuleStore&) = delete;
  ModuleStore& operator=(const ModuleStore&) = delete;

  // The entry for `key`, marked recently used, or nullptr (counted as a miss). An
  // expired entry is dropped here and is a miss.
  const ModuleEntry* find(const ModuleKey& key);
  // The entry for `key` or nullptr, with no hit, miss or use recorded.
  const ModuleEntry* peek(const ModuleKey& key) const;
  // Stores an entry (taking cache references on its pages); replaces an
  // existing one with the same key, keeping its pins, expiry and hits when
  // keep_policy. The new references are taken before the old entry's are dropped,
  // so pages both share are never freed in between.
  void insert(const ModuleKey& key, ModuleEntry entry, bool keep_policy = false);
  bool pin(const ModuleKey& key);
  bool unpin(const ModuleKey& key);
  bool erase(const ModuleKey& key);
  // Drops the entry of (ns, digest) at every shift. Returns the entries dropped.
  int erase_digest(const KvNamespace& ns, uint64_t digest);
  // Drops expired entries, then least recently used unpinned entries until
  // `bytes` bytes of pages became free or nothing is left to drop. Returns the
  // bytes freed.
  size_t evict(size_t bytes);
  // Drops every entry whose expiry has passed. Returns the bytes freed.
  size_t evict_expired(ModuleEntry::Clock::time_point now);

  ModuleStats stats() const;
  bool has_pins() const { return n_pinned_ > 0; }  // O(1)
  const std::map<ModuleKey, ModuleEntry>& entries() const { return entries_; }

 private:
  using Iter = std::map<ModuleKey, ModuleEntry>::iterator;
  size_t drop(Iter it);  // bytes freed
  void touch(ModuleEntry& e);
  bool evictable(const ModuleEntry& e) const { return e.pins == 0; }

  PagePool* pool_;
  std::map<ModuleKey, ModuleEntry> entries_;
  std::vector<Iter> by_id_;          // id → entry (entries_.end(): a free id)
  std::vector<uint32_t> gen_;        // [id] bumped when the id is freed
  std::vector<int32_t> free_ids_;
  LruHeap lru_;
  int64_t n_pinned_ = 0;             // entries with pins > 0
  uint64_t clock_ = 0;
  int64_t hits_ = 0, misses_ = 0, evicted_ = 0;
};

}  // namespace pc
