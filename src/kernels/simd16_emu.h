// V512Emu: the 16-lane operations of the AVX-512 kernels as pairs of AVX2
// operations with the same per-lane results (lanes 0-7 in lo, 8-15 in hi),
// so machines without AVX-512 run and test that kernel code. Include only
// inside the AVX2 target region of kernels_avx512_emu.cc.
#pragma once

namespace pc::kern {
namespace {

struct V512Emu {
  struct I {
    __m256i lo, hi;
  };
  struct F {
    __m256 lo, hi;
  };
  static I zero_i() { return {_mm256_setzero_si256(), _mm256_setzero_si256()}; }
  static F zero_f() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
  static I load_i2(const __m256i* lo, const __m256i* hi) { return {_mm256_loadu_si256(lo), _mm256_loadu_si256(hi)}; }
  static F load_f2(const float* lo, const float* hi) { return {_mm256_loadu_ps(lo), _mm256_loadu_ps(hi)}; }
  static I set1_i(int32_t v) { return {_mm256_set1_epi32(v), _mm256_set1_epi32(v)}; }
  static F set1_f(float v) { return {_mm256_set1_ps(v), _mm256_set1_ps(v)}; }
  // vpdpwssd: acc + (a.w0*b.w0 + a.w1*b.w1) per int32 lane, wrapping; vpmaddwd
  // gives the bracket (wrapping likewise), then the add.
  static I dpwssd(I acc, I a, I b) {
    return {_mm256_add_epi32(acc.lo, _mm256_madd_epi16(a.lo, b.lo)), _mm256_add_epi32(acc.hi, _mm256_madd_epi16(a.hi, b.hi))};
  }
  static F cvt(I v) { return {_mm256_cvtepi32_ps(v.lo), _mm256_cvtepi32_ps(v.hi)}; }
  static F mul(F a, F b) { return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)}; }
  static F add(F a, F b) { return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)}; }
  static __m256 lo8(F v) { return v.lo; }
  static __m256 hi8(F v) { return v.hi; }
  static F loadu_f(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
  static void storeu_f(float* p, F v) {
    _mm256_storeu_ps(p, v.lo);
    _mm256_storeu_ps(p + 8, v.hi);
  }
  static F fnmadd(F a, F b, F c) { return {_mm256_fnmadd_ps(a.lo, b.lo, c.lo), _mm256_fnmadd_ps(a.hi, b.hi, c.hi)}; }
  static F set2_f(float x, float y) { return {_mm256_set1_ps(x), _mm256_set1_ps(y)}; }
  static I bcast256_i(const void* p) { return dup256_i(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static I load2x256_i(const void* p, const void* q) {
    return {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q))};
  }
  static I join256_i(__m256i lo, __m256i hi) { return {lo, hi}; }
  static I dup256_i(__m256i v) { return {v, v}; }
  static I and_i(I a, I b) { return {_mm256_and_si256(a.lo, b.lo), _mm256_and_si256(a.hi, b.hi)}; }
  static I srli4_16(I v) { return {_mm256_srli_epi16(v.lo, 4), _mm256_srli_epi16(v.hi, 4)}; }
  static I or_i(I a, I b) { return {_mm256_or_si256(a.lo, b.lo), _mm256_or_si256(a.hi, b.hi)}; }
  static I shuffle8(I a, I b) { return {_mm256_shuffle_epi8(a.lo, b.lo), _mm256_shuffle_epi8(a.hi, b.hi)}; }
  static I maddubs(I a, I b) { return {_mm256_maddubs_epi16(a.lo, b.lo), _mm256_maddubs_epi16(a.hi, b.hi)}; }
  static I madd(I a, I b) { return {_mm256_madd_epi16(a.lo, b.lo), _mm256_madd_epi16(a.hi, b.hi)}; }
  static I add32(I a, I b) { return {_mm256_add_epi32(a.lo, b.lo), _mm256_add_epi32(a.hi, b.hi)}; }
  static F load_h2(const uint16_t* lo, const uint16_t* hi) { return {cvt_h8(lo), cvt_h8(hi)}; }
  static F load_h16(const uint16_t* p) { return {cvt_h8(p), cvt_h8(p + 8)}; }
  static __m256 cvt_h8(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  template <class L>
  static F load_w2(const uint8_t* p, const uint8_t* q, int64_t i) { return {L::load8(p, i), L::load8(q, i)}; }
  static F bcast8(const float* x) { return {_mm256_loadu_ps(x), _mm256_loadu_ps(x)}; }
  static F fmadd(F a, F b, F c) { return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)}; }
};

}  // namespace
}  // namespace pc::kern
