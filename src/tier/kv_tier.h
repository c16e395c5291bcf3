// A KV tier below memory: a store of serialized entries (tier/entry.h) found by key
// (tier/entry_key.h). DiskTier and RedisTier implement it; KvTiers (engine/kv_tiers.h)
// keeps them in a list, fastest first, and is the only thing that needs to know more
// than this interface.
//
// Contract of every implementation:
// - Thread-safe. Lookups and puts run on a TierWorker thread while the engine thread
//   reads stats() and list().
// - Nothing throws after construction; failures are TierStatus values.
// - A lookup hit is a fully validated entry (checksum, namespace, shape, tokens); an
//   entry failing validation is deleted and reported as a miss.
// - An uncompressed hit's `entry.data` is the entry's serialized bytes (deserialize_entry
//   keeps them), so it can be put() into another tier without serializing again.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tier/entry.h"
#include "tier/entry_key.h"
#include "tier/tier_result.h"
#include "tier/tier_stats.h"

namespace pc {

// One stored entry, as a listing shows it.
struct TierItem {
  uint64_t key = 0;
  uint64_t bytes = 0;
  int32_t n_tokens = 0;
  int32_t start = 0;  // the link's first token in its prefix (tier/entry_key.h)
  KvNamespace ns;
  int64_t keep_until = 0;  // unix seconds the tier keeps it until (put's keep_seconds); 0: none
  bool state = false;      // a state entry: the link's KV and the recurrent state after it
};

class KvTier {
 public:
  virtual ~KvTier() = default;

  // "disk", "redis": the `tier` of the published stats and listings.
  virtual const char* name() const = 0;

  // Stores serialized entry bytes under the key of their namespace, shape and tokens.
  // keep_seconds > 0: the entry's own lifetime, from now — the tier keeps it at least
  // that long (disk: not evicted for capacity before then; Redis: its TTL is the
  // longer of this and the tier's). An entry already stored is given the later end.
  virtual TierStatus put(std::span<const uint8_t> entry_bytes, int64_t keep_seconds = 0) = 0;
  // The entry of exactly `tokens`.
  virtual TierLookup get(const KvNamespace& ns, const KvShape& shape, std::span<const int32_t> tokens) = 0;
  // Walks a prefix's chain (tier/entry_key.h): reads links[0], links[1], ... (links of
  // `tokens`, consecutive, as chain_links gives them) and stops at the first one it does
  // not hold or that fails validation (deleted and counted). Marks the links read used,
  // tail first, so that a parent is never less recently used than its child.
  virtual TierChain read_chain(const KvNamespace& ns, const KvShape& shape, std::span<const int32_t> tokens,
                               std::span<const ChainLink> links) = 0;
  // The whole chain of tokens' full pages, from its root.
  TierChain read_prefix(const KvNamespace& ns, const KvShape& shape, std::span<const int32_t> tokens) {
    const std::vector<ChainLink> links = chain_links(ns, shape, tokens);
    return read_chain(ns, shape, tokens, links);
  }
  // A recurrent-state entry (tier/entry.h, tier/entry_key.h state_key): the one shaped
  // like the link at `link` with own `tokens` (1..page_size of them), carrying a state
  // of state_bytes; an entry failing validation (checksum, namespace, link, tokens,
  // state size) is deleted and a miss. Marks it used.
  virtual TierLookup get_state(const KvNamespace& ns, const KvShape& shape, const LinkPos& link,
                               std::span<const int32_t> tokens, uint64_t state_bytes) = 0;
  // Whether each of `keys` is stored ([i]: 1 or 0), without reading payloads; all 0 when
  // the tier cannot be asked now (write-through then tries every key).
  virtual std::vector<char> has(std::span<const uint64_t> keys) = 0;
  // Marks a chain's links (root first) used, tail first (eviction removes from the
  // tail: see the eviction rule in docs/tiers.md). Keys not stored are ignored.
  virtual void touch_chain(std::span<const uint64_t> /*keys_root_first*/) {}

  virtual TierStats stats() const = 0;

  // Whether list() shows the tier's entries (a remote tier cannot list them cheaply).
  virtual bool listable() const { return false; }
  // Every entry, most recently used first; empty when not listable().
  virtual std::vector<TierItem> list() const { return {}; }
  // The stored bytes of the entry listed under `key` (a listable tier's list()); false
  // when it is gone or unreadable. Not validated beyond what put() of another tier
  // checks (its header): readers validate the whole entry.
  virtual bool read_item(uint64_t /*key*/, std::vector<uint8_t>* /*bytes*/) { return false; }

  // Whether the tier was usable at its last operation. Lock-free (an HTTP thread asks
  // while the worker may hold the tier's lock); local tiers: always.
  virtual bool reachable() const { return true; }
  // A shared store's generation: a nonzero value that changes when the store lost its
  // contents since the last call saw it (a restart that came back empty, a flush);
  // 0 when it cannot be told now (unreachable) or the tier has no such notion (local
  // tiers). May do I/O: called on the worker thread.
  virtual uint64_t generation() { return 0; }
};

}  // namespace pc
