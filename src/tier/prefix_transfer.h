// Moving cached prefixes between memory pages and tier entries. The prefix cache owns
// its index (engine/prefix_cache.h): it hands this layer tables of pages and takes
// restored tables back; nothing here touches an index.
//
// Promotion (a lower tier had the prefix):
//   TierLookup r = disk.longest_prefix(ns, shape, prompt_without_last_token);   // worker
//   restore_pages(pool, r.entry, table);   prefix cache: insert(tokens, table)  // engine
//
// Demotion (write-through):
//   PrefixSnapshot s = snapshot_of(pool, tokens, cached_table);     // engine: takes refs
//   bytes = serialize_entry(*pool.store(), s.pages, s.tokens, ns);   // worker: reads pages
//   s.table.release();                                               // engine: drops refs
// While the snapshot holds its references the pages cannot be freed or reused, and the
// slots it covers are below their pages' fill, hence read-only: the worker may read them
// without locks (serialize_entry reads only the covered slots of a partial last page).
//
// All functions here run on the engine thread (they touch the pool).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "kv/page_pool.h"
#include "kv/page_table.h"
#include "tier/entry.h"

namespace pc {

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

// A snapshot of the first cached.n_tokens() tokens of `tokens`, whose KV `cached` (an
// aligned table) holds, cut down to a multiple of the page size when page_aligned and
// that is not the whole of `tokens` (see tier/entry_key.h: lookups probe those
// lengths). Empty when nothing is left.
PrefixSnapshot snapshot_of(PagePool& pool, std::span<const int32_t> tokens, const PageTable& cached,
                           bool page_aligned = true);

}  // namespace pc
