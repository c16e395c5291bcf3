#include "engine/cache_admin.h"

#include "engine/kv_tiers.h"
#include "engine/module_cache.h"
#include "engine/prefix_cache.h"
#include "kv/page_pool.h"

namespace pc {

double unix_seconds(CacheAdmin::Clock::time_point t, CacheAdmin::Clock::time_point now) {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count() +
         std::chrono::duration<double>(t - now).count();
}

KvNamespace CacheAdmin::ns(const CacheScope& scope) const { return KvNamespace{p_.model, kv_type_name(p_.pool.shape().kv_type), scope}; }

CacheStats CacheAdmin::counters() const {
  CacheStats s;
  const PagePool& p = p_.pool;
  s.pool = PoolView{p.page_size(), int64_t(p.page_bytes()), p.n_pages(), p.n_in_use(), p.n_cached(), p.n_free(),
                    ns(CacheScope{}).kv_type};
  s.prefix = p_.prefix.counters(false);
  s.engine = p_.engine_stats;
  return s;
}

CacheStats CacheAdmin::stats() const {
  CacheStats s = counters();
  s.prefix = p_.prefix.counters(true);
  s.modules = p_.modules.counters();
  s.tiers = tier_report();
  return s;
}

std::optional<TierReport> CacheAdmin::tier_report() const {
  if (!p_.tiers) return std::nullopt;
  return p_.tiers->report();
}

std::vector<CacheScope> CacheAdmin::scopes() const {
  std::set<CacheScope> all;
  for (const CacheScope& s : p_.prefix.scopes()) all.insert(s);
  for (const CacheScope& s : p_.modules.scopes(p_.model)) all.insert(s);
  return {all.begin(), all.end()};
}

std::vector<PrefixEntryView> CacheAdmin::prefix_entries(const CacheScope& scope) const {
  return p_.prefix.entries(ns(scope));
}

std::vector<ModuleEntryView> CacheAdmin::module_entries(const CacheScope& scope) const {
  return p_.modules.entries(ns(scope));
}

std::vector<TierEntryView> CacheAdmin::tier_entries(const CacheScope& scope) const {
  if (!p_.tiers) return {};
  return p_.tiers->entries(p_.model, scope);
}

std::map<CacheScope, NamespaceBytes> CacheAdmin::memory_usage() const { return p_.prefix.usage(); }

std::map<std::string, std::map<CacheScope, NamespaceBytes>> CacheAdmin::tier_usage() const {
  if (!p_.tiers) return {};
  return p_.tiers->usage();
}

bool CacheAdmin::pin(const CacheScope& scope, const std::vector<int32_t>& tokens) {
  if (!p_.prefix.pin(ns(scope), tokens)) return false;
  if (over_tenant_bound(scope.tenant)) {
    p_.prefix.unpin(ns(scope), tokens);
    throw_tenant_bound();
  }
  return true;
}

bool CacheAdmin::unpin(const CacheScope& scope, const std::vector<int32_t>& tokens) {
  return p_.prefix.unpin(ns(scope), tokens);
}

bool CacheAdmin::set_expiry(const CacheScope& scope, const std::vector<int32_t>& tokens, Clock::time_point at) {
  return p_.prefix.set_expiry(ns(scope), tokens, at);
}

bool CacheAdmin::over_tenant_bound(const std::string& tenant) const {
  if (p_.tenant_hold_pages <= 0) return false;
  const auto held = held_pages_by_tenant();
  const auto it = held.find(tenant);
  return it != held.end() && it->second > p_.tenant_hold_pages;
}

void CacheAdmin::throw_tenant_bound() const {
  throw TenantQuotaError("pinning this entry would take the KV the tenant holds out of requests' reach (pins and "
                         "retained prefixes) past its bound of " +
                         std::to_string(p_.tenant_hold_pages * p_.pool.page_size()) +
                         " tokens (--tenant-kv-share); unpin or evict entries first");
}

std::map<std::string, int64_t> CacheAdmin::held_pages_by_tenant() const {
  std::map<std::string, std::set<int32_t>> pinned;
  std::map<std::string, int64_t> held;
  const auto pin = [&](const std::string& tenant, int32_t page) { pinned[tenant].insert(page); };
  p_.prefix.visit_held(pin, [&](const std::string& tenant, int64_t pages) { held[tenant] += pages; });
  p_.modules.visit_pinned(pin);
  for (const auto& [owner, pages] : pinned)
    if (!pages.empty()) held[owner] += int64_t(pages.size());
  return held;
}

int64_t CacheAdmin::pinned_pages() const {
  std::set<int32_t> pages;
  const auto pin = [&](const std::string&, int32_t page) { pages.insert(page); };
  p_.prefix.visit_held(pin, nullptr);
  p_.modules.visit_pinned(pin);
  return int64_t(pages.size());
}

size_t CacheAdmin::evict(size_t bytes, int64_t* retentions_ended) {
  int64_t ended = 0;
  size_t freed = p_.prefix.evict(bytes, &ended);
  if (retentions_ended) *retentions_ended = ended;
  if (freed < bytes) freed += p_.modules.evict(bytes - freed);
  return freed;
}

EntryResult CacheAdmin::entry_op(const CacheScope& scope, const std::string& id, EntryOp op, size_t* freed) {
  const bool module = !id.empty() && id[0] == 'm';
  const auto run = [&](EntryOp o, size_t* f) {
    return module ? p_.modules.entry_op(ns(scope), id, o, f) : p_.prefix.entry_op(ns(scope), id, o, f);
  };
  const EntryResult r = run(op, freed);
  if (op == EntryOp::kPin && r == EntryResult::kDone && over_tenant_bound(scope.tenant)) {
    run(EntryOp::kUnpin, nullptr);
    throw_tenant_bound();
  }
  return r;
}

size_t CacheAdmin::evict_scopes(const std::function<bool(const CacheScope&)>& mine, size_t bytes,
                                int64_t* retentions_ended) {
  int64_t ended = 0;
  size_t freed = p_.prefix.evict_scopes(p_.model, mine, bytes, &ended);
  if (retentions_ended) *retentions_ended = ended;
  if (freed < bytes) freed += p_.modules.evict_scopes(p_.model, mine, bytes - freed);
  return freed;
}

size_t CacheAdmin::evict_expired(Clock::time_point now) {
  return p_.prefix.evict_expired(now) + p_.modules.evict_expired(now);
}

int CacheAdmin::drop_modules(const CacheScope& scope, const std::set<uint64_t>& digests) {
  int n = 0;
  for (uint64_t d : digests) n += p_.modules.drop(ns(scope), d);
  return n;
}

std::optional<BlockLocation> CacheAdmin::find_block(const CacheScope& scope, const std::vector<int32_t>& tokens) {
  return p_.prefix.find_block(ns(scope), tokens);
}

}  // namespace pc
