// AVX2 + FMA + F16C attention path: the arithmetic of paged_attention.cc, with
// the F16 roundings done by vcvtps2ph. Only this file is compiled for AVX2 (the
// target pragma after the includes), so the rest of the binary stays portable;
// paged_attention() selects it at run time.
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/paged_attention_internal.h"

#if defined(__x86_64__)
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#include <immintrin.h>

namespace pc {

namespace {

inline float hsum256(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

inline __m256 load_f16(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline void store_f16(uint16_t* p, __m256 v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

}  // namespace

void paged_attention_avx2(const PagedAttentionArgs& a, const float* q, int group, float* out,
                          float* scratch) {
  const int P = a.page_size, hd = a.head_dim;
  const size_t slab = size_t(a.kv_head) * P * hd;
  // scratch: q16 [group][hd] and acc [group][hd], both as F16 bits.
  uint16_t* q16 = reinterpret_cast<uint16_t*>(scratch);
  uint16_t* acc = q16 + size_t(group) * hd;
  float* M = scratch + size_t(group) * hd;  // [group] (after the 2*group*hd halves)
  float* S = M + group;
  for (int j = 0; j < group; ++j) {
    for (int d = 0; d < hd; d += 8) {
      store_f16(q16 + j * hd + d, _mm256_loadu_ps(q + size_t(j) * hd + d));
      store_f16(acc + j * hd + d, _mm256_setzero_ps());
    }
    M[j] = -std::numeric_limits<float>::infinity();
    S[j] = 0.f;
  }
  // Keys and values are loaded once per slot for all heads of the group.
  for (int t = 0; t < a.n_ctx; ++t) {
    const uint16_t* K = a.k_pages[t / P] + slab + size_t(t % P) * hd;
    const uint16_t* V = a.v_pages[t / P] + slab + size_t(t % P) * hd;
    for (int j = 0; j < group; ++j) {
      __m256 dot = _mm256_setzero_ps();
      for (int d = 0; d < hd; d += 8) dot = _mm256_fmadd_ps(load_f16(q16 + j * hd + d), load_f16(K + d), dot);
      const float s = hsum256(dot) * a.scale;
      float ms = 1.f, vs = 1.f;
      uint16_t* aj = acc + j * hd;
      if (s > M[j]) {
        ms = std::exp(M[j] - s);
        M[j] = s;
        const __m256 m = _mm256_set1_ps(ms);
        for (int d = 0; d < hd; d += 8) store_f16(aj + d, _mm256_mul_ps(load_f16(aj + d), m));
      } else {
        vs = std::exp(s - M[j]);
      }
      const __m256 v = _mm256_set1_ps(vs);
      for (int d = 0; d < hd; d += 8) store_f16(aj + d, _mm256_fmadd_ps(load_f16(V + d), v, load_f16(aj + d)));
      S[j] = S[j] * ms + vs;
    }
  }
  for (int j = 0; j < group; ++j) {
    const __m256 inv = _mm256_set1_ps(1.f / S[j]);
    for (int d = 0; d < hd; d += 8)
      _mm256_storeu_ps(out + size_t(j) * hd + d, _mm256_mul_ps(load_f16(acc + j * hd + d), inv));
  }
}

}  // namespace pc
#pragma GCC pop_options
#endif
