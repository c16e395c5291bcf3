// RadixIndex::check_invariants: recomputes everything the index maintains
// incrementally and compares. O(nodes + pages); for tests and debug builds.
#include <vector>

#include "kv/kv_check.h"
#include "kv/radix_index.h"

namespace pc {

void RadixIndex::check_invariants() const {
  const int32_t P = pool_->page_size();
  std::vector<int32_t> refs(page_refs_.size(), 0);
  int64_t entries = 0, tokens = 0, expiring = 0, pinned = 0, retained = 0, retained_pages = 0;
  for (const auto& [ns, root] : roots_) {
    PC_KV_CHECK(nodes_[root].alive && nodes_[root].parent < 0, "bad root");
    PC_KV_CHECK(nodes_[root].tokens.empty() && nodes_[root].depth == 0, "root holds tokens");
  }
  for (int32_t id = 0; id < int32_t(nodes_.size()); ++id) {
    const Node& n = nodes_[id];
    if (!n.alive) continue;
    expiring += n.expires != Clock::time_point::max();
    pinned += n.pins > 0;
    if (n.retain_until != Clock::time_point::min()) {
      ++retained;
      retained_pages += n.retain_pages;
    }
    // Children: sorted, linked back, keyed by their first token, locks add up.
    int32_t child_locks = 0;
    for (size_t i = 0; i < n.children.size(); ++i) {
      const Child& c = n.children[i];
      const Node& cn = nodes_[c.node];
      PC_KV_CHECK(cn.alive && cn.parent == id, "child not linked to its parent");
      PC_KV_CHECK(cn.tokens.front() == c.token, "child keyed by the wrong token");
      PC_KV_CHECK(i == 0 || n.children[i - 1].token < c.token, "children not sorted");
      PC_KV_CHECK(cn.depth == n.depth + int32_t(n.tokens.size()), "child depth");
      child_locks += cn.lock_ref;
    }
    PC_KV_CHECK(n.lock_ref >= child_locks && n.pins >= 0, "lock count below its children's");
    if (n.parent < 0) continue;  // a root
    PC_KV_CHECK(!n.tokens.empty(), "empty run");
    ++entries;
    tokens += int64_t(n.tokens.size());
    // Slices: cover the run, aligned (depth d in slot d % P), below the page fill.
    int32_t d = n.depth;
    for (const PageSlice& s : n.slices) {
      PC_KV_CHECK(s.page >= 0 && s.page < pool_->n_pages(), "slice page out of range");
      PC_KV_CHECK(s.begin < s.end && s.end <= pool_->fill(s.page), "slice beyond the fill");
      PC_KV_CHECK(s.begin == d % P, "slice not aligned to its token depth");
      d += s.size();
      ++refs[s.page];
    }
    PC_KV_CHECK(d == n.depth + int32_t(n.tokens.size()), "slices do not cover the run");
  }
  int32_t held = 0;
  for (size_t p = 0; p < refs.size(); ++p) {
    PC_KV_CHECK(refs[p] == page_refs_[p], "page reference count drifted");
    PC_KV_CHECK(pool_->cache_refs(int32_t(p)) >= refs[p], "pool lost a cache reference");
    held += refs[p] > 0;
  }
  PC_KV_CHECK(held == n_pages_held_, "held page counter drifted");
  PC_KV_CHECK(entries == stats_.entries && tokens == stats_.tokens, "stats drifted");
  PC_KV_CHECK(expiring == n_expiring_, "expiring node counter drifted");
  PC_KV_CHECK(pinned == n_pinned_, "pinned node counter drifted");
  PC_KV_CHECK(retained == stats_.retained && retained_pages == stats_.retained_pages,
              "retained node counters drifted");
}

}  // namespace pc
