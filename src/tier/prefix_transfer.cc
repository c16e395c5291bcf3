#include "tier/prefix_transfer.h"

#include <algorithm>

namespace pc {

bool restore_pages(PagePool& pool, const Entry& entry, PageTable& table) {
  KvPageStore* kv = pool.store();
  const KvShape& s = pool.shape();
  const KvShape& e = entry.info.shape;
  if (!kv || s.n_layer != e.n_layer || s.n_kv_head != e.n_kv_head || s.head_dim != e.head_dim ||
      s.page_size != e.page_size)
    return false;
  if (!table.prepare_append(entry.info.n_tokens())) return false;
  std::vector<int32_t> pages;
  pages.reserve(table.entries().size());
  for (const PageEntry& p : table.entries()) pages.push_back(p.page);
  if (restore_entry(entry, *kv, pages) != EntryError::kOk) {
    table.release();
    return false;
  }
  return true;
}

PrefixSnapshot snapshot_of(PagePool& pool, std::span<const int32_t> tokens, const PageTable& cached,
                           bool page_aligned) {
  PrefixSnapshot snap{{}, {}, PageTable(pool)};
  int32_t n = std::min<int32_t>(int32_t(cached.n_tokens()), int32_t(tokens.size()));
  const int32_t P = pool.page_size();
  if (page_aligned && n != int32_t(tokens.size())) n = n / P * P;
  if (n <= 0) return snap;
  snap.tokens.assign(tokens.begin(), tokens.begin() + n);
  const auto entries = cached.entries().first(size_t((n + P - 1) / P));
  snap.table.attach(entries);
  for (const PageEntry& e : entries) snap.pages.push_back(e.page);
  return snap;
}

}  // namespace pc
