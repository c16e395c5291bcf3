#include "tier/entry_key.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <xxhash.h>

#include <algorithm>

namespace pc {

namespace {

void hash_string(XXH3_state_t& st, const std::string& s) {
  const uint64_t n = s.size();  // length first: ("ab","c") != ("a","bc")
  XXH3_64bits_update(&st, &n, sizeof n);
  XXH3_64bits_update(&st, s.data(), s.size());
}

void hash_head(XXH3_state_t& st, const KvNamespace& ns, const KvShape& shape) {
  XXH3_64bits_reset(&st);
  hash_string(st, ns.model);
  hash_string(st, ns.kv_type);
  hash_string(st, tier_scope_bytes(ns));  // scope and kind
  const int32_t dims[4] = {shape.n_layer, shape.n_kv_head, shape.head_dim, shape.page_size};
  XXH3_64bits_update(&st, dims, sizeof dims);
}

}  // namespace

uint64_t entry_key(const KvNamespace& ns, const KvShape& shape, std::span<const int32_t> tokens) {
  XXH3_state_t st;
  hash_head(st, ns, shape);
  XXH3_64bits_update(&st, tokens.data(), tokens.size_bytes());
  return XXH3_64bits_digest(&st);
}

std::vector<PrefixKey> prefix_keys(const KvNamespace& ns, const KvShape& shape,
                                   std::span<const int32_t> tokens, int32_t min_length) {
  std::vector<PrefixKey> out;
  const int32_t n = int32_t(tokens.size());
  const int32_t P = std::max(1, shape.page_size);
  XXH3_state_t st;
  hash_head(st, ns, shape);
  int32_t done = 0;
  for (int32_t len = P; len <= n; len += P) {
    XXH3_64bits_update(&st, tokens.data() + done, size_t(len - done) * sizeof(int32_t));
    done = len;
    if (len >= min_length) out.push_back({len, XXH3_64bits_digest(&st)});
  }
  if (n > done) {
    XXH3_64bits_update(&st, tokens.data() + done, size_t(n - done) * sizeof(int32_t));
    if (n >= min_length) out.push_back({n, XXH3_64bits_digest(&st)});
  }
  std::reverse(out.begin(), out.end());
  return out;
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
