#include "tier/prefix_transfer.h"

#include <climits>

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

int32_t restore_prefix(PagePool& pool, RadixIndex& index, const KvNamespace& ns, const Entry& entry) {
  PageTable table(pool);
  if (!restore_pages(pool, entry, table)) return -1;
  const int32_t added = index.insert(ns, entry.info.tokens, table);
  table.release();  // the index keeps its cache references
  return added;
}

PrefixSnapshot snapshot_prefix(PagePool& pool, RadixIndex& index, const KvNamespace& ns,
                               std::span<const int32_t> tokens, bool page_aligned) {
  // match_prefix never covers the last query token: append a sentinel no prompt has.
  std::vector<int32_t> query(tokens.begin(), tokens.end());
  query.push_back(INT32_MIN);
  PrefixMatch m = index.match_prefix(ns, query, RadixIndex::MatchUse::kPeek);
  PrefixSnapshot snap{{}, {}, PageTable::from_slices(pool, m.slices)};
  int32_t n = m.length;
  const int32_t P = pool.page_size();
  if (page_aligned && n != int32_t(tokens.size())) n = n / P * P;
  if (n == 0) {
    snap.table.release();
    return snap;
  }
  snap.tokens.assign(tokens.begin(), tokens.begin() + n);
  const auto entries = snap.table.entries();
  for (int32_t i = 0; i < (n + P - 1) / P; ++i) snap.pages.push_back(entries[i].page);
  return snap;
}

std::vector<uint8_t> save_prefix(PagePool& pool, RadixIndex& index, const KvNamespace& ns,
                                 std::span<const int32_t> tokens, const SerializeOptions& opt) {
  if (!pool.store()) return {};
  PrefixSnapshot snap = snapshot_prefix(pool, index, ns, tokens);
  if (snap.empty()) return {};
  std::vector<uint8_t> bytes = serialize_entry(*pool.store(), snap.pages, snap.tokens, ns, opt);
  snap.table.release();
  return bytes;
}

}  // namespace pc
