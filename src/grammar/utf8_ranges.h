// Code-point ranges as UTF-8 byte-range sequences, so that a grammar over
// characters becomes a grammar over bytes.
//
//   [U+0080, U+07FF]  →  [C2-DF][80-BF]
//   [U+00E9, U+0101]  →  [C3][A9-BF] | [C4][80-81]
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

namespace pc::grammar {

using CodeRange = std::pair<uint32_t, uint32_t>;  // inclusive
using ByteRange = std::pair<uint8_t, uint8_t>;    // inclusive

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

// Sorted, merged ranges without the surrogates (U+D800-DFFF, which UTF-8 cannot
// encode); `negate` takes the complement within [0, kMaxCodePoint] first.
std::vector<CodeRange> normalize(std::vector<CodeRange> ranges, bool negate);

// The UTF-8 encodings of every code point in `ranges` (normalized), as sequences of
// byte ranges: each byte string of a sequence's cross product is one code point's
// encoding, and the sequences are disjoint.
std::vector<std::vector<ByteRange>> utf8_sequences(const std::vector<CodeRange>& ranges);

// Appends the UTF-8 encoding of `cp` to `out`.
void append_utf8(uint32_t cp, std::vector<uint8_t>& out);

}  // namespace pc::grammar
