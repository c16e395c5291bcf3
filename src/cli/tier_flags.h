// Command-line options of the KV tiers below memory, shared by `generate`, `serve` and
// the benchmarks.
#pragma once
#include <string>

#include "tier/tier_options.h"

namespace CLI {
class App;
}

namespace pc::cli {

struct TierArgs {
  std::string disk_dir;
  std::string disk_size = "50GiB";
  std::string redis_url;
  int redis_ttl = 3600;
};

void add_tier_options(CLI::App& app, TierArgs& a);
// Throws pc::Error for a malformed size.
TierOptions tier_options(const TierArgs& a);

}  // namespace pc::cli
