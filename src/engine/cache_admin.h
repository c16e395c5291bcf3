// The caches' admin face: what the server (cache routes, metrics) and tools may see
// and do, composed of each cache's own admin face — the prefix cache's, the module
// cache's, the tiers' — and returning plain data only (engine/cache_report.h): no
// radix nodes, module keys, page ids or tier objects cross it. It adds what spans the
// caches: per-tenant bounds on what pins hold, and eviction order across them.
// Called on the engine thread (server: Scheduler::call).
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "engine/cache_report.h"
#include "engine/engine.h"
#include "kv/kv_namespace.h"

namespace pc {

class PrefixCache;
class ModuleCache;
class KvTiers;
class PagePool;

struct CacheStats {
  PoolView pool;
  PrefixCounters prefix;
  ModuleCounters modules;
  EngineStats engine;
  std::optional<TierReport> tiers;  // with tiers below memory
};

class CacheAdmin {
 public:
  using Clock = std::chrono::steady_clock;
  // What the admin face is composed of (the engine's caches), and the limits it keeps.
  struct Parts {
    PrefixCache& prefix;
    ModuleCache& modules;
    KvTiers* tiers;  // null without tiers
    const PagePool& pool;
    const EngineStats& engine_stats;
    std::string model;                // the model fingerprint: namespaces of this engine
    int64_t tenant_hold_pages = 0;    // EngineOptions::tenant_hold_share of the pages (0: none)
  };
  explicit CacheAdmin(Parts parts) : p_(std::move(parts)) {}

  CacheStats stats() const;
  // The O(1) part of stats() — pool and prefix counters — for every step's metrics
  // (stats() also walks the module store and asks the tiers).
  CacheStats counters() const;
  // The tiers' counters and state, or nullopt without tiers.
  std::optional<TierReport> tier_report() const;
  // Scopes with cached prefixes (of any kind) or modules in memory.
  std::vector<CacheScope> scopes() const;
  std::vector<PrefixEntryView> prefix_entries(const CacheScope& scope) const;
  std::vector<ModuleEntryView> module_entries(const CacheScope& scope) const;
  std::vector<TierEntryView> tier_entries(const CacheScope& scope) const;
  // Entries and distinct page bytes per scope in memory (the prefix cache, every kind
  // of a scope counted as the scope's), and per tier name and scope in the tiers that
  // can list their entries.
  std::map<CacheScope, NamespaceBytes> memory_usage() const;
  std::map<std::string, std::map<CacheScope, NamespaceBytes>> tier_usage() const;

  // The prefix entry ending exactly at `tokens`: pin, unpin, expire at `at`
  // (Clock::time_point::max() clears). False when that prefix is not cached. A pin
  // beyond the tenant's bound is undone and throws TenantQuotaError.
  bool pin(const CacheScope& scope, const std::vector<int32_t>& tokens);
  bool unpin(const CacheScope& scope, const std::vector<int32_t>& tokens);
  bool set_expiry(const CacheScope& scope, const std::vector<int32_t>& tokens, Clock::time_point at);
  // Frees at least `bytes` of cached pages (prefix entries first, then modules)
  // where something is evictable. Lifetimes do not stop it (pins do): when LRU
  // candidates are not enough, retained entries go too, soonest to lapse first, and
  // *retentions_ended counts them. Returns the bytes freed.
  size_t evict(size_t bytes, int64_t* retentions_ended = nullptr);
  // One entry of `scope` by the id its listing gives: a prefix entry's
  // (PrefixEntryView::id, decimal) or a module's (ModuleEntryView::id). Pin and unpin
  // as pin()/unpin() do (unpin: one pin of the entry's path); evict drops it (a prefix
  // entry with the ancestors it alone used, ending their lifetimes; its pages freed
  // unless shared) and sets *freed. kRefused: evicting a pinned or in-use entry.
  EntryResult entry_op(const CacheScope& scope, const std::string& id, EntryOp op, size_t* freed = nullptr);
  // evict() limited to the scopes `mine` accepts (every kind of KV in them): their
  // prefix entries, least recently used first and entries under a lifetime last
  // (ending it), then their unpinned modules, until `bytes` are freed.
  size_t evict_scopes(const std::function<bool(const CacheScope&)>& mine, size_t bytes,
                      int64_t* retentions_ended = nullptr);
  // Drops expired entries of both caches (the server calls it periodically).
  size_t evict_expired(Clock::time_point now);
  // Drops the modules with these digests — each with its relocated copies — from
  // memory. Tier copies are keyed by content and stay. Returns entries dropped.
  int drop_modules(const CacheScope& scope, const std::set<uint64_t>& digests);
  // Where the block index finds a block's KV (tokens of one request part), or nothing.
  std::optional<BlockLocation> find_block(const CacheScope& scope, const std::vector<int32_t>& tokens);

  // Pages held by pinned entries (prefix paths and modules): never free for requests.
  int64_t pinned_pages() const;
  // Per API tenant (CacheScope::tenant, every salt and kind): pages its pinned entries
  // hold plus the charge of its retained prefixes — what it keeps out of requests'
  // reach. Tenants holding nothing are absent. O(entries) when something is pinned or
  // retained, else O(1).
  std::map<std::string, int64_t> held_pages_by_tenant() const;

 private:
  KvNamespace ns(const CacheScope& scope) const;
  bool over_tenant_bound(const std::string& tenant) const;
  [[noreturn]] void throw_tenant_bound() const;
  Parts p_;
};

}  // namespace pc
