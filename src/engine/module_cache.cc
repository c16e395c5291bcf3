#include "engine/module_cache.h"

#include <algorithm>
#include <chrono>

#include "engine/kv_tiers.h"
#include "kv/kv_storage.h"
#include "model/model.h"
#include "engine/relocation.h"

namespace pc {

ModuleCache::ModuleCache(PagePool& pool, const Model& model) : pool_(pool), model_(model), store_(pool) {}

void ModuleCache::set_tiers(KvTiers* tiers) {
  tiers_ = tiers;
  if (!tiers_) return;
  tiers_->on_reset([this] {
    int64_t n = 0;
    for (const auto& [key, e] : store_.entries()) {
      if (key.shift != 0 || e.tier_tokens.empty()) continue;  // copies are made again from it
      tiers_->save_module(key.ns, key.digest, e.tier_tokens, e);
      ++n;
    }
    return n;
  });
}

const ModuleEntry* ModuleCache::peek(const KvNamespace& ns, const ModuleSpec& spec) const {
  return store_.peek(ModuleKey{ns, spec.digest, 0});
}

void ModuleCache::use(const KvNamespace& ns, const ModuleSpec& spec) {
  store_.find(ModuleKey{ns, spec.digest, 0});
}

void ModuleCache::apply_policy(const ModuleSpec& spec, ModuleEntry& e) const {
  if (spec.ttl_seconds > 0)
    e.expires = ModuleEntry::Clock::now() + std::chrono::duration_cast<ModuleEntry::Clock::duration>(
                                                std::chrono::duration<double>(spec.ttl_seconds));
  if (spec.pin) e.pins = 1;
}

void ModuleCache::store(const KvNamespace& ns, const ModuleSpec& spec, ModuleEntry entry, bool write_through) {
  entry.path = spec.path;
  apply_policy(spec, entry);
  if (spec.cache && tiers_) {
    if (write_through) tiers_->save_module(ns, spec.digest, spec.tokens, entry);
    entry.tier_tokens = spec.tokens;  // encoded here or restored from a tier: a rewrite writes it
  }
  store_.insert(ModuleKey{ns, spec.digest, 0}, std::move(entry));
}

ModuleCache::Pending* ModuleCache::pending(const KvNamespace& ns, uint64_t digest) {
  auto it = pending_.find({ns, digest, 0});
  return it == pending_.end() ? nullptr : &it->second;
}

bool ModuleCache::take(const KvNamespace& ns, const ModuleSpec& spec, int32_t begin, int32_t end,
                       int32_t shift, PageTable& hold, std::vector<PageEntry>& out) {
  const ModuleEntry* e = peek(ns, spec);
  if (!e) return false;
  // Copy the segment list: relocation inserts into the store.
  const std::vector<ModuleSegment> segments = e->segments;
  PageTable sources(pool_);  // relocation allocates pages, which may evict the entry itself
  if (shift != 0)
    for (const ModuleSegment& seg : segments) sources.attach(seg.entries);
  std::vector<PageEntry> got;
  PageTable held(pool_);  // what this call attached so far, given to `hold` on success
  for (const ModuleSegment& seg : segments) {
    if (seg.tok_end <= begin || seg.tok_begin >= end) continue;
    if (shift != 0) {
      if (!relocated(ns, spec, seg, shift, held, got)) return false;
      continue;
    }
    // A context reference may end inside a segment: its first `end - tok_begin` slots.
    int32_t left = std::min(end, seg.tok_end) - seg.tok_begin;
    for (const PageEntry& p : seg.entries) {
      if (left <= 0) break;
      got.push_back({p.page, std::min(p.filled, left)});
      left -= got.back().filled;
      held.attach(std::span<const PageEntry>(&got.back(), 1));
    }
  }
  hold.attach(got);  // before `held` lets go of its references
  out.insert(out.end(), got.begin(), got.end());
  return true;
}

// A segment's pages moved by `shift`, cached under {digest, shift}: one entry per
// shift, holding the segments relocated so far. Relocation is deterministic, so a
// cached copy equals a fresh one bit for bit. The pages appended to `out` are also
// attached to `held`, which keeps them alive whether or not the store does.
bool ModuleCache::relocated(const KvNamespace& ns, const ModuleSpec& spec, const ModuleSegment& seg,
                            int32_t shift, PageTable& held, std::vector<PageEntry>& out) {
  const ModuleKey key{ns, spec.digest, shift};
  ModuleEntry grown;
  if (const ModuleEntry* have = store_.peek(key)) {
    for (const ModuleSegment& r : have->segments)
      if (r.tok_begin == seg.tok_begin) {
        out.insert(out.end(), r.entries.begin(), r.entries.end());
        held.attach(r.entries);
        return true;
      }
    grown = *have;
  }
  std::vector<PageSlice> slices;
  for (const PageEntry& e : seg.entries) slices.push_back({e.page, 0, e.filled});
  PageTable copy(pool_);
  if (!relocated_copy(pool_, model_, slices, shift, copy)) return false;
  const std::vector<PageEntry> pages(copy.entries().begin(), copy.entries().end());
  out.insert(out.end(), pages.begin(), pages.end());
  held.attach(pages);
  if (spec.cache) {
    const bool fresh = grown.segments.empty();
    grown.path = spec.path + " (shifted " + std::to_string(shift) + ")";
    grown.segments.push_back(ModuleSegment{seg.tok_begin, seg.tok_end, pages});
    if (fresh) apply_policy(spec, grown);  // the module's pin and ttl apply to its copies
    store_.insert(key, std::move(grown), /*keep_policy=*/!fresh);
  }
  return true;
}

}  // namespace pc
