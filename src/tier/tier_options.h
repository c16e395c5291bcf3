// Which KV tiers below memory an engine opens (engine/kv_tiers.h, docs/tiers.md), built
// from command-line flags by cli/tier_flags.h. Both locations empty: memory only.
#pragma once
#include <cstdint>
#include <string>

namespace pc {

struct TierOptions {
  std::string disk_dir;                         // --disk-cache DIR
  uint64_t disk_bytes = uint64_t(50) << 30;     // --disk-cache-size
  bool disk_fsync = true;                       // crash-safe writes (tests turn it off)
  std::string redis_url;                        // --redis redis://host:port/db
  int redis_ttl_seconds = 3600;                 // --redis-ttl
  int max_pending_writes = 8;                   // write-through beyond this waits (deferred)
  int check_interval_ms = 1000;                 // how often shared tiers' generation is read
  bool enabled() const { return !disk_dir.empty() || !redis_url.empty(); }
};

}  // namespace pc
