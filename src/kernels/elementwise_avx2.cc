// AVX2 forms of elementwise.cc's row operations, bitwise equal to the scalar
// ones (the same float operations per element, lane by lane); elementwise.cc
// calls them when cpu_level() runs AVX2.
#include "gguf/quants.h"
#include "kernels/elementwise_internal.h"
#include "kernels/fixed_exp.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "kernels/avx2_target_begin.inc"

namespace pc {

void swiglu_avx2(const float* gate, const float* up, float* out, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 e = fixed_exp8(_mm256_sub_ps(_mm256_setzero_ps(), g));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) out[i] = swiglu1(gate[i], up[i]);
}

void geglu_tanh_avx2(const float* gate, const float* up, float* out, int64_t n) {
  const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.f);
  const __m256 c = _mm256_set1_ps(kGeluC), a = _mm256_set1_ps(kGeluA);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(g, g), g);
    const __m256 t = fixed_tanh8(_mm256_mul_ps(c, _mm256_add_ps(g, _mm256_mul_ps(a, x3))));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(half, g), _mm256_add_ps(one, t)),
                                            _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) out[i] = geglu1(gate[i], up[i]);
}

void softcap_avx2(float* x, int64_t n, float cap) {
  const float inv = 1.f / cap;
  const __m256 cv = _mm256_set1_ps(cap), iv = _mm256_set1_ps(inv);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(x + i, _mm256_mul_ps(cv, fixed_tanh8(_mm256_mul_ps(_mm256_loadu_ps(x + i), iv))));
  for (; i < n; ++i) x[i] = softcap1(x[i], cap, inv);
}

void rms_norm_avx2(const float* x, const float* w, float* y, int64_t n, float eps) {
  // Lane l of acc is the scalar path's s[l]: squares of floats are exact in
  // double, so fma(x, x, s) rounds exactly like s + x * x.
  __m256d acc = _mm256_setzero_pd();
  const int64_t n4 = n & ~int64_t(3);
  for (int64_t i = 0; i < n4; i += 4) {
    const __m256d v = _mm256_cvtps_pd(_mm_loadu_ps(x + i));
    acc = _mm256_fmadd_pd(v, v, acc);
  }
  alignas(32) double s[4];
  _mm256_store_pd(s, acc);
  double ss = (s[0] + s[1]) + (s[2] + s[3]);
  for (int64_t i = n4; i < n; ++i) ss += double(x[i]) * x[i];
  const float scale = rms_norm_scale(ss, n, eps);
  const __m256 sv = _mm256_set1_ps(scale);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), sv), _mm256_loadu_ps(w + i)));
  for (; i < n; ++i) y[i] = x[i] * scale * w[i];
}

void add_inplace_avx2(float* y, const float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_loadu_ps(x + i)));
  for (; i < n; ++i) y[i] += x[i];
}

void f32_to_f16_row_avx2(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
}

void fixed_exp8_avx2(float* x, int n) {
  alignas(32) float t[8] = {};
  for (int i = 0; i < n; ++i) t[i] = x[i];
  _mm256_store_ps(t, fixed_exp8(_mm256_load_ps(t)));
  for (int i = 0; i < n; ++i) x[i] = t[i];
}

}  // namespace pc

#include "kernels/avx2_target_end.inc"

#else  // not x86

namespace pc {
void swiglu_avx2(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = swiglu1(gate[i], up[i]);
}
void fixed_exp8_avx2(float* x, int n) {
  for (int i = 0; i < n; ++i) x[i] = fixed_exp(x[i]);
}
void geglu_tanh_avx2(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = geglu1(gate[i], up[i]);
}
void softcap_avx2(float* x, int64_t n, float cap) {
  for (int64_t i = 0; i < n; ++i) x[i] = softcap1(x[i], cap, 1.f / cap);
}

}  // namespace pc

#endif
