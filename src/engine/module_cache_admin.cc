// The module cache's admin face: listings, pins and eviction as plain data
// (engine/cache_report.h). Module keys and pages stay inside.
#include <cstdio>
#include <set>

#include "engine/module_cache.h"

namespace pc {

namespace {

using Clock = ModuleEntry::Clock;

// "m" + 16 hex digits of the digest + "." + the shift.
std::string module_entry_id(const ModuleKey& key) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "m%016llx.%d", static_cast<unsigned long long>(key.digest), int(key.shift));
  return buf;
}

std::optional<double> ttl_left(Clock::time_point expires, Clock::time_point now) {
  if (expires == Clock::time_point::max()) return std::nullopt;
  return std::max(0.0, std::chrono::duration<double>(expires - now).count());
}

}  // namespace

ModuleCounters ModuleCache::counters() const {
  const ModuleStats s = store_.stats();
  return ModuleCounters{s.entries, s.tokens, s.bytes, s.hits, s.misses, s.evicted};
}

std::vector<CacheScope> ModuleCache::scopes(const std::string& model) const {
  std::set<CacheScope> all;
  for (const auto& [key, m] : store_.entries())
    if (key.ns.model == model) all.insert(key.ns.scope);
  return {all.begin(), all.end()};
}

std::vector<ModuleEntryView> ModuleCache::entries(const KvNamespace& ns) const {
  const Clock::time_point now = Clock::now();
  std::vector<ModuleEntryView> out;
  for (const auto& [key, m] : store_.entries()) {
    if (key.ns != ns) continue;
    ModuleEntryView v;
    v.id = module_entry_id(key);
    v.path = m.path;
    v.digest = key.digest;
    v.shift = key.shift;
    v.tokens = m.n_tokens();
    for (const ModuleSegment& seg : m.segments) v.bytes += int64_t(seg.entries.size() * pool_.page_bytes());
    v.hits = m.hits;
    v.pinned = m.pins > 0;
    v.ttl_seconds = ttl_left(m.expires, now);
    out.push_back(std::move(v));
  }
  return out;
}

EntryResult ModuleCache::entry_op(const KvNamespace& ns, const std::string& id, EntryOp op, size_t* freed) {
  if (freed) *freed = 0;
  for (const auto& [key, m] : store_.entries()) {
    if (key.ns != ns || module_entry_id(key) != id) continue;
    const ModuleKey k = key;  // erase() ends the entry
    if (op == EntryOp::kPin) return store_.pin(k) ? EntryResult::kDone : EntryResult::kNotFound;
    if (op == EntryOp::kUnpin) return store_.unpin(k) ? EntryResult::kDone : EntryResult::kNotFound;
    if (m.pins > 0) return EntryResult::kRefused;
    size_t bytes = 0;
    for (const ModuleSegment& seg : m.segments) bytes += seg.entries.size() * pool_.page_bytes();
    store_.erase(k);
    if (freed) *freed = bytes;
    return EntryResult::kDone;
  }
  return EntryResult::kNotFound;
}

size_t ModuleCache::evict_scopes(const std::string& model, const std::function<bool(const CacheScope&)>& mine,
                                 size_t bytes) {
  std::vector<std::pair<ModuleKey, size_t>> victims;
  for (const auto& [key, m] : store_.entries()) {
    if (key.ns.model != model || !mine(key.ns.scope) || m.pins > 0) continue;
    size_t b = 0;
    for (const ModuleSegment& seg : m.segments) b += seg.entries.size() * pool_.page_bytes();
    victims.emplace_back(key, b);
  }
  size_t freed = 0;
  for (const auto& [key, b] : victims) {
    if (freed >= bytes) break;
    if (store_.erase(key)) freed += b;
  }
  return freed;
}

void ModuleCache::visit_pinned(const std::function<void(const std::string& tenant, int32_t page)>& fn) const {
  if (!store_.has_pins()) return;
  for (const auto& [key, m] : store_.entries())
    if (m.pins > 0)
      for (const ModuleSegment& seg : m.segments)
        for (const PageEntry& p : seg.entries) fn(key.ns.scope.tenant, p.page);
}

}  // namespace pc
