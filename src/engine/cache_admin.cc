#include "engine/cache_admin.h"

#include <algorithm>
#include <cstdio>
#include <ctime>

#include "engine/engine.h"
#include "engine/module_cache.h"
#include "engine/prefix_cache.h"
#include "kv/page_pool.h"
#include "tier/kv_tier.h"
#include "tier/entry_key.h"

namespace pc {

namespace {

double seconds_between(CacheAdmin::Clock::time_point a, CacheAdmin::Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

std::optional<double> ttl_left(CacheAdmin::Clock::time_point expires, CacheAdmin::Clock::time_point now) {
  if (expires == CacheAdmin::Clock::time_point::max()) return std::nullopt;
  return std::max(0.0, seconds_between(now, expires));
}

// "m" + 16 hex digits of the digest + "." + the shift.
std::string module_entry_id(const ModuleKey& key) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "m%016llx.%d", static_cast<unsigned long long>(key.digest), int(key.shift));
  return buf;
}

// The tenant a namespace of the index belongs to: a derived one ("<tenant>\x1f...")
// is its tenant's.
std::string owner_of(const std::string& ns_tenant) { return ns_tenant.substr(0, ns_tenant.find('\x1f')); }

}  // namespace

double unix_seconds(CacheAdmin::Clock::time_point t, CacheAdmin::Clock::time_point now) {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count() +
         seconds_between(now, t);
}

CacheStats CacheAdmin::counters() const {
  CacheStats s;
  const PagePool& p = *e_.pages_;
  s.pool = PoolView{p.page_size(), int64_t(p.page_bytes()), p.n_pages(), p.n_in_use(), p.n_cached(), p.n_free()};
  s.prefix = e_.prefix_->index().stats();
  s.engine = e_.stats_;
  return s;
}

CacheStats CacheAdmin::stats() const {
  CacheStats s;
  const PagePool& p = *e_.pages_;
  s.pool = PoolView{p.page_size(), int64_t(p.page_bytes()), p.n_pages(), p.n_in_use(), p.n_cached(), p.n_free()};
  s.prefix = e_.prefix_->index().stats();
  s.prefix_metadata_bytes = int64_t(e_.prefix_->index().metadata_bytes());
  s.modules = e_.modules_->store().stats();
  s.engine = e_.stats_;
  if (e_.tiers_) {
    s.has_tiers = true;
    s.tiers = e_.tiers_->stats();
    s.tier_writes_in_flight = int64_t(e_.tiers_->in_flight());
  }
  return s;
}

std::vector<std::string> CacheAdmin::tenants() const {
  std::vector<std::string> out;
  // A tenant's derived namespaces ("<tenant>\x1f...": approximately built KV) are not
  // tenants of their own.
  std::set<std::string> all;
  for (const KvNamespace& ns : e_.prefix_->index().namespaces())
    if (ns.tenant.find('\x1f') == std::string::npos) all.insert(ns.tenant);
  const std::string model = e_.ns("").model;
  for (const auto& [key, m] : e_.modules_->store().entries())
    if (key.ns.model == model) all.insert(key.ns.tenant);
  return {all.begin(), all.end()};
}

std::vector<PrefixEntryView> CacheAdmin::prefix_entries(const std::string& tenant) const {
  const RadixIndex& idx = e_.prefix_->index();
  const int64_t page_bytes = int64_t(e_.pages_->page_bytes());
  const Clock::time_point now = Clock::now();
  std::vector<PrefixEntryView> out;
  idx.for_each_leaf(e_.ns(tenant), [&](int32_t leaf) {
    const RadixIndex::NodeView v = idx.node(leaf);
    PrefixEntryView e;
    e.id = leaf;
    e.tokens = v.depth + int64_t(v.tokens.size());
    e.leaf_tokens = int64_t(v.tokens.size());
    std::set<int32_t> pages;
    int32_t pins = 0;
    Clock::time_point expires = Clock::time_point::max();
    for (int32_t n = leaf; n >= 0;) {
      const RadixIndex::NodeView x = idx.node(n);
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

std::vector<ModuleEntryView> CacheAdmin::module_entries(const std::string& tenant) const {
  const KvNamespace ns = e_.ns(tenant);
  const Clock::time_point now = Clock::now();
  std::vector<ModuleEntryView> out;
  for (const auto& [key, m] : e_.modules_->store().entries()) {
    if (key.ns != ns) continue;
    ModuleEntryView v;
    v.id = module_entry_id(key);
    v.path = m.path;
    v.digest = key.digest;
    v.shift = key.shift;
    v.tokens = m.n_tokens();
    for (const ModuleSegment& seg : m.segments) v.bytes += int64_t(seg.entries.size() * e_.pages_->page_bytes());
    v.hits = m.hits;
    v.pinned = m.pins > 0;
    v.ttl_seconds = ttl_left(m.expires, now);
    out.push_back(std::move(v));
  }
  return out;
}

std::vector<TierEntryView> CacheAdmin::tier_entries(const std::string& tenant) const {
  std::vector<TierEntryView> out;
  if (!e_.tiers_) return out;
  const std::string model = e_.ns(tenant).model;
  // Entries of the tiers that can list theirs (the disk), most recently used first;
  // Redis cannot be listed cheaply (its counters are in stats()).
  for (const KvTier* tier : e_.tiers_->tiers()) {
    if (!tier->listable()) continue;
    for (const TierItem& it : tier->list()) {
      if (it.ns.model != model) continue;
      const TierEntryOwner o = tier_entry_owner(it.ns);
      if (o.tenant != tenant) continue;
      TierEntryView v{key_hex(it.key), tier->name(), o.kind, int64_t(it.n_tokens), int64_t(it.bytes)};
      if (it.keep_until > 0 && it.keep_until > int64_t(std::time(nullptr))) v.expires_at = double(it.keep_until);
      out.push_back(std::move(v));
    }
  }
  return out;
}

std::map<std::string, NamespaceBytes> CacheAdmin::memory_usage() const {
  std::map<std::string, NamespaceBytes> out;
  const RadixIndex& idx = e_.prefix_->index();
  for (const KvNamespace& ns : idx.namespaces()) {
    NamespaceBytes u;
    std::set<int32_t> seen, pages;  // nodes already walked; pages they hold
    idx.for_each_leaf(ns, [&](int32_t leaf) {
      ++u.entries;
      for (int32_t n = leaf; n >= 0 && seen.insert(n).second;) {
        const RadixIndex::NodeView v = idx.node(n);
        for (const PageSlice& s : v.slices) pages.insert(s.page);
        n = v.parent;
      }
    });
    u.bytes = int64_t(pages.size() * e_.pages_->page_bytes());
    if (u.entries > 0) out[ns.tenant] = u;  // an emptied tree: nothing to report
  }
  return out;
}

std::map<std::string, std::map<std::string, NamespaceBytes>> CacheAdmin::tier_usage() const {
  std::map<std::string, std::map<std::string, NamespaceBytes>> out;
  if (!e_.tiers_) return out;
  for (const KvTier* tier : e_.tiers_->tiers()) {
    if (!tier->listable()) continue;
    std::map<std::string, NamespaceBytes>& usage = out[tier->name()];
    for (const TierItem& it : tier->list()) {
      NamespaceBytes& u = usage[tier_entry_owner(it.ns).tenant];
      ++u.entries;
      u.bytes += int64_t(it.bytes);
    }
  }
  return out;
}

bool CacheAdmin::pin(const std::string& tenant, const std::vector<int32_t>& tokens) {
  RadixIndex& idx = e_.prefix_->index();
  if (!idx.pin(e_.ns(tenant), tokens)) return false;
  if (over_tenant_bound(tenant)) {
    idx.unpin(e_.ns(tenant), tokens);
    throw_tenant_bound(tenant);
  }
  return true;
}

bool CacheAdmin::over_tenant_bound(const std::string& tenant) const {
  const int64_t bound = e_.tenant_hold_pages_;
  if (bound <= 0) return false;
  const auto held = held_pages_by_tenant();
  const auto it = held.find(quota_owner(tenant));
  return it != held.end() && it->second > bound;
}

void CacheAdmin::throw_tenant_bound(const std::string& tenant) const {
  const int64_t bound = e_.tenant_hold_pages_;
  throw TenantQuotaError("pinning this entry would take the KV the tenant holds out of requests' reach (pins and "
                         "retained prefixes) past its bound of " +
                         std::to_string(bound * e_.pages_->page_size()) +
                         " tokens (--tenant-kv-share); unpin or evict entries first");
}

std::map<std::string, int64_t> CacheAdmin::held_pages_by_tenant() const {
  std::map<std::string, std::set<int32_t>> pinned;
  std::map<std::string, int64_t> held;
  visit_held(nullptr, &pinned, &held);
  for (const auto& [owner, pages] : pinned)
    if (!pages.empty()) held[owner] += int64_t(pages.size());
  return held;
}

bool CacheAdmin::unpin(const std::string& tenant, const std::vector<int32_t>& tokens) {
  return e_.prefix_->index().unpin(e_.ns(tenant), tokens);
}

bool CacheAdmin::set_expiry(const std::string& tenant, const std::vector<int32_t>& tokens, Clock::time_point at) {
  return e_.prefix_->index().set_expiry(e_.ns(tenant), tokens, at);
}

size_t CacheAdmin::evict(size_t bytes, int64_t* retentions_ended) {
  RadixIndex& idx = e_.prefix_->index();
  const int64_t ended_before = idx.stats().retention_overridden;
  size_t freed = idx.evict(bytes, RadixIndex::Retention::kOverrideRetention);
  if (retentions_ended) *retentions_ended = idx.stats().retention_overridden - ended_before;
  if (freed < bytes) freed += e_.modules_->store().evict(bytes - freed);
  return freed;
}

CacheAdmin::EntryResult CacheAdmin::entry_op(const std::string& tenant, const std::string& id, EntryOp op,
                                             size_t* freed) {
  if (freed) *freed = 0;
  if (!id.empty() && id[0] == 'm') {
    ModuleStore& store = e_.modules_->store();
    const KvNamespace ns = e_.ns(tenant);
    for (const auto& [key, m] : store.entries()) {
      if (key.ns != ns || module_entry_id(key) != id) continue;
      const ModuleKey k = key;  // erase() ends the entry
      if (op == EntryOp::kPin) {
        if (!store.pin(k)) return EntryResult::kNotFound;
        if (over_tenant_bound(tenant)) {
          store.unpin(k);
          throw_tenant_bound(tenant);
        }
        return EntryResult::kDone;
      }
      if (op == EntryOp::kUnpin) return store.unpin(k) ? EntryResult::kDone : EntryResult::kNotFound;
      if (m.pins > 0) return EntryResult::kRefused;
      size_t bytes = 0;
      for (const ModuleSegment& seg : m.segments) bytes += seg.entries.size() * e_.pages_->page_bytes();
      store.erase(k);
      if (freed) *freed = bytes;
      return EntryResult::kDone;
    }
    return EntryResult::kNotFound;
  }
  if (id.empty() || id.size() > 9 || id.find_first_not_of("0123456789") != std::string::npos)
    return EntryResult::kNotFound;
  const int32_t leaf = int32_t(std::stol(id));
  RadixIndex& idx = e_.prefix_->index();
  if (!idx.is_entry(e_.ns(tenant), leaf)) return EntryResult::kNotFound;
  switch (op) {
    case EntryOp::kPin:
      if (!idx.pin_entry(leaf)) return EntryResult::kNotFound;
      if (over_tenant_bound(tenant)) {
        idx.unpin_entry(leaf);
        throw_tenant_bound(tenant);
      }
      return EntryResult::kDone;
    case EntryOp::kUnpin: return idx.unpin_entry(leaf) ? EntryResult::kDone : EntryResult::kNotFound;
    case EntryOp::kEvict: {
      const RadixIndex::NodeView v = idx.node(leaf);
      if (v.pins > 0 || v.lock_ref > 0) return EntryResult::kRefused;
      const size_t f = idx.evict_entry(leaf);
      if (freed) *freed = f;
      return EntryResult::kDone;
    }
  }
  return EntryResult::kNotFound;
}

size_t CacheAdmin::evict_tenants(const std::function<bool(const std::string&)>& mine, size_t bytes,
                                 int64_t* retentions_ended) {
  RadixIndex& idx = e_.prefix_->index();
  const int64_t ended_before = idx.stats().retention_overridden;
  // Candidates: (under a lifetime, last use, leaf), the order they go in.
  struct Candidate {
    bool retained;
    Clock::time_point used;
    int32_t leaf;
  };
  std::vector<Candidate> leaves;
  for (const KvNamespace& ns : idx.namespaces()) {
    if (ns.model != e_.ns("").model || !mine(owner_of(ns.tenant))) continue;
    idx.for_each_leaf(ns, [&](int32_t leaf) {
      bool retained = false;
      Clock::time_point used = Clock::time_point::min();
      for (int32_t n = leaf; n >= 0;) {
        const RadixIndex::NodeView v = idx.node(n);
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
    freed += idx.evict_entry(c.leaf);
  }
  if (retentions_ended) *retentions_ended = idx.stats().retention_overridden - ended_before;
  ModuleStore& store = e_.modules_->store();
  std::vector<std::pair<ModuleKey, size_t>> modules;
  for (const auto& [key, m] : store.entries()) {
    if (key.ns.model != e_.ns("").model || !mine(owner_of(key.ns.tenant)) || m.pins > 0) continue;
    size_t b = 0;
    for (const ModuleSegment& seg : m.segments) b += seg.entries.size() * e_.pages_->page_bytes();
    modules.emplace_back(key, b);
  }
  for (const auto& [key, b] : modules) {
    if (freed >= bytes) break;
    if (store.erase(key)) freed += b;
  }
  return freed;
}

size_t CacheAdmin::evict_expired(Clock::time_point now) {
  return e_.prefix_->index().evict_expired(now) + e_.modules_->store().evict_expired(now);
}

int CacheAdmin::drop_modules(const std::string& tenant, const std::set<uint64_t>& digests) {
  int n = 0;
  for (uint64_t d : digests) n += e_.modules_->drop(e_.ns(tenant), d);
  return n;
}

std::optional<BlockHit> CacheAdmin::find_block(const std::string& tenant, const std::vector<int32_t>& tokens) {
  return e_.prefix_->blocks().find(e_.prefix_->index(), e_.ns(tenant), tokens);
}

const KvTiers* CacheAdmin::tiers() const { return e_.tiers_.get(); }

int64_t CacheAdmin::pinned_pages() const {
  std::set<int32_t> pages;
  visit_held(&pages, nullptr);
  return int64_t(pages.size());
}

// Walks what requests cannot have: pinned pages (a pin on a node keeps it and its
// ancestors) into (*pinned)[owner] or *all, and each retained node's charge, once,
// into (*retained)[owner].
void CacheAdmin::visit_held(std::set<int32_t>* all, std::map<std::string, std::set<int32_t>>* pinned,
                            std::map<std::string, int64_t>* retained) const {
  const RadixIndex& idx = e_.prefix_->index();
  const ModuleStore& store = e_.modules_->store();
  if (!idx.has_pins() && !store.has_pins() && (!retained || !idx.has_retained())) return;
  auto pages_of = [&](const std::string& owner) -> std::set<int32_t>& { return pinned ? (*pinned)[owner] : *all; };
  for (const KvNamespace& ns : idx.namespaces()) {
    const std::string owner = quota_owner(ns.tenant);
    std::set<int32_t>& pages = pages_of(owner);
    std::set<int32_t> seen;  // retained nodes counted (shared ancestors once)
    idx.for_each_leaf(ns, [&](int32_t leaf) {
      bool pin = false;
      for (int32_t n = leaf; n >= 0;) {
        const RadixIndex::NodeView x = idx.node(n);
        if (x.parent < 0) break;
        pin = pin || x.pins > 0;
        if (pin)
          for (const PageSlice& sl : x.slices) pages.insert(sl.page);
        if (retained && x.retain_pages > 0 && seen.insert(n).second) (*retained)[owner] += x.retain_pages;
        n = x.parent;
      }
    });
  }
  for (const auto& [key, m] : store.entries())
    if (m.pins > 0)
      for (const ModuleSegment& seg : m.segments)
        for (const PageEntry& p : seg.entries) pages_of(quota_owner(key.ns.tenant)).insert(p.page);
}

}  // namespace pc
