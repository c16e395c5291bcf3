// What the caches report through their admin face (engine/cache_admin.h): plain data
// only — counts, sizes, listings by id — so that the server and tools see the caches
// without knowing how they are built (no radix nodes, module keys, page ids or tier
// objects cross).
#pragma once
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kv/kv_namespace.h"
#include "tier/tier_stats.h"

namespace pc {

// A steady-clock time as unix seconds.
double unix_seconds(std::chrono::steady_clock::time_point t, std::chrono::steady_clock::time_point now);

struct PoolView {
  int32_t page_size = 0;
  int64_t page_bytes = 0;
  int32_t pages = 0, pages_in_use = 0, pages_cached = 0, pages_free = 0;
  std::string kv_type = "f16";  // how pages store K and V (kernels/kv_quant.h: f16, q8_0, q4_0)
  // What one cached token costs, in memory and in every tier's payload.
  int64_t bytes_per_token() const { return page_size > 0 ? page_bytes / page_size : 0; }
};

// The prefix cache's counters (its index of exact and approximate prefixes).
struct PrefixCounters {
  int64_t entries = 0;     // nodes
  int64_t tokens = 0;      // tokens over all nodes
  int64_t bytes = 0;       // bytes of the pages they reference
  int64_t hits = 0;        // matches with length > 0
  int64_t misses = 0;      // matches with length 0
  int64_t hit_tokens = 0;  // sum of matched lengths
  int64_t evicted = 0;     // nodes evicted
  int64_t retained = 0;              // nodes under a lifetime now
  int64_t retained_pages = 0;        // pages charged to them
  int64_t retention_refused = 0;     // lifetimes refused by the retention limit
  int64_t retention_overridden = 0;  // lifetimes ended early by an admin eviction
  int64_t metadata_bytes = 0;        // the index's own memory (stats() only)
  int64_t snapshots = 0;             // recurrent-state snapshots held (hybrid models)
  int64_t snapshot_bytes = 0;        // bytes of the KV pages they occupy
};

struct ModuleCounters {
  int64_t entries = 0, tokens = 0, bytes = 0, hits = 0, misses = 0, evicted = 0;
};

// The tiers below memory, together (engine/kv_tiers.h) and one by one.
struct TierCounters {
  int64_t lookups = 0;           // prefix promotions asked
  std::vector<int64_t> hits;     // [tier, as `tiers`]: prefix and module-segment entries
                                 // found there (and in no tier above it)
  int64_t misses = 0;            // lookups that found nothing longer than memory had
  int64_t promoted_tokens = 0;   // tokens restored into memory
  int64_t module_loads = 0;      // modules restored from a tier
  int64_t block_loads = 0;       // blocks restored from a tier (approximate reuse)
  int64_t writes = 0;            // entries written (to at least one tier)
  int64_t write_failures = 0;    // entries no tier stored
  int64_t writes_deferred = 0;   // writes queued behind max_pending_writes (then written)
  int64_t writes_skipped = 0;    // writes dropped: deferred ones would hold too many pages
  int64_t tier_resets = 0;       // times a tier's generation changed (it lost its entries)
  int64_t rewritten = 0;         // entries written again after a reset (prefixes, modules, copies)
  int64_t written_bytes = 0;     // bytes of the entries written (each counted once, whatever the tiers)
  int64_t links_present = 0;     // chain links write-through found in every tier already (not written)
  int64_t links_read = 0;        // chain links restored by promotions
  int64_t states_written = 0;    // recurrent-state entries written (hybrid models; also in writes)
  int64_t state_bytes_written = 0;  // their bytes (also in written_bytes)
  int64_t states_read = 0;       // recurrent-state snapshots restored by promotions
  int64_t state_bytes_read = 0;  // their entries' bytes
  int64_t errors = 0;            // exceptions in worker jobs (logged, never fatal)
};
struct TierReport {
  TierCounters totals;
  std::vector<TierStats> tiers;  // in lookup order (memory's next tier first)
  int64_t writes_in_flight = 0;
  // Whether the tier of this name is usable now; nullopt when there is none.
  std::optional<bool> connected(const std::string& name) const {
    for (const TierStats& t : tiers)
      if (t.name == name) return t.connected;
    return std::nullopt;
  }
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
  // The longest prefix of it under a lifetime: its length (0: none), when the guarantee
  // runs out (unix seconds) and the lifetime a hit re-arms.
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
  // "prefix" (a chain link), "state" (a link with the recurrent state after it: hybrid
  // models), "module_segment", "block" or "approximate"
  const char* kind = "prefix";
  int64_t tokens = 0, bytes = 0;
  std::optional<double> expires_at;  // unix seconds the tier keeps it until (a lifetime)
};

struct NamespaceBytes {
  int64_t entries = 0;
  int64_t bytes = 0;
};

// Where the block index finds a block's KV: the position it was computed at and how
// many tokens of KV are there.
struct BlockLocation {
  int32_t position = 0;
  int32_t tokens = 0;
};

// What an admin call on one entry did.
enum class EntryOp { kPin, kUnpin, kEvict };
enum class EntryResult { kDone, kNotFound, kRefused };

}  // namespace pc
