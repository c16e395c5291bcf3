// Tier keys: which entry holds the KV of a token sequence.
//
// Chains. Below memory a prefix is a chain of links, each one page of tokens (the pool's
// page_size): link k holds tokens [k·P, (k+1)·P) and is keyed by the hash of everything
// before it plus its own tokens, as vLLM's block hashes and LMCache's chunks are:
//
//   h(-1)   = {0, 0}
//   h(k)    = XXH3_128(model, kv_type, tier_scope_bytes, KvShape, h(k-1), tokens of link k)
//   key(k)  = the low 64 bits of h(k)
//
// So a link is stored once however many prefixes share it, every page-aligned prefix is
// a chain that ends at its own last link, and the namespace (model, KV type, tenant,
// cache_salt, kind: tier_scope_bytes) is hashed into every link's key. A link's entry
// stores its parent hash h(k-1) and its start k·P; a reader checks both, the namespace
// and the link's own tokens, so a 64-bit key collision is a miss and reaching a link
// through another prefix needs a 128-bit collision.
//
// Why a page per link: every page-aligned prefix is reachable as a chain end, so a
// conversation's turns write each page once (a longer link would leave a partial tail
// link that the next turn writes again); the costs are a header per page (~0.3 KB: the
// page's tokens and positions, the namespace) and one key or file per page, which the
// tiers read in pipelined batches.
//
// Entries that are not chained (module segments, blocks) are one-link chains: start 0,
// parent {0, 0}, any number of tokens; entry_key() is their key.
#pragma once
#include <compare>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kv/kv_storage.h"
#include "kv/radix_index.h"

namespace pc {

// A 128-bit chain hash (h(k) above).
struct ChainHash {
  uint64_t lo = 0, hi = 0;
  auto operator<=>(const ChainHash&) const = default;
};

// h after appending `tokens` as one link to the chain ending in `parent`.
ChainHash chain_next(const KvNamespace& ns, const KvShape& shape, const ChainHash& parent,
                     std::span<const int32_t> tokens);
// The key of a link: chain_next(...).lo.
uint64_t link_key(const KvNamespace& ns, const KvShape& shape, const ChainHash& parent,
                  std::span<const int32_t> tokens);
// The key of an entry holding `tokens` from position 0 as one link (modules, blocks).
uint64_t entry_key(const KvNamespace& ns, const KvShape& shape, std::span<const int32_t> tokens);

// One link of a prefix's chain.
struct ChainLink {
  int32_t start = 0;   // its first token's index in the prefix
  int32_t length = 0;  // its tokens (the page size)
  ChainHash parent;    // hash of tokens [0, start)
  uint64_t key = 0;
};
// The links of tokens' full pages, root first: tokens.size() / page_size of them.
std::vector<ChainLink> chain_links(const KvNamespace& ns, const KvShape& shape, std::span<const int32_t> tokens);

// The chain hash at every page boundary of tokens: [k] = h of tokens [0, k·P), for
// k = 0 .. tokens.size() / P ([0] = {0, 0}).
std::vector<ChainHash> chain_bounds(const KvNamespace& ns, const KvShape& shape, std::span<const int32_t> tokens);

// Recurrent-state entries (hybrid models, docs/tiers.md "Recurrent state"). The state
// after tokens [0, p) travels in an entry shaped like the link that ends at p: its own
// tokens are [start, p) with start = ((p - 1) / P)·P (1 to P tokens, the page p falls
// in, possibly partial), its parent is the chain hash of [0, start), and it carries the
// state after its pages. Its key is derived from the link's chain hash with a tag, so it
// never meets a link's key, and covers the namespace like every link's:
//   state_key = XXH3_64(h(link ending at p), seed "state")
uint64_t state_key(const KvNamespace& ns, const KvShape& shape, const ChainHash& parent,
                   std::span<const int32_t> tokens);
// The start of the state entry of the state after p tokens (p >= 1).
inline int32_t state_link_start(int32_t p, int32_t page_size) { return (p - 1) / page_size * page_size; }

// 16 lowercase hex digits (file names, Redis keys).
std::string key_hex(uint64_t key);
// Parses key_hex output; false when `s` is not 16 hex digits.
bool parse_key_hex(std::string_view s, uint64_t* key);

}  // namespace pc
