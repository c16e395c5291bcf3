#include "grammar/utf8_ranges.h"

#include <algorithm>

namespace pc::grammar {

std::vector<CodeRange> normalize(std::vector<CodeRange> ranges, bool negate) {
  std::sort(ranges.begin(), ranges.end());
  std::vector<CodeRange> merged;
  for (auto [lo, hi] : ranges) {
    if (lo > hi) continue;
    hi = std::min(hi, kMaxCodePoint);
    if (!merged.empty() && lo <= merged.back().second + 1)
      merged.back().second = std::max(merged.back().second, hi);
    else
      merged.push_back({lo, hi});
  }
  if (negate) {
    std::vector<CodeRange> comp;
    uint32_t next = 0;
    for (auto [lo, hi] : merged) {
      if (lo > next) comp.push_back({next, lo - 1});
      next = hi + 1;
    }
    if (next <= kMaxCodePoint) comp.push_back({next, kMaxCodePoint});
    merged = std::move(comp);
  }
  std::vector<CodeRange> out;  // without surrogates
  for (auto [lo, hi] : merged) {
    if (hi < 0xD800 || lo > 0xDFFF) {
      out.push_back({lo, hi});
      continue;
    }
    if (lo < 0xD800) out.push_back({lo, 0xD7FF});
    if (hi > 0xDFFF) out.push_back({0xE000, hi});
  }
  return out;
}

void append_utf8(uint32_t cp, std::vector<uint8_t>& out) {
  if (cp < 0x80) {
    out.push_back(uint8_t(cp));
  } else if (cp < 0x800) {
    out.push_back(uint8_t(0xC0 | (cp >> 6)));
    out.push_back(uint8_t(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(uint8_t(0xE0 | (cp >> 12)));
    out.push_back(uint8_t(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(uint8_t(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(uint8_t(0xF0 | (cp >> 18)));
    out.push_back(uint8_t(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(uint8_t(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(uint8_t(0x80 | (cp & 0x3F)));
  }
}

namespace {

// Sequences for every byte string between a and b (same length, a <= b), where
// positions after the first are continuation bytes (80-BF): within one encoded
// length, code point order is the byte strings' lexicographic order, so the strings
// between two encodings are exactly the encodings between them.
void between(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, size_t i,
             std::vector<ByteRange>& prefix, std::vector<std::vector<ByteRange>>& out) {
  const size_t n = a.size();
  if (i == n - 1) {
    prefix.push_back({a[i], b[i]});
    out.push_back(prefix);
    prefix.pop_back();
    return;
  }
  if (a[i] == b[i]) {
    prefix.push_back({a[i], a[i]});
    between(a, b, i + 1, prefix, out);
    prefix.pop_back();
    return;
  }
  auto all = [&](const std::vector<uint8_t>& v, uint8_t x) {
    for (size_t k = i + 1; k < n; ++k)
      if (v[k] != x) return false;
    return true;
  };
  const bool a_min = all(a, 0x80), b_max = all(b, 0xBF);
  uint8_t mid_lo = a[i], mid_hi = b[i];
  if (!a_min) {  // a[i] followed by a's tail .. BF BF ...
    std::vector<uint8_t> top(a);
    for (size_t k = i + 1; k < n; ++k) top[k] = 0xBF;
    prefix.push_back({a[i], a[i]});
    between(a, top, i + 1, prefix, out);
    prefix.pop_back();
    ++mid_lo;
  }
  if (!b_max) --mid_hi;
  if (mid_lo <= mid_hi) {
    std::vector<ByteRange> seq(prefix);
    seq.push_back({mid_lo, mid_hi});
    for (size_t k = i + 1; k < n; ++k) seq.push_back({0x80, 0xBF});
    out.push_back(std::move(seq));
  }
  if (!b_max) {  // b[i] followed by 80 80 ... .. b's tail
    std::vector<uint8_t> bottom(b);
    for (size_t k = i + 1; k < n; ++k) bottom[k] = 0x80;
    prefix.push_back({b[i], b[i]});
    between(bottom, b, i + 1, prefix, out);
    prefix.pop_back();
  }
}

}  // namespace

std::vector<std::vector<ByteRange>> utf8_sequences(const std::vector<CodeRange>& ranges) {
  static constexpr uint32_t kLenEnd[] = {0x7F, 0x7FF, 0xFFFF, kMaxCodePoint};
  std::vector<std::vector<ByteRange>> out;
  for (auto [lo, hi] : ranges) {
    uint32_t start = 0;
    for (uint32_t end : kLenEnd) {  // split where the encoded length changes
      const uint32_t l = std::max(lo, start), h = std::min(hi, end);
      start = end + 1;
      if (l > h) continue;
      std::vector<uint8_t> a, b;
      append_utf8(l, a);
      append_utf8(h, b);
      std::vector<ByteRange> prefix;
      between(a, b, 0, prefix, out);
    }
  }
  return out;
}

}  // namespace pc::grammar
