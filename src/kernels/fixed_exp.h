// The project's exp: one fixed sequence of float operations, so that the
// scalar and the 8-lane AVX2 forms agree bitwise (and cost a dozen vector
// instructions for 8 lanes instead of a libm call per value). Used by the
// attention softmax and by SwiGLU's sigmoid.
//   x < -87 (or -inf): +0;  NaN: NaN;  x > 88: as x = 88
//   n = nearbyint(x * kLog2e)
//   r = fma(n, -kLn2Hi, x);  r = fma(n, kLn2LoNeg, r)        (|r| <= ~0.35)
//   p = sum_{i<=7} r^i / i!  by Estrin's scheme (short dependency chains):
//       r2 = r*r; r4 = r2*r2; pij = fma(ci_j, r, ci) for (0,1) (2,3) (4,5) (6,7);
//       p = fma(fma(p67, r2, p45), r4, fma(p23, r2, p01))
//   exp = p * 2^n                                             (2^n built from bits)
// Relative error ~1e-7 against the exact exp (tests/kernels/paged_attention_test.cc).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace pc {

inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kLn2Hi = 0.693359375f;        // exact in 9 bits
inline constexpr float kLn2LoNeg = 2.12194440e-4f;   // ln 2 = kLn2Hi - kLn2LoNeg (to float precision)
inline constexpr float kExpC[8] = {1.f, 1.f, 0.5f, 1.f / 6, 1.f / 24, 1.f / 120, 1.f / 720, 1.f / 5040};  // 1/i!

inline float fixed_exp(float x) {
  if (!(x >= -87.f)) return x != x ? x : 0.f;
  if (x > 88.f) x = 88.f;
  const float n = std::nearbyint(x * kLog2e);
  float r = std::fma(n, -kLn2Hi, x);
  r = std::fma(n, kLn2LoNeg, r);
  const float r2 = r * r, r4 = r2 * r2;
  const float p01 = std::fma(kExpC[1], r, kExpC[0]), p23 = std::fma(kExpC[3], r, kExpC[2]);
  const float p45 = std::fma(kExpC[5], r, kExpC[4]), p67 = std::fma(kExpC[7], r, kExpC[6]);
  const float p = std::fma(std::fma(p67, r2, p45), r4, std::fma(p23, r2, p01));
  const uint32_t bits = uint32_t(int32_t(n) + 127) << 23;
  float two_n;
  std::memcpy(&two_n, &bits, 4);
  return p * two_n;
}

// The project's tanh, on fixed_exp: one fixed sequence of float operations, the
// same in the scalar and the 8-lane form (attention soft-capping, GeGLU's GELU).
//   a = |x|;  e = fixed_exp(-2a);  t = (1 - e) / (1 + e);  tanh = t with x's sign
// Absolute error ~1e-7 (relative ~1e-4 for |x| < 1e-3, where 1 - e cancels).
inline float fixed_tanh(float x) {
  const float e = fixed_exp(-2.f * std::fabs(x));
  return std::copysign((1.f - e) / (1.f + e), x);
}

#if defined(__x86_64__)
// fixed_exp() of 8 lanes, the same float operations. Only call when the CPU
// runs AVX2 and FMA.
__attribute__((target("avx2,fma"))) inline __m256 fixed_exp8(__m256 x) {
  const __m256 ok = _mm256_cmp_ps(x, _mm256_set1_ps(-87.f), _CMP_GE_OQ);
  const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  const __m256 xc = _mm256_min_ps(x, _mm256_set1_ps(88.f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-kLn2Hi), xc);
  r = _mm256_fmadd_ps(n, _mm256_set1_ps(kLn2LoNeg), r);
  const __m256 r2 = _mm256_mul_ps(r, r), r4 = _mm256_mul_ps(r2, r2);
  const __m256 p01 = _mm256_fmadd_ps(_mm256_set1_ps(kExpC[1]), r, _mm256_set1_ps(kExpC[0]));
  const __m256 p23 = _mm256_fmadd_ps(_mm256_set1_ps(kExpC[3]), r, _mm256_set1_ps(kExpC[2]));
  const __m256 p45 = _mm256_fmadd_ps(_mm256_set1_ps(kExpC[5]), r, _mm256_set1_ps(kExpC[4]));
  const __m256 p67 = _mm256_fmadd_ps(_mm256_set1_ps(kExpC[7]), r, _mm256_set1_ps(kExpC[6]));
  const __m256 p = _mm256_fmadd_ps(_mm256_fmadd_ps(p67, r2, p45), r4, _mm256_fmadd_ps(p23, r2, p01));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  const __m256 y = _mm256_and_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(e)), ok);
  return _mm256_blendv_ps(y, x, nan);
}
#endif

#if defined(__x86_64__)
// fixed_tanh() of 8 lanes, the same float operations. Only call when the CPU
// runs AVX2 and FMA.
__attribute__((target("avx2,fma"))) inline __m256 fixed_tanh8(__m256 x) {
  const __m256 sign = _mm256_set1_ps(-0.f);
  const __m256 e = fixed_exp8(_mm256_mul_ps(_mm256_set1_ps(-2.f), _mm256_andnot_ps(sign, x)));
  const __m256 one = _mm256_set1_ps(1.f);
  const __m256 t = _mm256_div_ps(_mm256_sub_ps(one, e), _mm256_add_ps(one, e));
  return _mm256_or_ps(_mm256_andnot_ps(sign, t), _mm256_and_ps(sign, x));
}
#endif

// In place, n <= 8 values with fixed_exp8 (tests; only call when the CPU runs
// AVX2; a plain loop of fixed_exp() on other builds).
void fixed_exp8_avx2(float* x, int n);

}  // namespace pc
