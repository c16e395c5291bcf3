#include "engine/approximate/block_index.h"

#include <xxhash.h>

#include <algorithm>

namespace pc {

uint64_t BlockIndex::key(const KvNamespace& ns, std::span<const int32_t> tokens) {
  XXH64_state_t* st = XXH64_createState();
  XXH64_reset(st, 0x9e3779b97f4a7c15ULL);
  const std::string scope = tier_scope_bytes(ns);
  for (const std::string* s : {&ns.model, &ns.kv_type, &scope}) {
    const uint64_t n = s->size();
    XXH64_update(st, &n, sizeof n);
    XXH64_update(st, s->data(), s->size());
  }
  XXH64_update(st, tokens.data(), tokens.size_bytes());
  const uint64_t h = XXH64_digest(st);
  XXH64_freeState(st);
  return h;
}

void BlockIndex::add(const KvNamespace& ns, std::span<const int32_t> tokens, RadixIndex::Anchor a, int32_t begin) {
  if (tokens.empty() || a.node < 0) return;
  if (map_.size() >= kMaxBlocks) map_.clear();  // a bound, not an LRU: the tree is the cache
  std::vector<Location>& locs = map_[key(ns, tokens)];
  const Location loc{a, begin, int32_t(tokens.size())};
  for (const Location& l : locs)
    if (l.anchor.node == a.node && l.anchor.gen == a.gen && l.begin == begin) return;
  locs.insert(locs.begin(), loc);
  if (locs.size() > kPerBlock) locs.pop_back();
}

std::optional<BlockHit> BlockIndex::find(const RadixIndex& index, const KvNamespace& ns,
                                         std::span<const int32_t> tokens) {
  if (tokens.empty()) return std::nullopt;
  auto it = map_.find(key(ns, tokens));
  if (it == map_.end()) return std::nullopt;
  std::vector<Location>& locs = it->second;
  std::optional<BlockHit> hit;
  for (auto l = locs.begin(); l != locs.end();) {
    BlockHit h;
    if (l->length == int32_t(tokens.size()) && index.path_slices(ns, l->anchor, l->begin, tokens, &h.slices)) {
      h.position = l->begin;
      hit = std::move(h);
      break;
    }
    l = locs.erase(l);  // evicted, expired, or a hash collision: forget it
  }
  if (locs.empty()) map_.erase(it);
  return hit;
}

}  // namespace pc
