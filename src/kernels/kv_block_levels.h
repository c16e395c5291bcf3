// SIMD reading of quantized KV rows (kernels/kv_quant.h) for the attention
// kernels: one quantization block of 8 rows as int8 levels, transposed to a
// byte per row and 8 bytes per dimension (the F16 pages' key layout,
// k_layout.h, before widening). Used by the AVX2 kernel's preparation of
// quantized K (paged_attention_avx2.cc prepare_keys_q).
//
// Include inside an AVX2 (or wider) target region; internal linkage only.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/kv_quant.h"

namespace pc {
namespace {

// The 32 values of quantization block qb (of 32 values) of n <= 8 rows of
// type Q (q8_0 or q4_0), rows rb bytes apart: x[u] row u's int8 levels in
// order (q8_0: q; q4_0: nibble - 8), zero for u >= n; the return value, lane
// u: row u's F16 scale as F32 (0 for u >= n). value = scale[u] * x[u][j],
// exact in F32. (The scales gathered into a register, not through memory:
// eight 2-byte stores read back as one vector stall store forwarding.)
template <KvType Q>
inline __m256 kvq_block_levels(const uint8_t* rows, size_t rb, int n, int qb, __m256i x[8]) {
  constexpr size_t bb = Q == KvType::kQ8_0 ? 34 : 18;  // bytes of a block
  const uint8_t* base = rows + qb * bb;
  auto scale = [&](int u) {
    uint16_t h;
    std::memcpy(&h, base + u * rb, 2);
    return short(h);
  };
  auto levels = [&](int u) {
    const uint8_t* q = base + u * rb + 2;
    if constexpr (Q == KvType::kQ8_0) {
      return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
    } else {  // values 0-15 the low nibbles, 16-31 the high ones
      const __m128i mask = _mm_set1_epi8(15), eight = _mm_set1_epi8(8);
      const __m128i qs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
      const __m128i lo = _mm_sub_epi8(_mm_and_si128(qs, mask), eight);
      const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(qs, 4), mask), eight);
      return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
    }
  };
  if (n == 8) {
#pragma GCC unroll 8
    for (int u = 0; u < 8; ++u) x[u] = levels(u);
    return _mm256_cvtph_ps(
        _mm_setr_epi16(scale(0), scale(1), scale(2), scale(3), scale(4), scale(5), scale(6), scale(7)));
  }
  alignas(16) short h[8] = {};  // (a sequence's or page's last block: rare)
  for (int u = 0; u < 8; ++u) {
    x[u] = u < n ? levels(u) : _mm256_setzero_si256();
    if (u < n) h[u] = scale(u);
  }
  return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(h)));
}

// The levels x[8] (kvq_block_levels) transposed by three rounds of unpacks:
// f(D, c) for D in {0, 2, 4, ..., 14}, where c holds 8 bytes (one per row,
// row 0 first) for each of dimensions D, D + 1 (lane 0) and 16 + D, 17 + D
// (lane 1) of the block.
template <class F>
inline void kvq_transpose_levels(const __m256i x[8], F&& f) {
  __m256i a[4][2], b[2][2][2];
  // a[p][h]: rows 2p, 2p+1 interleaved, dimensions 8h .. 8h+7 of each lane
#pragma GCC unroll 4
  for (int p = 0; p < 4; ++p) {
    a[p][0] = _mm256_unpacklo_epi8(x[2 * p], x[2 * p + 1]);
    a[p][1] = _mm256_unpackhi_epi8(x[2 * p], x[2 * p + 1]);
  }
  // b[q][h][g]: rows 4q .. 4q+3, dimensions 8h + 4g .. 8h + 4g + 3 of each lane
#pragma GCC unroll 2
  for (int q = 0; q < 2; ++q)
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      b[q][h][0] = _mm256_unpacklo_epi16(a[2 * q][h], a[2 * q + 1][h]);
      b[q][h][1] = _mm256_unpackhi_epi16(a[2 * q][h], a[2 * q + 1][h]);
    }
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h)
#pragma GCC unroll 2
    for (int g = 0; g < 2; ++g) {
      f(8 * h + 4 * g, _mm256_unpacklo_epi32(b[0][h][g], b[1][h][g]));
      f(8 * h + 4 * g + 2, _mm256_unpackhi_epi32(b[0][h][g], b[1][h][g]));
    }
}

}  // namespace
}  // namespace pc
