// `promptcache bench conversation`: a seeded multi-turn chat trace replayed
// through the engine, next to simulated block-hashing prefix caches.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace pc::cli {

// A prefix cache keyed by hashes of fixed-size token blocks, each hash chained
// to the previous one (vLLM: 16-token blocks; LMCache: 256-token chunks). Only
// full blocks are stored and matched; LRU eviction beyond `capacity_blocks`
// (0 = unlimited). Used to replay a trace as those systems would see it.
class BlockCacheSim {
 public:
  BlockCacheSim(int block, int64_t capacity_blocks) : block_(block), capacity_(capacity_blocks) {}
  // Tokens of `prompt` served from cache: whole leading blocks present, never
  // covering the last prompt token.
  int64_t lookup(const std::vector<int32_t>& prompt);
  // Stores every full block of `tokens` (prompt and generated tokens).
  void insert(const std::vector<int32_t>& tokens);
  int block() const { return block_; }

 private:
  void touch(uint64_t h);
  int block_;
  int64_t capacity_;
  uint64_t clock_ = 0;
  std::unordered_map<uint64_t, uint64_t> last_use_;  // block hash → logical time
};

}  // namespace pc::cli
