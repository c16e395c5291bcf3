#include "kv/page_table.h"

#include <algorithm>
#include <utility>

#include "kv/kv_check.h"

namespace pc {

PageTable::PageTable(PageTable&& o) noexcept
    : pool_(o.pool_), entries_(std::move(o.entries_)), n_tokens_(o.n_tokens_),
      appended_(std::move(o.appended_)), sealed_(o.sealed_), fresh_(std::move(o.fresh_)) {
  o.entries_.clear();
  o.n_tokens_ = 0;
}

PageTable& PageTable::operator=(PageTable&& o) noexcept {
  if (this != &o) {
    release();
    pool_ = o.pool_;
    entries_ = std::move(o.entries_);
    n_tokens_ = o.n_tokens_;
    appended_ = std::move(o.appended_);
    sealed_ = o.sealed_;
    o.entries_.clear();
    o.n_tokens_ = 0;
  }
  return *this;
}

PageTable PageTable::from_slices(PagePool& pool, std::span<const PageSlice> slices) {
  std::vector<PageEntry> entries;  // validated before any reference is taken
  int32_t n_tokens = 0;
  for (const PageSlice& s : slices) {
    PC_KV_CHECK(s.page >= 0 && s.page < pool.n_pages(), "slice page out of range");
    PC_KV_CHECK(s.begin >= 0 && s.begin < s.end && s.end <= pool.page_size(), "bad page slice");
    PC_KV_CHECK(s.end <= pool.fill(s.page) && !pool.is_free(s.page), "slice of unwritten slots");
    if (s.begin == 0) {
      entries.push_back({s.page, s.end});
    } else {
      PC_KV_CHECK(!entries.empty() && entries.back().filled == s.begin,
                  "slice does not continue the previous page");
      entries.back() = {s.page, s.end};
    }
    n_tokens += s.size();
  }
  PageTable t(pool);
  for (const PageEntry& e : entries) pool.ref(e.page);
  t.entries_ = std::move(entries);
  t.n_tokens_ = n_tokens;
  return t;
}

PageTable PageTable::share() const {
  PageTable t(*pool_);
  t.entries_ = entries_;
  t.n_tokens_ = n_tokens_;
  t.sealed_ = sealed_;
  for (const PageEntry& e : entries_) pool_->ref(e.page);
  return t;
}

void PageTable::release() {
  for (const PageEntry& e : entries_) pool_->unref(e.page);
  entries_.clear();
  n_tokens_ = 0;
  appended_.clear();
  sealed_ = false;
}

void PageTable::truncate(int32_t n) {
  PC_KV_CHECK(n >= 0 && n <= n_tokens_, "truncate beyond the table");
  while (n_tokens_ > n) {
    PageEntry& e = entries_.back();
    const int32_t k = std::min(e.filled, n_tokens_ - n);
    e.filled -= k;
    n_tokens_ -= k;
    if (e.filled == 0) {
      pool_->unref(e.page);
      entries_.pop_back();
    }
  }
  appended_.clear();
}

// The last page is partial and someone else may read its slots beyond our fill.
bool PageTable::last_needs_copy() const {
  if (entries_.empty() || sealed_) return false;
  const PageEntry& e = entries_.back();
  if (e.filled == pool_->page_size()) return false;  // full: appends go to a new page
  return pool_->seq_refs(e.page) > 1 || pool_->fill(e.page) != e.filled;
}

void PageTable::copy_last_into(int32_t fresh) {
  PageEntry& e = entries_.back();
  pool_->copy_slots(fresh, e.page, e.filled);
  pool_->set_fill(fresh, e.filled);
  pool_->unref(e.page);
  e.page = fresh;
}

void PageTable::attach(std::span<const PageEntry> entries) {
  for (const PageEntry& e : entries) {
    PC_KV_CHECK(e.filled > 0 && e.filled <= pool_->page_size(), "attached entry with bad fill");
    pool_->ref(e.page);
    entries_.push_back(e);
    n_tokens_ += e.filled;
  }
  sealed_ = !entries.empty();
}

bool PageTable::prepare_append(int32_t n) {
  PC_KV_CHECK(n >= 0, "negative append");
  appended_.clear();
  const int32_t P = pool_->page_size();
  const bool copy = last_needs_copy();
  const int32_t room = entries_.empty() || sealed_ ? 0 : P - entries_.back().filled;
  const int32_t need = int32_t(copy) + (n > room ? (n - room + P - 1) / P : 0);
  // Allocate everything first so that failure leaves the table unchanged.
  fresh_.clear();
  for (int32_t i = 0; i < need; ++i) {
    const int32_t page = pool_->alloc();
    if (page < 0) {
      for (int32_t p : fresh_) pool_->unref(p);
      fresh_.clear();
      return false;
    }
    fresh_.push_back(page);
  }
  size_t next = 0;
  if (copy) copy_last_into(fresh_[next++]);
  while (n > 0) {
    if (entries_.empty() || sealed_ || entries_.back().filled == P) {
      entries_.push_back({fresh_[next++], 0});
      sealed_ = false;
    }
    PageEntry& e = entries_.back();
    const int32_t k = n < P - e.filled ? n : P - e.filled;
    for (int32_t s = e.filled; s < e.filled + k; ++s) appended_.push_back({e.page, s});
    e.filled += k;
    pool_->set_fill(e.page, e.filled);
    n_tokens_ += k;
    n -= k;
  }
  PC_KV_DCHECK(next == fresh_.size(), "allocated pages left unused");
  return true;
}

}  // namespace pc
