// 8×8 transpose of AVX2 float vectors, for the attention softmax's
// lane-per-query layout (paged_attention_avx2.cc, and the 16-lane form's
// AVX2 emulation, simd16_emu.h). Include only inside an AVX2 target region;
// internal linkage, so each target's copy stays its own.
#pragma once

#include <immintrin.h>

namespace pc {
namespace {

// out[j] lane i = in[i] lane j.
inline void transpose8_ps(const __m256 in[8], __m256 out[8]) {
  __m256 t[8], u[8];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(in[2 * i], in[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(in[2 * i], in[2 * i + 1]);
  }
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    const __m256* th = t + 4 * h;
    u[4 * h + 0] = _mm256_shuffle_ps(th[0], th[2], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * h + 1] = _mm256_shuffle_ps(th[0], th[2], _MM_SHUFFLE(3, 2, 3, 2));
    u[4 * h + 2] = _mm256_shuffle_ps(th[1], th[3], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * h + 3] = _mm256_shuffle_ps(th[1], th[3], _MM_SHUFFLE(3, 2, 3, 2));
  }
#pragma GCC unroll 4
  for (int p = 0; p < 4; ++p) {
    out[p] = _mm256_permute2f128_ps(u[p], u[4 + p], 0x20);
    out[p + 4] = _mm256_permute2f128_ps(u[p], u[4 + p], 0x31);
  }
}

}  // namespace
}  // namespace pc
