// Page pool: the bookkeeping of KV pages (the bytes live in a KvPageStore).
//
// Every page has a preallocated descriptor, stored as parallel flat arrays indexed
// by page id (no per-page objects, no node containers):
//
//   page id        0     1     2     3     4     5   ...  n_pages-1
//   seq_refs_    [ 1  ][ 0  ][ 2  ][ 0  ][ 0  ][ 1  ]     references held by page tables
//   cache_refs_  [ 1  ][ 2  ][ 0  ][ 0  ][ 0  ][ 0  ]     references held by cache entries
//   fill_        [ 16 ][ 16 ][ 7  ][ -- ][ -- ][ 3  ]     slots written since allocation
//   next_free_   [ -1 ][ -1 ][ -1 ][ 4  ][ -1 ][ -1 ]     intrusive free list link
//                                   ^head       ^tail
//   use:           in use  cached in use free  free in use
//
// A page is in exactly one of three states, derived from its two reference counts:
//   in use  seq_refs > 0                   a running sequence attends over it
//   cached  seq_refs == 0, cache_refs > 0  only the prefix index (or module store)
//                                          holds it: reusable KV, reclaimable
//   free    seq_refs == 0, cache_refs == 0 on the free list, content meaningless
// The pool keeps one counter per state, so bytes in use + cached + free == capacity
// exactly, at every moment.
//
// Design choice (the SGLang model, not vLLM's): cache entries own their pages through
// `cache_refs`; a cached page is NOT on the free list. Eviction is lazy and demand
// driven: a page released by its last sequence keeps serving hits until alloc() runs
// out of free pages, then asks its PageReclaimer (the radix index) to evict least
// recently used unlocked leaves. Why: a radix node boundary can fall mid-page, so one
// page may back several entries; the tree, which knows leaves and locks, is the right
// place for the LRU, and the pool stays a plain refcount array. Consequently the free
// list never has a page removed from its middle (a cache hit never touches it) and a
// singly linked list suffices: the pages never used wait at its tail in id order
// (initially 0, 1, 2, ...) and a released page goes to its head, so it is the next one
// handed out. A store's memory is provided by the OS on first write (KvStorage), and
// first writes cost a page fault and zeroing each: reusing released pages first (a
// check pass's scratch pages for the copies and forward passes of the same request)
// keeps that cost to the pages the pool really needs at once.
//
// Simulated mode: constructed from a KvShape alone, the pool has no page store and
// copy_slots() is a no-op, so data-structure tests are exact and cheap.
//
// Not thread-safe: the engine thread owns the pool, the tables and the index.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kv/kv_storage.h"

namespace pc {

// Slots [begin, end) of one page: the KV of end - begin consecutive tokens.
struct PageSlice {
  int32_t page = -1;
  int32_t begin = 0;
  int32_t end = 0;
  int32_t size() const { return end - begin; }
  bool operator==(const PageSlice&) const = default;
};

// Something that holds cache references and can drop some to free pages (the radix
// index; later the module store). Called by PagePool::alloc() when no page is free.
class PageReclaimer {
 public:
  virtual ~PageReclaimer() = default;
  // Drops cache references, least recently used first, until at least `bytes` bytes
  // of pages became free or nothing more can be dropped. Returns the bytes freed.
  virtual size_t reclaim(size_t bytes) = 0;
};

class PagePool {
 public:
  // Pool over the pages of `store` (which must outlive the pool).
  explicit PagePool(KvPageStore& store);
  // Pool over the host store `storage` (also what storage() returns).
  explicit PagePool(KvStorage& storage);
  // Simulated pool: page ids and accounting only, no KV bytes.
  PagePool(KvShape shape, int32_t n_pages);
  PagePool(const PagePool&) = delete;
  PagePool& operator=(const PagePool&) = delete;

  // Pages that fit in `bytes` of KV memory (`--kv-memory 4GiB`): bytes / page bytes.
  static int32_t pages_for_bytes(const KvShape& shape, uint64_t bytes);
  // Descriptor bytes per page (the metadata overhead of the pool).
  static constexpr size_t kDescriptorBytes = 4 * sizeof(int32_t);

  const KvShape& shape() const { return shape_; }
  int32_t page_size() const { return shape_.page_size; }
  size_t page_bytes() const { return shape_.bytes_per_page(); }
  int32_t n_pages() const { return int32_t(fill_.size()); }
  KvPageStore* store() const { return store_; }    // null in simulated mode
  // The store when it is the host store, else null (simulated, or another store).
  KvStorage* storage() const { return storage_; }

  // The reclaimer alloc() calls when the free list is empty (null: none).
  void set_reclaimer(PageReclaimer* r) { reclaimer_ = r; }
  PageReclaimer* reclaimer() const { return reclaimer_; }

  // A fresh page with seq_refs 1, cache_refs 0, fill 0, or -1 when no page is free
  // and the reclaimer could not free one.
  int32_t alloc();
  // Sequence references (page tables). unref() frees the page when no reference is left.
  void ref(int32_t page);
  void unref(int32_t page);
  // Cache references (index entries). Returns true when the page became free.
  void ref_cache(int32_t page);
  bool unref_cache(int32_t page);

  int32_t seq_refs(int32_t page) const { return seq_refs_[page]; }
  int32_t cache_refs(int32_t page) const { return cache_refs_[page]; }
  int32_t refcount(int32_t page) const { return seq_refs_[page] + cache_refs_[page]; }
  bool is_free(int32_t page) const { return refcount(page) == 0; }
  // Slots [0, fill) of a page were written since it was allocated and never change
  // again while the page is referenced; appends write at slot >= fill.
  int32_t fill(int32_t page) const { return fill_[page]; }
  void set_fill(int32_t page, int32_t fill);  // fill only grows

  // Copies slots [0, n) of src into dst (KV and positions, KvPageStore::copy_slots;
  // no-op when simulated).
  void copy_slots(int32_t dst, int32_t src, int32_t n);

  // Accounting, exact: n_in_use() + n_cached() + n_free() == n_pages().
  int32_t n_in_use() const { return n_state_[kInUse]; }
  int32_t n_cached() const { return n_state_[kCached]; }
  int32_t n_free() const { return n_state_[kFree]; }
  // Pages with at least one cache reference, whatever their sequence references.
  int32_t n_cache_held() const { return n_cache_held_; }
  size_t bytes_capacity() const { return size_t(n_pages()) * page_bytes(); }
  size_t bytes_in_use() const { return size_t(n_in_use()) * page_bytes(); }
  size_t bytes_cached() const { return size_t(n_cached()) * page_bytes(); }
  size_t bytes_free() const { return size_t(n_free()) * page_bytes(); }

  // Recomputes every counter and walks the free list; throws std::logic_error on a
  // mismatch. O(n_pages): for tests and debug builds.
  void check_invariants() const;

 private:
  enum State { kFree = 0, kCached = 1, kInUse = 2 };
  State state(int32_t page) const {
    return seq_refs_[page] > 0 ? kInUse : cache_refs_[page] > 0 ? kCached : kFree;
  }
  void init(int32_t n_pages);
  void push_free(int32_t page);   // at the tail: the pages never used, in id order
  void push_freed(int32_t page);  // at the head: a page released, reused first
  int32_t pop_free();
  void check_page(int32_t page) const;

  KvShape shape_;
  KvPageStore* store_ = nullptr;
  KvStorage* storage_ = nullptr;  // store_ when it is the host store
  PageReclaimer* reclaimer_ = nullptr;
  std::vector<int32_t> seq_refs_;    // [n_pages]
  std::vector<int32_t> cache_refs_;  // [n_pages]
  std::vector<int32_t> fill_;        // [n_pages] slots, 0..page_size
  std::vector<int32_t> next_free_;   // [n_pages] next page on the free list, -1 = last
  int32_t free_head_ = -1;           // popped by alloc(); released pages are pushed here
  int32_t free_tail_ = -1;           // never-used pages are appended here (construction)
  int32_t n_state_[3] = {0, 0, 0};   // pages per State
  int32_t n_cache_held_ = 0;         // pages with cache_refs > 0
};

}  // namespace pc
