// V512: the 16-lane operations of the AVX-512 kernels (matmul_avx512_impl.h,
// paged_attention_avx512_impl.h; the list is there) on AVX-512 F/BW/DQ/VL
// instructions. Include only inside the AVX-512 target region of
// kernels_avx512.cc.
#pragma once

#include "kernels/fixed_exp.h"

namespace pc::kern {
namespace {

struct V512 {
  using I = __m512i;
  using F = __m512;
  static I zero_i() { return _mm512_setzero_si512(); }
  static F zero_f() { return _mm512_setzero_ps(); }
  static I load_i2(const __m256i* lo, const __m256i* hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(lo)), _mm256_loadu_si256(hi), 1);
  }
  static F load_f2(const float* lo, const float* hi) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(lo)), _mm256_loadu_ps(hi), 1);
  }
  static I set1_i(int32_t v) { return _mm512_set1_epi32(v); }
  static F set1_f(float v) { return _mm512_set1_ps(v); }
  static I dpwssd(I acc, I a, I b) { return _mm512_dpwssd_epi32(acc, a, b); }
  static F cvt(I v) { return _mm512_cvtepi32_ps(v); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static __m256 lo8(F v) { return _mm512_castps512_ps256(v); }
  static __m256 hi8(F v) { return _mm512_extractf32x8_ps(v, 1); }
  static F join_f(__m256 lo, __m256 hi) { return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1); }
  static F loadu_f(const float* p) { return _mm512_loadu_ps(p); }
  static void storeu_f(float* p, F v) { _mm512_storeu_ps(p, v); }
  // 8 F16 values from lo (lanes 0-7) and 8 from hi (8-15) / 16 from p, as floats
  static F load_h2(const uint16_t* lo, const uint16_t* hi) {
    return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(lo))),
                                                   _mm_loadu_si128(reinterpret_cast<const __m128i*>(hi)), 1));
  }
  static I bcast256_i(const void* p) { return _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static I load2x256_i(const void* p, const void* q) {
    return join256_i(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q)));
  }
  static I join256_i(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }
  static I dup256_i(__m256i v) { return _mm512_broadcast_i64x4(v); }
  static I and_i(I a, I b) { return _mm512_and_si512(a, b); }
  static I xor_i(I a, I b) { return _mm512_xor_si512(a, b); }
  static void storeu_i(void* p, I v) { _mm512_storeu_si512(p, v); }
  // lanes 0-7: a's adjacent pairs summed (a0 + a1, ..., a14 + a15); 8-15: b's
  static I pairsum(I a, I b) {
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    return _mm512_add_epi32(_mm512_permutex2var_epi32(a, even, b), _mm512_permutex2var_epi32(a, odd, b));
  }
  static I srli4_16(I v) { return _mm512_srli_epi16(v, 4); }
  static I or_i(I a, I b) { return _mm512_or_si512(a, b); }
  static I add32(I a, I b) { return _mm512_add_epi32(a, b); }
  static I dpbusd(I acc, I u8, I s8) { return _mm512_dpbusd_epi32(acc, u8, s8); }
  template <int S>
  static I slli16(I v) { return _mm512_slli_epi16(v, S); }
  template <int S>
  static I srli16(I v) { return _mm512_srli_epi16(v, S); }
  static I sub32(I a, I b) { return _mm512_sub_epi32(a, b); }
  static I slli32_5(I v) { return _mm512_slli_epi32(v, 5); }
  template <int S>
  static I slli32(I v) { return _mm512_slli_epi32(v, S); }
  static I words_zx(I table, I idx) { return _mm512_maskz_permutexvar_epi16(0x55555555u, idx, table); }
  static I load_i16x32(const int16_t* p) { return _mm512_loadu_si512(p); }
  static I loadu_i(const void* p) { return _mm512_loadu_si512(p); }
  static __m256i lo8_i(I v) { return _mm512_castsi512_si256(v); }
  static __m256i hi8_i(I v) { return _mm512_extracti64x4_epi64(v, 1); }
  static I shifts2(int s0, int s1) { return join256_i(_mm256_set1_epi16(int16_t(s0)), _mm256_set1_epi16(int16_t(s1))); }
  static I sll16_2(I v, int s0, int s1) { return _mm512_sllv_epi16(v, shifts2(s0, s1)); }
  static I srl16_2(I v, int s0, int s1) { return _mm512_srlv_epi16(v, shifts2(s0, s1)); }
  static F load_h16(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  template <class L>
  static F load_w2(const uint8_t* p, const uint8_t* q, int64_t i) {
    if constexpr (L::kType == GgmlType::F32) {
      return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(reinterpret_cast<const float*>(p) + i)),
                                _mm256_loadu_ps(reinterpret_cast<const float*>(q) + i), 1);
    } else {
      const __m256i h = _mm256_inserti128_si256(
          _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i))),
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 2 * i)), 1);
      if constexpr (L::kType == GgmlType::F16) return _mm512_cvtph_ps(h);
      else return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));  // BF16
    }
  }
  static F bcast8(const float* x) { return _mm512_broadcast_f32x8(_mm256_loadu_ps(x)); }
  // 16 int8 values widened to F32 (exact).
  static F cvt_i8(__m128i v) { return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(v)); }
  static F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F max_f(F a, F b) { return _mm512_max_ps(a, b); }
  static F set2_f(float lo, float hi) { return _mm512_insertf32x8(_mm512_set1_ps(lo), _mm256_set1_ps(hi), 1); }
  // Lanes where a > b (ordered) from x, the others from y.
  static F select_gt(F a, F b, F x, F y) { return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_GT_OQ), y, x); }
  // fixed_exp() per lane: fixed_exp8's operations (fixed_exp.h) on 16 lanes.
  static F fixed_exp(F x) {
    const __mmask16 ok = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.f), _CMP_GE_OQ);
    const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    const F xc = _mm512_min_ps(x, _mm512_set1_ps(88.f));
    const F n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    F r = _mm512_fmadd_ps(n, _mm512_set1_ps(-kLn2Hi), xc);
    r = _mm512_fmadd_ps(n, _mm512_set1_ps(kLn2LoNeg), r);
    const F r2 = _mm512_mul_ps(r, r), r4 = _mm512_mul_ps(r2, r2);
    const F p01 = _mm512_fmadd_ps(_mm512_set1_ps(kExpC[1]), r, _mm512_set1_ps(kExpC[0]));
    const F p23 = _mm512_fmadd_ps(_mm512_set1_ps(kExpC[3]), r, _mm512_set1_ps(kExpC[2]));
    const F p45 = _mm512_fmadd_ps(_mm512_set1_ps(kExpC[5]), r, _mm512_set1_ps(kExpC[4]));
    const F p67 = _mm512_fmadd_ps(_mm512_set1_ps(kExpC[7]), r, _mm512_set1_ps(kExpC[6]));
    const F p = _mm512_fmadd_ps(_mm512_fmadd_ps(p67, r2, p45), r4, _mm512_fmadd_ps(p23, r2, p01));
    const I e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    const F y = _mm512_maskz_mov_ps(ok, _mm512_mul_ps(p, _mm512_castsi512_ps(e)));
    return _mm512_mask_blend_ps(nan, y, x);
  }
  // Two 8×8 transposes, one a half: out[j] lane i = in[i] lane j and lane
  // 8 + i = in[i] lane 8 + j (i, j < 8).
  static void transpose8x2(const F in[8], F out[8]) {
    F t[8], u[8];
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      t[2 * i] = _mm512_unpacklo_ps(in[2 * i], in[2 * i + 1]);
      t[2 * i + 1] = _mm512_unpackhi_ps(in[2 * i], in[2 * i + 1]);
    }
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const F* th = t + 4 * h;
      u[4 * h + 0] = _mm512_shuffle_ps(th[0], th[2], _MM_SHUFFLE(1, 0, 1, 0));
      u[4 * h + 1] = _mm512_shuffle_ps(th[0], th[2], _MM_SHUFFLE(3, 2, 3, 2));
      u[4 * h + 2] = _mm512_shuffle_ps(th[1], th[3], _MM_SHUFFLE(1, 0, 1, 0));
      u[4 * h + 3] = _mm512_shuffle_ps(th[1], th[3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    // the low / high 128 bits of each half of a and b: vperm2f128 0x20 / 0x31 a half
    const I lo = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
    const I hi = _mm512_setr_epi32(4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
      out[p] = _mm512_permutex2var_ps(u[p], lo, u[4 + p]);
      out[p + 4] = _mm512_permutex2var_ps(u[p], hi, u[4 + p]);
    }
  }
  // The X16 kernels' operations (matmul_avx512_impl.h "Q4_K_X16", "Q6_K_X16").
  static constexpr int kKxRows = 8;  // rows an X16 tile: 8 sums + 8 products + 8 accumulators
  static constexpr bool kHalfTiles = false;  // see V512Emu
  static constexpr bool kFewRegs = false;  // 32 vector registers
  static I bcast32_i(const void* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
  }
  // acc + per lane the 4 products u8 · (the 4 int8 bytes at x), the bytes
  // read as vpdpbusd's {1to16} broadcast memory operand: one instruction
  // where GCC 12 makes dpbusd(acc, u8, bcast32_i(x)) two (it does not fold
  // _mm512_set1_epi32 into vpdpbusd; it loads with a vpbroadcastd first).
  // The prompt tiles issue one such pair per 64 products, and with their
  // scale and pointer work they are bound by instructions, not by the
  // multiply pipes. The same integer as dpbusd(acc, u8, bcast32_i(x)).
  // The K-quants' steps_scaled keeps the separate broadcast: in this form
  // Q4_K and Q6_K prompt matmuls ran 0.90x and 0.98x as fast as with it
  // (in-process series, Zen 5), Q5_K and Q6_K decode 0.95-0.98x.
  static I dpbusd_at(I acc, I u8, const int8_t* x) {
    using Bytes4 = int32_t __attribute__((may_alias));
    __asm__("vpdpbusd %[x]%{1to16%}, %[u], %[acc]"
            : [acc] "+v"(acc)
            : [u] "v"(u8), [x] "m"(*reinterpret_cast<const Bytes4*>(x)));
    return acc;
  }
  static I zx8_32(const void* p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128(static_cast<const __m128i*>(p))); }
  template <int S>
  static I srli32(I v) { return _mm512_srli_epi32(v, S); }
  static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  // The X16 kernels' steps (matmul_avx512_impl.h): isum + sc · (the sum over
  // steps tt < N of the 4 products q[tt] · x[4tt .. 4tt + 3] of each lane),
  // q codes 0..kMax, sc the lane's scale as scale_for<N, kMax> leaves it.
  // The N · 4 products' sum, when it fits an int16 word, is multiplied by
  // the scale in the low word (vpdpwssd: the scale must be 0..2^15, the high
  // word 0); otherwise by vpmulld.
  template <int N, int kMax>
  static I scale_for(I sc) { return sc; }
  template <int N, int kMax>
  static I steps_scaled(I isum, const I* q, const int8_t* x, I sc) {
    I s = _mm512_dpbusd_epi32(zero_i(), q[0], bcast32_i(x));
#pragma GCC unroll 16
    for (int tt = 1; tt < N; ++tt) s = _mm512_dpbusd_epi32(s, q[tt], bcast32_i(x + 4 * tt));
    if constexpr (N * 4 * kMax * 128 < 32768) return _mm512_dpwssd_epi32(isum, s, sc);
    else return _mm512_add_epi32(isum, _mm512_mullo_epi32(s, sc));
  }
  // 16 int8 sign-extended to the lanes (Q6_K_X16's scales); int32 product.
  static I sx8_32(const void* p) { return _mm512_cvtepi8_epi32(_mm_loadu_si128(static_cast<const __m128i*>(p))); }
  static I mullo32(I a, I b) { return _mm512_mullo_epi32(a, b); }
  static I dpbusd_u7(I acc, I u7, I s8) { return _mm512_dpbusd_epi32(acc, u7, s8); }
  static I dpbusd_u7_at(I acc, I u7, const int8_t* x) { return dpbusd_at(acc, u7, x); }
  // acc + per lane a.w0 · x0 + a.w1 · x1, x0 and x1 the int16 pair at x
  // (vpdpwssd with a {1to16} broadcast operand, as dpbusd_at).
  static I dpwssd_at(I acc, I a, const int16_t* x) {
    using Pair = int32_t __attribute__((may_alias));
    __asm__("vpdpwssd %[x]%{1to16%}, %[a], %[acc]"
            : [acc] "+v"(acc)
            : [a] "v"(a), [x] "m"(*reinterpret_cast<const Pair*>(x)));
    return acc;
  }
  // Plain sums of N steps (Q4_0_X16 / Q5_0_X16 codes 0..kMax < 128): isum +
  // the 4 products q[tt] · x[4tt .. 4tt + 3] of each lane for each tt < N.
  template <int N, int kMax>
  static I steps_sum(I isum, const I* q, const int8_t* x) {
#pragma GCC unroll 16
    for (int tt = 0; tt < N; ++tt) isum = dpbusd_at(isum, q[tt], x + 4 * tt);
    return isum;
  }
  // Q8_0_X16's codes (value + 128, unsigned): q8x_prep once per weight
  // vector, then q8x_dot adds to each lane the 4 products of its codes with
  // the 4 activation bytes at x broadcast. kQ8xBiased: those sums include
  // 128 · (the 4 bytes' sum), which the kernel takes off per block.
  static constexpr bool kQ8xBiased = true;
  static I q8x_prep(I w) { return w; }
  static I q8x_dot(I acc, I w, const int8_t* x) { return dpbusd_at(acc, w, x); }
  // The table codes (IQ4_NL_X16, MXFP4_X16, IQ4_XS_X16): 16 bytes in every
  // 128-bit lane; byte i of lut16 = table byte idx[i] (idx bytes 0..15, vpshufb).
  static I bcast128_i(const void* p) { return _mm512_broadcast_i32x4(_mm_loadu_si128(static_cast<const __m128i*>(p))); }
  static I lut16(I table, I idx) { return _mm512_shuffle_epi8(table, idx); }
  // 16 uint16 zero-extended to the lanes (IQ4_XS_X16's scales_h).
  static I zx16_32(const void* p) { return _mm512_cvtepu16_epi32(_mm256_loadu_si256(static_cast<const __m256i*>(p))); }
  // 16 E8M0 bytes e as 2^(e - 128) (MXFP4_X16; e8m0_half_to_fp32, exact):
  // 2^(max(e, 2) - 128) from its exponent field, times 1, 1/2 or 1/4 for e = 2+,
  // 1, 0 (the two subnormals, exact products).
  static F e8m0_half16(const uint8_t* p) {
    const I e = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    const I m = _mm512_max_epu32(e, set1_i(2));
    const F base = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_sub_epi32(m, set1_i(1)), 23));
    const F scale = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_sub_epi32(set1_i(127), _mm512_sub_epi32(m, e)), 23));
    return _mm512_mul_ps(base, scale);
  }
};

}  // namespace
}  // namespace pc::kern
