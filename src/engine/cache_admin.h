// The caches' admin face: what the server (cache routes, metrics) and tools may see
// and do, without knowing how the caches are built — no radix nodes, module keys or
// tier entry names cross this interface. Called on the engine thread
// (server: Scheduler::call).
#pragma once
#include <chrono>
#include <functional>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "engine/approximate/block_index.h"
#include "engine/engine.h"
#include "engine/kv_tiers.h"
#include "kv/module_store.h"
#include "kv/radix_index.h"

namespace pc {

class Engine;

struct PoolView {
  int32_t page_size = 0;
  int64_t page_bytes = 0;
  int32_t pages = 0, pages_in_use = 0, pages_cached = 0, pages_free = 0;
};

struct CacheStats {
  PoolView pool;
  RadixStats prefix;
  int64_t prefix_metadata_bytes = 0;
  ModuleStats modules;
  EngineStats engine;
  bool has_tiers = false;
  KvTierStats tiers;
  int64_t tier_writes_in_flight = 0;
};

// One prefix-cache entry as a listing shows it: the prefix root → leaf.
struct PrefixEntryView {
  int32_t id = 0;               // stable while the entry lives
  int64_t tokens = 0;           // the whole prefix
  int64_t leaf_tokens = 0;      // tokens of the last run (what the entry added)
  int64_t bytes = 0;            // distinct pages holding its KV
  double age_seconds = 0, idle_seconds = 0;
  int64_t hits = 0, leaf_hits = 0;
  bool pinned = false, in_use = false;
  std::optional<double> ttl_seconds;  // left until it expires
  // The longest prefix of it under a lifetime (RadixIndex::retain): its length (0:
  // none), when the guarantee runs out (unix seconds) and the lifetime a hit re-arms.
  int64_t retained_tokens = 0;
  std::optional<double> expires_at;
  double retention_seconds = 0;
};

struct ModuleEntryView {
  std::string id;                // "m" + digest (16 hex digits) + "." + shift: entry_op's id
  std::string path;
  uint64_t digest = 0;
  int32_t shift = 0;             // != 0: a relocated copy
  int64_t tokens = 0, bytes = 0, hits = 0;
  bool pinned = false;
  std::optional<double> ttl_seconds;
};

// An entry in a tier below memory (tiers that can list theirs).
struct TierEntryView {
  std::string id;               // the entry key, hex
  std::string tier;             // "disk", ...
  const char* kind = "prefix";   // "prefix", "module_segment" or "block"
  int64_t tokens = 0, bytes = 0;
  std::optional<double> expires_at;  // unix seconds the tier keeps it until (a lifetime)
};

// A steady-clock time as unix seconds.
double unix_seconds(std::chrono::steady_clock::time_point t, std::chrono::steady_clock::time_point now);

struct NamespaceBytes {
  int64_t entries = 0;
  int64_t bytes = 0;
};

class CacheAdmin {
 public:
  using Clock = std::chrono::steady_clock;
  explicit CacheAdmin(Engine& engine) : e_(engine) {}

  CacheStats stats() const;
  // The O(1) part of stats() — pool and prefix-index counters — for every step's metrics
  // (stats() also walks the index and the module store).
  CacheStats counters() const;
  // Tenants with cached prefixes or modules in memory.
  std::vector<std::string> tenants() const;
  std::vector<PrefixEntryView> prefix_entries(const std::string& tenant) const;
  std::vector<ModuleEntryView> module_entries(const std::string& tenant) const;
  std::vector<TierEntryView> tier_entries(const std::string& tenant) const;
  // Entries and distinct page bytes per tenant in memory (the prefix cache), and
  // per tier name and tenant in the tiers that can list their entries.
  std::map<std::string, NamespaceBytes> memory_usage() const;
  std::map<std::string, std::map<std::string, NamespaceBytes>> tier_usage() const;

  // The prefix entry ending exactly at `tokens`: pin, unpin, expire at `at`
  // (Clock::time_point::max() clears). False when that prefix is not cached.
  bool pin(const std::string& tenant, const std::vector<int32_t>& tokens);
  bool unpin(const std::string& tenant, const std::vector<int32_t>& tokens);
  bool set_expiry(const std::string& tenant, const std::vector<int32_t>& tokens, Clock::time_point at);
  // Frees at least `bytes` of cached pages (prefix entries first, then modules)
  // where something is evictable. Lifetimes do not stop it (pins do): when LRU
  // candidates are not enough, retained entries go too, soonest to lapse first, and
  // *retentions_ended counts them. Returns the bytes freed.
  size_t evict(size_t bytes, int64_t* retentions_ended = nullptr);
  // One entry of `tenant` by the id its listing gives: a prefix entry's
  // (PrefixEntryView::id, decimal) or a module's (ModuleEntryView::id). Pin and unpin
  // as pin()/unpin() do (unpin: one pin of the entry's path); evict drops it (a prefix
  // entry with the ancestors it alone used, ending their lifetimes; its pages freed
  // unless shared) and sets *freed. kRefused: evicting a pinned or in-use entry.
  enum class EntryOp { kPin, kUnpin, kEvict };
  enum class EntryResult { kDone, kNotFound, kRefused };
  EntryResult entry_op(const std::string& tenant, const std::string& id, EntryOp op, size_t* freed = nullptr);
  // evict() limited to the tenants `mine` accepts (each with its derived namespaces):
  // their prefix entries, least recently used first and entries under a lifetime last
  // (ending it), then their unpinned modules, until `bytes` are freed.
  size_t evict_tenants(const std::function<bool(const std::string&)>& mine, size_t bytes,
                       int64_t* retentions_ended = nullptr);
  // Drops expired entries of both caches (the server calls it periodically).
  size_t evict_expired(Clock::time_point now);
  // Drops the modules with these digests — each with its relocated copies — from
  // memory. Tier copies are keyed by content and stay. Returns entries dropped.
  int drop_modules(const std::string& tenant, const std::set<uint64_t>& digests);
  // Where the block index finds a block's KV (tokens of one request part), or nothing.
  std::optional<BlockHit> find_block(const std::string& tenant, const std::vector<int32_t>& tokens);

  // The tiers below memory (their own stats), or null.
  const KvTiers* tiers() const;
  // Pages held by pinned entries (prefix paths and modules): never free for requests.
  int64_t pinned_pages() const;
  // Per API tenant (quota_owner): pages its pinned entries hold plus the charge of its
  // retained prefixes — what it keeps out of requests' reach. Tenants holding
  // nothing are absent. O(entries) when something is pinned or retained, else O(1).
  std::map<std::string, int64_t> held_pages_by_tenant() const;

 private:
  // Pins beyond EngineOptions::tenant_hold_pages are undone and throw TenantQuotaError.
  bool over_tenant_bound(const std::string& tenant) const;
  [[noreturn]] void throw_tenant_bound(const std::string& tenant) const;
  void visit_held(std::set<int32_t>* all, std::map<std::string, std::set<int32_t>>* pinned,
                  std::map<std::string, int64_t>* retained = nullptr) const;
  Engine& e_;
};

}  // namespace pc
