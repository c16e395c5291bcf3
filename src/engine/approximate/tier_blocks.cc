// Block entries in the KV tiers (engine/kv_tiers.h): the blocks of exact prompts written
// with K at position 0, and read back for approximate requests whose blocks memory's
// block index lacks (a restarted server, another server sharing the tier).
#include <algorithm>

#include "engine/approximate/approximate_reuse.h"
#include "engine/kv_tiers.h"
#include "engine/prefix_cache.h"
#include "engine/relocation.h"
#include "engine/sequence.h"

namespace pc {

namespace {

// Blocks shorter than this are not worth a tier entry or a lookup.
constexpr int32_t kMinTierBlock = 8;

// The KV slots of tokens [begin, end) of a table whose entries each start at slot 0.
std::vector<PageSlice> slices_of(const PageTable& t, int32_t begin, int32_t end) {
  std::vector<PageSlice> out;
  int32_t at = 0;
  for (const PageEntry& e : t.entries()) {
    const int32_t lo = std::max(begin, at), hi = std::min(end, at + e.filled);
    if (lo < hi) out.push_back({e.page, lo - at, hi - at});
    at += e.filled;
    if (at >= end) break;
  }
  return out;
}

}  // namespace

bool ApproximateReuse::fetch_tier_blocks(Seq& s, std::function<void(std::vector<Seq::TierBlock>)> found_cb) {
  if (!tiers_ || !s.prefix_plan || s.tier_blocks_fetched || s.kind != Seq::Kind::kRequest ||
      s.req.reuse.mode != CacheReuse::kApproximate || s.plan.blocks.empty())
    return false;
  s.tier_blocks_fetched = true;
  std::vector<std::vector<int32_t>> ask;
  std::vector<int32_t> begins;
  const int32_t n = int32_t(s.tokens.size());
  for (const KvBlock& b : s.plan.blocks) {
    if (b.begin < 0 || b.end > n || b.end - b.begin < kMinTierBlock) continue;
    const std::span<const int32_t> toks(s.tokens.data() + b.begin, size_t(b.end - b.begin));
    if (prefix_.block_hit(s.ns, toks)) continue;
    ask.emplace_back(toks.begin(), toks.end());
    begins.push_back(b.begin);
  }
  if (ask.empty()) return false;
  tiers_->find_blocks(s.ns, std::move(ask), [begins, cb = std::move(found_cb)](std::vector<PageTable>& found) {
    std::vector<Seq::TierBlock> blocks;
    for (size_t i = 0; i < found.size(); ++i)
      if (found[i].n_tokens() > 0) blocks.push_back(Seq::TierBlock{begins[i], std::move(found[i])});
    cb(std::move(blocks));
  });
  return true;
}

void ApproximateReuse::add_tier_blocks(const Seq& s, TierWrites& w) {
  for (const KvBlock& b : s.plan.blocks)
    if (b.begin >= 0 && b.end <= s.n_kv && b.end - b.begin >= kMinTierBlock) w.blocks.push_back({b.begin, b.end});
  w.block_at_zero = [this, &s](const TierWrites::Block& b, PageTable& at_zero) {
    return relocated_copy(pages_, model_, slices_of(s.table, b.begin, b.end), -b.begin, at_zero);
  };
}

}  // namespace pc
