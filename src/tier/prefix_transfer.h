// Moving cached prefixes between memory (pages + radix index) and tier entries.
//
// Promotion (a lower tier had the prefix):
//   TierLookup r = disk.longest_prefix(ns, shape, prompt_without_last_token);   // worker
//   restore_prefix(pool, index, ns, r.entry);                                   // engine
//   ... then the normal match_prefix hits the restored tokens.
//
// Demotion (memory is evicting, or write-through):
//   PrefixSnapshot s = snapshot_prefix(pool, index, ns, tokens);    // engine: takes refs
//   bytes = serialize_entry(*pool.store(), s.pages, s.tokens, ns);   // worker: reads pages
//   s.table.release();                                               // engine: drops refs
// While the snapshot holds its references the pages cannot be freed or reused, and the
// slots it covers are below their pages' fill, hence read-only: the worker may read them
// without locks (serialize_entry reads only the covered slots of a partial last page).
//
// All functions here run on the engine thread (they touch the pool and the index).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "kv/page_pool.h"
#include "kv/page_table.h"
#include "kv/radix_index.h"
#include "tier/entry.h"

namespace pc {

// Copies the entry's KV into freshly allocated pages and inserts its tokens into the
// index under `ns`. Returns the tokens newly cached by the index (0 when they all were
// cached already), or -1 when the pool has no storage, the shape differs or pages
// cannot be allocated (nothing changes then).
int32_t restore_prefix(PagePool& pool, RadixIndex& index, const KvNamespace& ns, const Entry& entry);

// Copies the entry's KV into fresh pages of an empty `table` (token t in slot t).
// False when the pool has no storage, the shape differs or pages cannot be allocated;
// the table is then left empty.
bool restore_pages(PagePool& pool, const Entry& entry, PageTable& table);

struct PrefixSnapshot {
  std::vector<int32_t> tokens;  // the prefix covered: tokens [0, n)
  std::vector<int32_t> pages;   // aligned pages of those tokens
  PageTable table;              // holds a sequence reference on each page
  bool empty() const { return tokens.empty(); }
};

// The longest cached prefix of `tokens` (all of them included, unlike match_prefix),
// cut down to a multiple of the page size when page_aligned and the prefix is not the
// whole of `tokens` (see tier/entry_key.h: lookups probe those lengths). Empty when
// nothing is cached. Marks the prefix recently used in the index.
PrefixSnapshot snapshot_prefix(PagePool& pool, RadixIndex& index, const KvNamespace& ns,
                               std::span<const int32_t> tokens, bool page_aligned = true);

// snapshot_prefix + serialize_entry + release, synchronously. Empty when nothing is cached.
std::vector<uint8_t> save_prefix(PagePool& pool, RadixIndex& index, const KvNamespace& ns,
                                 std::span<const int32_t> tokens, const SerializeOptions& opt = {});

}  // namespace pc
