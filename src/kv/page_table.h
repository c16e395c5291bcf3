// Page table: the KV of one sequence, as an ordered list of (page, filled slots).
//
//   entries_   (page 7, 16) (page 2, 16) (page 9, 5)      page_size 16, 37 tokens
//               tokens 0-15  tokens 16-31 tokens 32-36
//
// Entry i holds slots [0, filled) of its page; the forward pass attends over the
// entries in order. The table holds one sequence reference (PagePool::ref) on each of
// its pages, so pages are shared between tables and with the prefix index by
// reference, never copied, except in one case:
//
// Copy-on-write. Slots below a page's fill are read-only for as long as the page is
// referenced. The last page is appended to in place only when this table is its
// only sequence holder AND the page's fill equals this entry's filled (nobody wrote
// past our last token). Otherwise — another table shares it, or the page holds other
// tokens' KV beyond our last slot (a prefix hit that ended mid-page) — prepare_append
// first copies our filled slots into a fresh page (KvStorage::copy_slots) and
// swaps it in. Cache references do not force a copy: an index entry only covers
// slots below the fill, which an in-place append never touches (so a chat turn that
// extends the previous turn's exact tokens appends into the cached page).
//
// Tables built by the radix index are aligned: token t lives in entry t / page_size,
// slot t % page_size (every entry is full except the last).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "kv/page_pool.h"

namespace pc {

struct PageEntry {
  int32_t page = -1;
  int32_t filled = 0;  // slots [0, filled) hold this sequence's tokens
  bool operator==(const PageEntry&) const = default;
};

// Where the forward pass writes the K/V of one new token.
struct SlotRef {
  int32_t page = -1;
  int32_t slot = 0;
  bool operator==(const SlotRef&) const = default;
};

class PageTable {
 public:
  explicit PageTable(PagePool& pool) : pool_(&pool) {}
  ~PageTable() { release(); }
  PageTable(PageTable&& o) noexcept;
  PageTable& operator=(PageTable&& o) noexcept;
  PageTable(const PageTable&) = delete;
  PageTable& operator=(const PageTable&) = delete;

  // A table over a cached prefix: `slices` from RadixIndex::match_prefix, in token
  // order. Slices of one page position collapse into one entry: a slice that starts
  // at slot s > 0 continues the previous entry, whose filled must be s (the page of
  // the later slice holds, in slots [0, s), the KV of the same preceding tokens).
  // Adds one sequence reference per entry.
  static PageTable from_slices(PagePool& pool, std::span<const PageSlice> slices);
  // A second table over the same pages (e.g. parallel samples); both copy-on-write.
  PageTable share() const;

  // Makes room for `n` more tokens: copy-on-write of a shared or read-only last
  // page, then fresh pages. On success the table holds n_tokens() + n tokens and
  // appended() lists, for each new token in order, the (page, slot) to write its K/V
  // and position into. Returns false when the pool cannot supply the pages; the
  // table is then unchanged (the reclaimer may have evicted cache entries).
  bool prepare_append(int32_t n);
  std::span<const SlotRef> appended() const { return appended_; }

  // Appends entries of pages held elsewhere (e.g. a cached module's KV), by
  // reference. Entries may be partially filled: attention visits each entry's
  // filled slots in order, so a table is no longer aligned after attach()
  // (such tables are not inserted into the radix index). The next append
  // starts a fresh page, so attached pages are never written or copied.
  void attach(std::span<const PageEntry> entries);
  // Makes the next append start a fresh page (e.g. where a module segment begins).
  void seal() { sealed_ = !entries_.empty(); }

  // Drops this table's references; the table becomes empty.
  void release();
  // Keeps the first n tokens and drops the rest: undoes slots a prepare_append
  // reserved but no forward pass wrote (a sequence preempted after its step was
  // planned), so the table covers exactly the tokens whose KV exists. Pages left
  // with no slot are released; the pages' fills stay (fills only grow), so a later
  // append to the shortened last page copies it first.
  void truncate(int32_t n);

  int32_t n_tokens() const { return n_tokens_; }
  std::span<const PageEntry> entries() const { return entries_; }
  PagePool& pool() const { return *pool_; }

 private:
  bool last_needs_copy() const;
  void copy_last_into(int32_t fresh);

  PagePool* pool_;
  std::vector<PageEntry> entries_;
  int32_t n_tokens_ = 0;
  std::vector<SlotRef> appended_;  // reused across calls: no allocation once warm
  bool sealed_ = false;            // the next append starts a new page (after attach)
  std::vector<int32_t> fresh_;     // pages allocated by the current prepare_append
};

}  // namespace pc
