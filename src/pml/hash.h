// Stable 64-bit content hashes (XXH3) for digests. Values are written in a
// fixed little-endian, length-prefixed form, so a digest depends only on the
// values hashed, not on the platform. Internal to src/pml.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace pc::pml {

class Hasher {
 public:
  Hasher& u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) buf_.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
    return *this;
  }
  Hasher& i64(int64_t v) { return u64(static_cast<uint64_t>(v)); }
  Hasher& str(std::string_view s) {
    u64(s.size());
    buf_.append(s);
    return *this;
  }
  Hasher& ids(const std::vector<int32_t>& v) {
    u64(v.size());
    for (int32_t x : v) i64(x);
    return *this;
  }
  uint64_t digest() const { return XXH3_64bits(buf_.data(), buf_.size()); }

 private:
  std::string buf_;
};

inline std::string hex64(uint64_t v) {
  static const char* d = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[i] = d[v & 15];
  return s;
}

}  // namespace pc::pml
