// The prefix cache's admin face: listings, pins, lifetimes, eviction and what each
// scope holds, as plain data (engine/cache_report.h). The radix index stays inside.
#include <algorithm>
#include <set>

#include "engine/prefix_cache.h"

namespace pc {

namespace {

using Clock = RadixIndex::Clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

std::optional<double> ttl_left(Clock::time_point expires, Clock::time_point now) {
  if (expires == Clock::time_point::max()) return std::nullopt;
  return std::max(0.0, seconds_between(now, expires));
}

}  // namespace

PrefixCounters PrefixCache::counters(bool with_metadata) const {
  const RadixStats r = index_.stats();
  PrefixCounters c{r.entries,  r.tokens,         r.bytes,          r.hits,
                   r.misses,   r.hit_tokens,     r.evicted,        r.retained,
                   r.retained_pages, r.retention_refused, r.retention_overridden};
  if (with_metadata) c.metadata_bytes = int64_t(index_.metadata_bytes());
  c.snapshots = states_.count();
  c.snapshot_bytes = states_.bytes();
  return c;
}

std::vector<CacheScope> PrefixCache::scopes() const {
  std::set<CacheScope> all;
  for (const KvNamespace& ns : index_.namespaces()) all.insert(ns.scope);
  return {all.begin(), all.end()};
}

std::vector<PrefixEntryView> PrefixCache::entries(const KvNamespace& ns) const {
  const int64_t page_bytes = int64_t(pool_.page_bytes());
  const Clock::time_point now = Clock::now();
  std::vector<PrefixEntryView> out;
  index_.for_each_leaf(ns, [&](int32_t leaf) {
    const RadixIndex::NodeView v = index_.node(leaf);
    PrefixEntryView e;
    e.id = leaf;
    e.tokens = v.depth + int64_t(v.tokens.size());
    e.leaf_tokens = int64_t(v.tokens.size());
    std::set<int32_t> pages;
    int32_t pins = 0;
    Clock::time_point expires = Clock::time_point::max();
    for (int32_t n = leaf; n >= 0;) {
      const RadixIndex::NodeView x = index_.node(n);
      if (x.parent < 0) break;  // the namespace root holds nothing
      if (x.retain_until > now && e.retained_tokens == 0) {  // the deepest retention on the path
        e.retained_tokens = x.depth + int64_t(x.tokens.size());
        e.expires_at = unix_seconds(x.retain_until, now);
        e.retention_seconds = std::chrono::duration<double>(x.retain_for).count();
      }
      for (const PageSlice& s : x.slices) pages.insert(s.page);
      pins += x.pins;  // a pin keeps every ancestor
      e.hits = x.hits;  // matches that reused any of it: its first run's count
      expires = std::min(expires, x.expires);
      n = x.parent;
    }
    e.bytes = int64_t(pages.size()) * page_bytes;
    e.age_seconds = seconds_between(v.created, now);
    e.idle_seconds = seconds_between(v.used, now);
    e.leaf_hits = v.hits;
    e.pinned = pins > 0;
    e.in_use = v.lock_ref > 0;
    e.ttl_seconds = ttl_left(expires, now);
    out.push_back(e);
  });
  return out;
}

std::map<CacheScope, NamespaceBytes> PrefixCache::usage() const {
  std::map<CacheScope, NamespaceBytes> out;
  for (const KvNamespace& ns : index_.namespaces()) {
    NamespaceBytes u;
    std::set<int32_t> seen, pages;  // nodes already walked; pages they hold
    index_.for_each_leaf(ns, [&](int32_t leaf) {
      ++u.entries;
      for (int32_t n = leaf; n >= 0 && seen.insert(n).second;) {
        const RadixIndex::NodeView v = index_.node(n);
        for (const PageSlice& s : v.slices) pages.insert(s.page);
        n = v.parent;
      }
    });
    u.bytes = int64_t(pages.size() * pool_.page_bytes());
    if (u.entries == 0) continue;  // an emptied tree: nothing to report
    NamespaceBytes& sum = out[ns.scope];
    sum.entries += u.entries;
    sum.bytes += u.bytes;
  }
  return out;
}

bool PrefixCache::pin(const KvNamespace& ns, std::span<const int32_t> tokens) { return index_.pin(ns, tokens); }
bool PrefixCache::unpin(const KvNamespace& ns, std::span<const int32_t> tokens) { return index_.unpin(ns, tokens); }
bool PrefixCache::set_expiry(const KvNamespace& ns, std::span<const int32_t> tokens, Clock::time_point at) {
  return index_.set_expiry(ns, tokens, at);
}

EntryResult PrefixCache::entry_op(const KvNamespace& ns, const std::string& id, EntryOp op, size_t* freed) {
  if (freed) *freed = 0;
  if (id.empty() || id.size() > 9 || id.find_first_not_of("0123456789") != std::string::npos)
    return EntryResult::kNotFound;
  const int32_t leaf = int32_t(std::stol(id));
  if (!index_.is_entry(ns, leaf)) return EntryResult::kNotFound;
  switch (op) {
    case EntryOp::kPin: return index_.pin_entry(leaf) ? EntryResult::kDone : EntryResult::kNotFound;
    case EntryOp::kUnpin: return index_.unpin_entry(leaf) ? EntryResult::kDone : EntryResult::kNotFound;
    case EntryOp::kEvict: {
      const RadixIndex::NodeView v = index_.node(leaf);
      if (v.pins > 0 || v.lock_ref > 0) return EntryResult::kRefused;
      const size_t f = index_.evict_entry(leaf);
      if (freed) *freed = f;
      return EntryResult::kDone;
    }
  }
  return EntryResult::kNotFound;
}

size_t PrefixCache::evict(size_t bytes, int64_t* retentions_ended) {
  const int64_t ended_before = index_.stats().retention_overridden;
  const size_t freed = index_.evict(bytes, RadixIndex::Retention::kOverrideRetention);
  if (retentions_ended) *retentions_ended += index_.stats().retention_overridden - ended_before;
  return freed;
}

size_t PrefixCache::evict_scopes(const std::string& model, const std::function<bool(const CacheScope&)>& mine,
                                 size_t bytes, int64_t* retentions_ended) {
  const int64_t ended_before = index_.stats().retention_overridden;
  // Candidates: (under a lifetime, last use, leaf), the order they go in.
  struct Candidate {
    bool retained;
    Clock::time_point used;
    int32_t leaf;
  };
  std::vector<Candidate> leaves;
  for (const KvNamespace& ns : index_.namespaces()) {
    if (ns.model != model || !mine(ns.scope)) continue;
    index_.for_each_leaf(ns, [&](int32_t leaf) {
      bool retained = false;
      Clock::time_point used = Clock::time_point::min();
      for (int32_t n = leaf; n >= 0;) {
        const RadixIndex::NodeView v = index_.node(n);
        if (v.parent < 0) break;
        retained = retained || v.retain_until != Clock::time_point::min();
        used = std::max(used, v.used);
        n = v.parent;
      }
      leaves.push_back({retained, used, leaf});
    });
  }
  std::sort(leaves.begin(), leaves.end(), [](const Candidate& a, const Candidate& b) {
    return a.retained != b.retained ? !a.retained : a.used < b.used;
  });
  size_t freed = 0;
  for (const Candidate& c : leaves) {
    if (freed >= bytes) break;
    freed += index_.evict_entry(c.leaf);
  }
  if (retentions_ended) *retentions_ended += index_.stats().retention_overridden - ended_before;
  return freed;
}

size_t PrefixCache::evict_expired(Clock::time_point now) { return index_.evict_expired(now); }

void PrefixCache::visit_held(const std::function<void(const std::string& tenant, int32_t page)>& pinned,
                             const std::function<void(const std::string& tenant, int64_t pages)>& retained) const {
  if (!index_.has_pins() && (!retained || !index_.has_retained())) return;
  for (const KvNamespace& ns : index_.namespaces()) {
    const std::string& owner = ns.scope.tenant;
    std::set<int32_t> seen;  // retained nodes counted (shared ancestors once)
    index_.for_each_leaf(ns, [&](int32_t leaf) {
      bool pin = false;
      for (int32_t n = leaf; n >= 0;) {
        const RadixIndex::NodeView x = index_.node(n);
        if (x.parent < 0) break;
        pin = pin || x.pins > 0;
        if (pin)
          for (const PageSlice& sl : x.slices) pinned(owner, sl.page);
        if (retained && x.retain_pages > 0 && seen.insert(n).second) retained(owner, x.retain_pages);
        n = x.parent;
      }
    });
  }
}

std::optional<BlockLocation> PrefixCache::find_block(const KvNamespace& ns, std::span<const int32_t> tokens) {
  const std::optional<BlockHit> hit = blocks_.find(index_, ns, tokens);
  if (!hit) return std::nullopt;
  int32_t n = 0;
  for (const PageSlice& s : hit->slices) n += s.size();
  return BlockLocation{hit->position, n};
}

}  // namespace pc
