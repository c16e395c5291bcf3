// SIMD reading of quantized KV rows (kernels/kv_quant.h) for the attention
// kernels: one quantization block of 8 rows as int8 levels, transposed to a
// byte per row and 8 bytes per dimension (the F16 pages' key layout,
// k_layout.h, before widening). Shared by the AVX2 kernel
// (paged_attention_avx2.cc) and the 16-lane tiles (paged_attention_avx512_impl.h).
//
// Include inside an AVX2 (or wider) target region; internal linkage only.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/kv_quant.h"

namespace pc {
namespace {

// The 32 values of quantization block qb (of 32 values) of n <= 8 rows, rows
// rb bytes apart: x[u] row u's int8 levels in order (q8_0: q; q4_0: nibble - 8),
// zero for u >= n; scl[u] row u's F16 scale as F32 (0 for u >= n). value =
// scl[u] * x[u][j], exact in F32.
inline void kvq_block_levels(KvType t, const uint8_t* rows, size_t rb, int n, int qb, __m256i x[8],
                             float scl[8]) {
  alignas(16) uint16_t dh[8] = {};
  const size_t bb = t == KvType::kQ8_0 ? 34 : 18;  // bytes of a block
  const __m128i mask = _mm_set1_epi8(15), eight = _mm_set1_epi8(8);
  for (int u = 0; u < 8; ++u) {
    if (u >= n) {
      x[u] = _mm256_setzero_si256();
      continue;
    }
    const uint8_t* blk = rows + u * rb + qb * bb;
    std::memcpy(dh + u, blk, 2);
    if (t == KvType::kQ8_0) {
      x[u] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
    } else {  // values 0-15 the low nibbles, 16-31 the high ones
      const __m128i qs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
      const __m128i lo = _mm_sub_epi8(_mm_and_si128(qs, mask), eight);
      const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(qs, 4), mask), eight);
      x[u] = _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
    }
  }
  _mm256_storeu_ps(scl, _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(dh))));
}

// The levels x[8] (kvq_block_levels) transposed by three rounds of unpacks:
// f(D, c) for D in {0, 2, 4, ..., 14}, where c holds 8 bytes (one per row,
// row 0 first) for each of dimensions D, D + 1 (lane 0) and 16 + D, 17 + D
// (lane 1) of the block.
template <class F>
inline void kvq_transpose_levels(const __m256i x[8], F&& f) {
  __m256i a[4][2], b[2][2][2];
  // a[p][h]: rows 2p, 2p+1 interleaved, dimensions 8h .. 8h+7 of each lane
  for (int p = 0; p < 4; ++p) {
    a[p][0] = _mm256_unpacklo_epi8(x[2 * p], x[2 * p + 1]);
    a[p][1] = _mm256_unpackhi_epi8(x[2 * p], x[2 * p + 1]);
  }
  // b[q][h][g]: rows 4q .. 4q+3, dimensions 8h + 4g .. 8h + 4g + 3 of each lane
  for (int q = 0; q < 2; ++q)
    for (int h = 0; h < 2; ++h) {
      b[q][h][0] = _mm256_unpacklo_epi16(a[2 * q][h], a[2 * q + 1][h]);
      b[q][h][1] = _mm256_unpackhi_epi16(a[2 * q][h], a[2 * q + 1][h]);
    }
  for (int h = 0; h < 2; ++h)
    for (int g = 0; g < 2; ++g) {
      f(8 * h + 4 * g, _mm256_unpacklo_epi32(b[0][h][g], b[1][h][g]));
      f(8 * h + 4 * g + 2, _mm256_unpackhi_epi32(b[0][h][g], b[1][h][g]));
    }
}

}  // namespace
}  // namespace pc
