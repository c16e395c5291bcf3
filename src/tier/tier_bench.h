// Tier throughput benchmark: moving one entry (default 4096 tokens of the
// tinyllama-1.1b KV shape, 22 layers × 4 KV heads × head dim 64, ~92 MB of F16) between
// KvStorage and each tier, next to plain memcpy and a plain file read of the same bytes.
// Meant to be wired as `promptcache bench tiers`; tests/tier/tier_bench_test.cc runs it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kv/kv_storage.h"

namespace pc {

struct TierBenchOptions {
  KvShape shape{22, 4, 64, 16};
  int32_t n_tokens = 4096;
  std::string dir;        // scratch directory for the disk rows ("" = skip them)
  std::string redis_url;  // "" = skip the Redis rows
  int repeats = 3;        // best of
  bool fsync = true;      // disk put fsyncs (as the disk tier does by default)
};

struct TierBenchRow {
  std::string name;
  uint64_t bytes = 0;  // KV bytes moved
  double seconds = 0;  // best of the repeats
  double gb_per_s() const { return seconds > 0 ? double(bytes) / seconds / 1e9 : 0; }
};

std::vector<TierBenchRow> run_tier_bench(const TierBenchOptions& opt);
std::string format_tier_bench(const TierBenchOptions& opt, const std::vector<TierBenchRow>& rows);

}  // namespace pc
