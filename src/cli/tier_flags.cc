#include "cli/tier_flags.h"

#include <CLI/CLI.hpp>

#include "cli/units.h"
#include "common/error.h"

namespace pc::cli {

void add_tier_options(CLI::App& app, TierArgs& a) {
  app.add_option("--disk-cache", a.disk_dir,
                 "Directory of a disk KV tier: every cached prompt and module is written there "
                 "and found again after a restart");
  app.add_option("--disk-cache-size", a.disk_size, "Capacity of --disk-cache (least recently used entries go)")
      ->capture_default_str();
  app.add_option("--redis", a.redis_url,
                 "Shared KV tier in Redis, redis://[:password@]host[:port][/db]: servers sharing it "
                 "reuse each other's prompts and modules");
  app.add_option("--redis-ttl", a.redis_ttl, "Seconds an unused entry stays in Redis")
      ->capture_default_str()->check(CLI::Range(1, 365 * 24 * 3600));
}

TierOptions tier_options(const TierArgs& a) {
  TierOptions t;
  t.disk_dir = a.disk_dir;
  const int64_t bytes = parse_bytes(a.disk_size);
  if (bytes <= 0) throw Error("--disk-cache-size must be positive, got '" + a.disk_size + "'");
  t.disk_bytes = uint64_t(bytes);
  t.redis_url = a.redis_url;
  t.redis_ttl_seconds = a.redis_ttl;
  return t;
}

}  // namespace pc::cli
