#include "engine/prefix_cache.h"

#include <algorithm>
#include <climits>
#include <cstring>

#include "engine/kv_tiers.h"
#include "model/recurrent_state.h"

namespace pc {

PrefixCache::PrefixCache(PagePool& pool, bool enabled, int64_t state_floats)
    : pool_(pool), states_(pool), index_(pool), enabled_(enabled), state_floats_(std::max<int64_t>(0, state_floats)) {
  index_.set_state_store(&states_);
}
PrefixCache::~PrefixCache() = default;

PrefixHit PrefixCache::attach(const KvNamespace& ns, std::span<const int32_t> tokens, bool whole,
                              RecurrentState* state) {
  PrefixHit h(pool_);
  // A parked sequence's own state, when the index still holds its KV, is the longest
  // resume point it can have.
  const int32_t own = state ? int32_t(state->n_tokens()) : 0;
  if (!enabled_ || tokens.empty()) {
    if (state) state->reset();
    return h;
  }
  // A prompt whose last token needs logits takes at most size - 1 tokens.
  const int32_t n = int32_t(tokens.size());
  int32_t limit = whole ? n - 1 : n;
  int32_t snap = -1;
  // Recurrent layers resume only from a snapshot: the match ends where one is stored.
  if (with_states()) {
    const int32_t at = state ? index_.state_prefix(ns, tokens, limit, &snap) : 0;
    if (own > at && own <= limit &&
        index_.match_prefix(ns, tokens, own, RadixIndex::MatchUse::kPeek).length == own) {
      limit = own;
      snap = -1;  // *state is the state after them already
    } else {
      limit = at;
      if (state) state->reset();
    }
  }
  const PrefixMatch m = index_.match_prefix(ns, tokens, limit);
  if (snap >= 0 && m.length == limit) {
    states_.get(snap, std::span<float>(state->mutable_data(), state->data().size()));
    state->advance(states_.n_tokens(snap));
  }
  h.lease = PrefixLease(&index_, m.node);
  h.table = PageTable::from_slices(pool_, m.slices);
  h.length = m.length;
  return h;
}

int64_t PrefixCache::reusable_tokens(const KvNamespace& ns, std::span<const int32_t> tokens,
                                     std::span<const KvBlock> blocks, int32_t from) {
  int64_t n = 0;
  for (const KvBlock& b : blocks)
    if (b.end > from && b.begin < b.end && b.end <= int32_t(tokens.size()) &&
        blocks_.find(index_, ns, tokens.subspan(b.begin, b.end - b.begin)))
      n += b.end - std::max(b.begin, from);
  return n;
}

bool PrefixCache::promote(const KvNamespace& ns, std::span<const int32_t> tokens,
                          std::function<void(int32_t)> done) {
  if (!enabled_ || !tiers_ || tokens.size() < 2) return false;
  const int32_t have = index_.match_prefix(ns, tokens, int32_t(tokens.size()) - 1, RadixIndex::MatchUse::kPeek).length;
  const int32_t P = pool_.page_size();
  const int32_t n = int32_t(tokens.size());
  if (with_states()) {
    // A resume point is a snapshot: ask the tiers unless memory has one at the last
    // possible position (n - 1).
    int32_t handle = -1;
    const int32_t have_state = index_.state_prefix(ns, tokens, n - 1, &handle);
    if (have_state >= n - 1) return false;
    tiers_->promote_prefix(ns, tokens.first(n - 1), have, std::move(done), have_state);
    return true;
  }
  if ((n - 1) / P * P <= have) return false;
  tiers_->promote_prefix(ns, tokens.first(n - 1), have, std::move(done));
  return true;
}

void PrefixCache::promote_now(const KvNamespace& ns, std::span<const int32_t> tokens) {
  if (promote(ns, tokens, nullptr)) tiers_->flush();
}

int32_t PrefixCache::restore(const KvNamespace& ns, const Entry& entry) {
  PageTable table(pool_);
  if (!restore_pages(pool_, entry, table)) return -1;
  const int32_t added = index_.insert(ns, entry.info.tokens, table);
  table.release();  // the index keeps its cache references
  return added;
}

bool PrefixCache::attach_cached_head(const KvNamespace& ns, std::span<const int32_t> tokens, int32_t n,
                                     PageTable& table) {
  if (n <= 0) return true;
  const PrefixMatch m = index_.match_prefix(ns, tokens, n, RadixIndex::MatchUse::kPeek);
  if (m.length < n) return false;
  PageTable cached = PageTable::from_slices(pool_, m.slices);
  table.attach(cached.entries().first(size_t(n / pool_.page_size())));
  cached.release();
  return true;
}

bool PrefixCache::attach_restored(const Entry& e, PageTable& table) {
  PageTable t(pool_);
  if (!restore_pages(pool_, e, t)) {
    table.release();
    return false;
  }
  table.attach(t.entries());
  t.release();
  return true;
}

int32_t PrefixCache::restore_chain(const KvNamespace& ns, std::span<const int32_t> tokens, int32_t from,
                                   std::span<const Entry> links) {
  const int32_t P = pool_.page_size();
  if (from < 0 || from % P != 0) return -1;
  PageTable table(pool_);
  if (!attach_cached_head(ns, tokens, from, table)) return -1;  // evicted since the lookup began
  for (const Entry& e : links)
    if (!attach_restored(e, table)) return -1;
  if (table.n_tokens() != int32_t(tokens.size())) {
    table.release();
    return -1;
  }
  const int32_t added = index_.insert(ns, tokens, table);
  table.release();  // the index keeps its cache references
  return added;
}

int32_t PrefixCache::restore_state(const KvNamespace& ns, std::span<const int32_t> tokens, const Entry& entry) {
  const int32_t P = pool_.page_size();
  const int32_t start = entry.info.link.start;
  const int32_t p = int32_t(tokens.size());
  if (!with_states() || !enabled_ || start < 0 || start % P != 0 || start + entry.info.n_tokens() != p ||
      entry.info.state_bytes != uint64_t(state_floats_) * sizeof(float))
    return -1;
  PageTable table(pool_);
  if (!attach_cached_head(ns, tokens, start, table)) return -1;  // evicted since the lookup began
  if (!attach_restored(entry, table)) return -1;
  const int32_t added = index_.insert(ns, tokens, table);
  table.release();  // the index keeps its cache references
  // The path stays locked while the snapshot's pages are allocated (see store_states).
  const RadixIndex::Anchor a = index_.anchor(ns, tokens);
  if (a.node < 0) return -1;
  PrefixLease lock(&index_, a.node);
  const int32_t node = index_.node_ending(ns, tokens);
  if (node < 0) return -1;
  if (index_.node_state(node) < 0) {
    std::vector<float> floats(static_cast<size_t>(state_floats_));
    std::memcpy(floats.data(), entry.state_payload().data(), entry.info.state_bytes);
    const int32_t h = states_.put(floats, p);
    if (h < 0) return -1;
    index_.set_node_state(node, h);
  }
  return added;
}

std::vector<std::pair<int32_t, std::vector<float>>> PrefixCache::states_on(const KvNamespace& ns,
                                                                           std::span<const int32_t> tokens,
                                                                           size_t max_count) const {
  std::vector<std::pair<int32_t, std::vector<float>>> out;
  for (int32_t limit = int32_t(tokens.size()); limit > 0 && out.size() < max_count;) {
    int32_t h = -1;
    const int32_t at = index_.state_prefix(ns, tokens, limit, &h);
    if (at <= 0 || h < 0) break;
    std::vector<float> floats(size_t(states_.n_floats(h)));
    states_.get(h, floats);
    out.emplace_back(at, std::move(floats));
    limit = at - 1;
  }
  return out;
}

PrefixSnapshot PrefixCache::snapshot(const KvNamespace& ns, std::span<const int32_t> tokens, bool page_aligned) {
  const PrefixMatch m = index_.match_prefix(ns, tokens, int32_t(tokens.size()), RadixIndex::MatchUse::kPeek);
  PageTable cached = PageTable::from_slices(pool_, m.slices);
  PrefixSnapshot snap = snapshot_of(pool_, tokens, cached, page_aligned);
  cached.release();
  return snap;
}

std::vector<std::pair<KvNamespace, std::vector<int32_t>>> PrefixCache::resident_prefixes() const {
  std::vector<std::pair<KvNamespace, std::vector<int32_t>>> out;
  for (const KvNamespace& ns : index_.namespaces()) {
    if (ns.kind != KvKind::kExact) continue;  // not a prefix tree that is written through
    index_.for_each_leaf(ns, [&](int32_t leaf) {
      std::vector<std::span<const int32_t>> runs;
      for (int32_t n = leaf; n >= 0;) {
        const RadixIndex::NodeView v = index_.node(n);
        if (v.parent < 0) break;  // the root holds no tokens
        runs.push_back(v.tokens);
        n = v.parent;
      }
      std::vector<int32_t> tokens;
      for (auto it = runs.rbegin(); it != runs.rend(); ++it) tokens.insert(tokens.end(), it->begin(), it->end());
      out.emplace_back(ns, std::move(tokens));
    });
  }
  return out;
}

PrefixCache::Peek PrefixCache::peek(const KvNamespace& ns, std::span<const int32_t> tokens, int32_t max_length) {
  PrefixMatch m = index_.match_prefix(ns, tokens, max_length, RadixIndex::MatchUse::kPeek);
  Peek p;
  p.length = m.length;
  p.slices = std::move(m.slices);
  p.lease = PrefixLease(&index_, m.node);
  return p;
}

void PrefixCache::insert(const KvNamespace& ns, std::span<const int32_t> tokens, const PageTable& table,
                         std::span<const KvBlock> blocks, std::span<const PrefixState> states) {
  if (!enabled_ || tokens.empty()) return;
  index_.insert(ns, tokens, table);
  if (with_states() && !states.empty()) store_states(ns, tokens, states);
  if (!blocks.empty()) {
    const RadixIndex::Anchor a = index_.anchor(ns, tokens);
    for (const KvBlock& b : blocks)
      if (b.begin < b.end && b.end <= int32_t(tokens.size()))
        blocks_.add(ns, tokens.subspan(b.begin, b.end - b.begin), a, b.begin);
  }
}

void PrefixCache::add_tier_writes(std::span<const int32_t> tokens, int32_t n_prompt, std::span<const PrefixState> states,
                                  TierWrites& w) const {
  if (!enabled_ || tokens.empty()) return;
  // Tiers find chains by page-aligned length (tier/entry_key.h): write what the next
  // turn probes (all of it) and what a repeat of this prompt probes (its first
  // n_prompt - 1 tokens); the second costs nothing when its links are the first's.
  w.chains.push_back({int32_t(tokens.size())});
  w.chains.push_back({std::min(int32_t(tokens.size()), std::max(0, n_prompt - 1))});
  // Each snapshot goes with its prefix: its own entry beside the chain (the links above
  // cover every whole page before it).
  if (with_states())
    for (const PrefixState& s : states)
      if (s.at > 0 && s.at <= int32_t(tokens.size()) && s.state && s.state->n_tokens() == s.at)
        w.states.push_back({s.at, s.state->data()});
}

void PrefixCache::store_states(const KvNamespace& ns, std::span<const int32_t> tokens,
                               std::span<const PrefixState> states) {
  // The path stays locked while snapshot pages are allocated: the reclaimer may evict
  // other entries, never the nodes the snapshots go to.
  const RadixIndex::Anchor a = index_.anchor(ns, tokens);
  if (a.node < 0) return;
  PrefixLease lock(&index_, a.node);
  // Latest first: when the memory runs short, the snapshots nearest the end are kept.
  for (auto it = states.rbegin(); it != states.rend(); ++it) {
    const PrefixState& s = *it;
    if (s.at <= 0 || s.at > int32_t(tokens.size()) || !s.state || s.state->n_tokens() != s.at) continue;
    const int32_t node = index_.node_ending(ns, tokens.first(size_t(s.at)));
    if (node < 0 || index_.node_state(node) >= 0) continue;
    const int32_t h = states_.put(s.state->data(), s.state->n_tokens());
    if (h < 0) return;  // the memory holds no more: the earlier snapshots stay
    index_.set_node_state(node, h);
  }
}

}  // namespace pc
