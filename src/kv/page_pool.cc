#include "kv/page_pool.h"

#include "kv/kv_check.h"

namespace pc {

PagePool::PagePool(KvPageStore& store) : shape_(store.shape()), store_(&store) { init(store.n_pages()); }

PagePool::PagePool(KvStorage& storage) : PagePool(static_cast<KvPageStore&>(storage)) { storage_ = &storage; }

PagePool::PagePool(KvShape shape, int32_t n_pages) : shape_(shape) { init(n_pages); }

void PagePool::init(int32_t n_pages) {
  PC_KV_CHECK(n_pages > 0, "page pool needs at least one page");
  PC_KV_CHECK(shape_.page_size > 0, "page size must be positive");
  seq_refs_.assign(n_pages, 0);
  cache_refs_.assign(n_pages, 0);
  fill_.assign(n_pages, 0);
  next_free_.assign(n_pages, -1);
  for (int32_t p = 0; p < n_pages; ++p) push_free(p);
  n_state_[kFree] = n_pages;
}

int32_t PagePool::pages_for_bytes(const KvShape& shape, uint64_t bytes) {
  const uint64_t per_page = shape.bytes_per_page();
  PC_KV_CHECK(per_page > 0, "KV shape has zero bytes per page");
  const uint64_t n = bytes / per_page;
  return n > uint64_t(INT32_MAX) ? INT32_MAX : int32_t(n);
}

void PagePool::push_free(int32_t page) {
  next_free_[page] = -1;
  if (free_tail_ < 0) {
    free_head_ = page;
  } else {
    next_free_[free_tail_] = page;
  }
  free_tail_ = page;
}

void PagePool::push_freed(int32_t page) {
  next_free_[page] = free_head_;
  free_head_ = page;
  if (free_tail_ < 0) free_tail_ = page;
}

int32_t PagePool::pop_free() {
  const int32_t page = free_head_;
  if (page < 0) return -1;
  free_head_ = next_free_[page];
  if (free_head_ < 0) free_tail_ = -1;
  next_free_[page] = -1;
  return page;
}

void PagePool::check_page(int32_t page) const {
  PC_KV_CHECK(page >= 0 && page < n_pages(), "page id out of range");
}

int32_t PagePool::alloc() {
  if (free_head_ < 0 && reclaimer_ != nullptr) reclaimer_->reclaim(page_bytes());
  const int32_t page = pop_free();
  if (page < 0) return -1;
  PC_KV_DCHECK(refcount(page) == 0, "page on the free list is referenced");
  seq_refs_[page] = 1;
  fill_[page] = 0;
  --n_state_[kFree];
  ++n_state_[kInUse];
  return page;
}

// Each reference change moves the page between states; the counters follow.

void PagePool::ref(int32_t page) {
  check_page(page);
  PC_KV_CHECK(refcount(page) > 0, "ref() of a free page (use alloc)");
  const State before = state(page);
  ++seq_refs_[page];
  --n_state_[before];
  ++n_state_[kInUse];
}

void PagePool::unref(int32_t page) {
  check_page(page);
  PC_KV_CHECK(seq_refs_[page] > 0, "unref() of a page with no sequence reference");
  --seq_refs_[page];
  const State after = state(page);
  --n_state_[kInUse];
  ++n_state_[after];
  if (after == kFree) push_freed(page);
}

void PagePool::ref_cache(int32_t page) {
  check_page(page);
  PC_KV_CHECK(refcount(page) > 0, "ref_cache() of a free page");
  const State before = state(page);
  if (cache_refs_[page]++ == 0) ++n_cache_held_;
  --n_state_[before];
  ++n_state_[state(page)];
}

bool PagePool::unref_cache(int32_t page) {
  check_page(page);
  PC_KV_CHECK(cache_refs_[page] > 0, "unref_cache() of a page with no cache reference");
  const State before = state(page);
  if (--cache_refs_[page] == 0) --n_cache_held_;
  const State after = state(page);
  --n_state_[before];
  ++n_state_[after];
  if (after != kFree) return false;
  push_freed(page);
  return true;
}

void PagePool::set_fill(int32_t page, int32_t fill) {
  check_page(page);
  PC_KV_CHECK(refcount(page) > 0, "set_fill() of a free page");
  PC_KV_CHECK(fill >= fill_[page] && fill <= shape_.page_size, "fill must grow within the page");
  fill_[page] = fill;
}

void PagePool::copy_slots(int32_t dst, int32_t src, int32_t n) {
  check_page(dst);
  check_page(src);
  PC_KV_CHECK(n >= 0 && n <= fill_[src], "copy of unwritten slots");
  if (store_ != nullptr && n > 0) store_->copy_slots(dst, src, n);
}

void PagePool::check_invariants() const {
  int32_t counts[3] = {0, 0, 0};
  int32_t held = 0;
  for (int32_t p = 0; p < n_pages(); ++p) {
    PC_KV_CHECK(seq_refs_[p] >= 0 && cache_refs_[p] >= 0, "negative refcount");
    PC_KV_CHECK(fill_[p] >= 0 && fill_[p] <= shape_.page_size, "fill out of range");
    ++counts[state(p)];
    held += cache_refs_[p] > 0;
  }
  for (int s = 0; s < 3; ++s) PC_KV_CHECK(counts[s] == n_state_[s], "state counter drifted");
  PC_KV_CHECK(held == n_cache_held_, "cache-held counter drifted");
  // The free list holds exactly the unreferenced pages, each once.
  std::vector<char> seen(n_pages(), 0);
  int32_t n_listed = 0, last = -1;
  for (int32_t p = free_head_; p >= 0; p = next_free_[p]) {
    PC_KV_CHECK(!seen[p], "page twice on the free list");
    PC_KV_CHECK(refcount(p) == 0, "referenced page on the free list");
    seen[p] = 1;
    ++n_listed;
    last = p;
  }
  PC_KV_CHECK(last == free_tail_, "free list tail is stale");
  PC_KV_CHECK(n_listed == counts[kFree], "free page missing from the free list");
}

}  // namespace pc
