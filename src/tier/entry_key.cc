#include "tier/entry_key.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <xxhash.h>

#include <algorithm>

namespace pc {

namespace {

void hash_string(XXH3_state_t& st, const std::string& s) {
  const uint64_t n = s.size();  // length first: ("ab","c") != ("a","bc")
  XXH3_128bits_update(&st, &n, sizeof n);
  XXH3_128bits_update(&st, s.data(), s.size());
}

// The namespace and shape, hashed into every link.
struct Head {
  std::string scope;
  explicit Head(const KvNamespace& ns) : scope(tier_scope_bytes(ns)) {}
  void hash(XXH3_state_t& st, const KvNamespace& ns, const KvShape& shape) const {
    XXH3_128bits_reset(&st);
    hash_string(st, ns.model);
    hash_string(st, ns.kv_type);
    hash_string(st, scope);
    const int32_t dims[4] = {shape.n_layer, shape.n_kv_head, shape.head_dim, shape.page_size};
    XXH3_128bits_update(&st, dims, sizeof dims);
  }
};

ChainHash next(const Head& head, const KvNamespace& ns, const KvShape& shape, const ChainHash& parent,
               std::span<const int32_t> tokens) {
  XXH3_state_t st;
  head.hash(st, ns, shape);
  const uint64_t p[2] = {parent.lo, parent.hi};
  XXH3_128bits_update(&st, p, sizeof p);
  const uint64_t n = tokens.size();
  XXH3_128bits_update(&st, &n, sizeof n);
  XXH3_128bits_update(&st, tokens.data(), tokens.size_bytes());
  const XXH128_hash_t h = XXH3_128bits_digest(&st);
  return ChainHash{h.low64, h.high64};
}

}  // namespace

ChainHash chain_next(const KvNamespace& ns, const KvShape& shape, const ChainHash& parent,
                     std::span<const int32_t> tokens) {
  return next(Head(ns), ns, shape, parent, tokens);
}

uint64_t link_key(const KvNamespace& ns, const KvShape& shape, const ChainHash& parent,
                  std::span<const int32_t> tokens) {
  return chain_next(ns, shape, parent, tokens).lo;
}

uint64_t entry_key(const KvNamespace& ns, const KvShape& shape, std::span<const int32_t> tokens) {
  return link_key(ns, shape, ChainHash{}, tokens);
}

std::vector<ChainLink> chain_links(const KvNamespace& ns, const KvShape& shape, std::span<const int32_t> tokens) {
  std::vector<ChainLink> out;
  const int32_t P = std::max(1, shape.page_size);
  const Head head(ns);
  ChainHash h;
  for (int32_t start = 0; start + P <= int32_t(tokens.size()); start += P) {
    const ChainHash nh = next(head, ns, shape, h, tokens.subspan(size_t(start), size_t(P)));
    out.push_back(ChainLink{start, P, h, nh.lo});
    h = nh;
  }
  return out;
}

std::vector<ChainHash> chain_bounds(const KvNamespace& ns, const KvShape& shape, std::span<const int32_t> tokens) {
  const int32_t P = std::max(1, shape.page_size);
  const Head head(ns);
  std::vector<ChainHash> out(1);
  for (int32_t start = 0; start + P <= int32_t(tokens.size()); start += P)
    out.push_back(next(head, ns, shape, out.back(), tokens.subspan(size_t(start), size_t(P))));
  return out;
}

uint64_t state_key(const KvNamespace& ns, const KvShape& shape, const ChainHash& parent,
                   std::span<const int32_t> tokens) {
  constexpr uint64_t kStateSeed = 0x6574617473ull;  // "state"
  const ChainHash h = chain_next(ns, shape, parent, tokens);
  const uint64_t v[2] = {h.lo, h.hi};
  return XXH3_64bits_withSeed(v, sizeof v, kStateSeed);
}

std::string key_hex(uint64_t key) {
  static const char kDigits[] = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, key >>= 4) s[i] = kDigits[key & 15];
  return s;
}

bool parse_key_hex(std::string_view s, uint64_t* key) {
  if (s.size() != 16) return false;
  uint64_t k = 0;
  for (char c : s) {
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return false;
    k = k << 4 | uint64_t(d);
  }
  *key = k;
  return true;
}

}  // namespace pc
