// Helpers for the kv tests: tiny shapes and the engine's request protocol.
#pragma once
#include <cstdint>
#include <vector>

#include "kv/page_pool.h"
#include "kv/page_table.h"
#include "kv/radix_index.h"

namespace pc::test {

// page_size 4 and 16 bytes per page: byte counts in tests read as page counts × 16.
inline KvShape tiny_shape() { return KvShape{1, 1, 1, 4}; }

inline std::vector<int32_t> seq(std::initializer_list<int32_t> t) { return t; }
inline std::vector<int32_t> range(int32_t first, int32_t last) {  // [first, last]
  std::vector<int32_t> v;
  for (int32_t t = first; t <= last; ++t) v.push_back(t);
  return v;
}
inline std::vector<int32_t> cat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// One request as the engine runs it, minus the forward pass.
struct Request {
  PrefixMatch match;
  PageTable table;
};

inline Request start(RadixIndex& index, PagePool& pool, const KvNamespace& ns,
                     const std::vector<int32_t>& prompt) {
  Request r{index.match_prefix(ns, prompt, int32_t(prompt.size()) - 1), PageTable(pool)};
  index.lock(r.match.node);
  r.table = PageTable::from_slices(pool, r.match.slices);
  return r;
}

inline void finish(RadixIndex& index, const KvNamespace& ns, const std::vector<int32_t>& tokens,
                   Request& r) {
  index.insert(ns, tokens, r.table);
  r.table.release();
  index.unlock(r.match.node);
}

// start + prepare_append(all uncached tokens) + finish. Returns the match length.
inline int32_t run(RadixIndex& index, PagePool& pool, const KvNamespace& ns,
                   const std::vector<int32_t>& tokens) {
  Request r = start(index, pool, ns, tokens);
  const int32_t len = r.match.length;
  if (!r.table.prepare_append(int32_t(tokens.size()) - len)) return -1;
  finish(index, ns, tokens, r);
  return len;
}

inline void expect_accounting_adds_up(const PagePool& pool) {
  pool.check_invariants();
  if (pool.bytes_in_use() + pool.bytes_cached() + pool.bytes_free() != pool.bytes_capacity()) {
    throw std::logic_error("pool bytes do not add up");
  }
}

}  // namespace pc::test
