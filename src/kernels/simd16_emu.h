// V512Emu: the 16-lane operations of the AVX-512 kernels as pairs of AVX2
// operations with the same per-lane results (lanes 0-7 in lo, 8-15 in hi),
// so machines without AVX-512 run and test that kernel code. Include only
// inside the AVX2 target region of kernels_avx512_emu.cc or kernels_avxvnni*.cc.
//
// PC_SIMD16_VNNI selects how the int8 products are formed:
//   0  AVX2 alone: vpmaddubsw pairs summed in int16 words where they fit,
//      then vpmaddwd (the AVX2 level's X16 kernels);
//   1  AVX-VNNI (vpdpbusd / vpdpwssd on ymm, Alder Lake and later, Zen 5):
//      the AVX-512 backend's forms (simd16_avx512.h) — a vpdpbusd a step,
//      Q8_0 and the table codes biased by 128 — on 8-lane vectors;
//   2  the forms of 1 with each VNNI instruction computed exactly by AVX2
//      instructions, so machines without AVX-VNNI test that code too.
// Every form gives the same integers, so the same bits.
#pragma once

#ifndef PC_SIMD16_VNNI
#define PC_SIMD16_VNNI 0
#endif
#define PC_EMU_UNROLL _Pragma("GCC unroll 16")

#include "kernels/fixed_exp.h"
#include "kernels/transpose8_avx2.h"

namespace pc::kern {
namespace {

template <int H>
struct V256Half;

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
  static __m256i dpwssd8(__m256i acc, __m256i a, __m256i b) {
#if PC_SIMD16_VNNI == 1
    return _mm256_dpwssd_avx_epi32(acc, a, b);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
#endif
  }
  static I dpwssd(I acc, I a, I b) { return {dpwssd8(acc.lo, a.lo, b.lo), dpwssd8(acc.hi, a.hi, b.hi)}; }
  static F cvt(I v) { return {_mm256_cvtepi32_ps(v.lo), _mm256_cvtepi32_ps(v.hi)}; }
  static F mul(F a, F b) { return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)}; }
  static F add(F a, F b) { return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)}; }
  static __m256 lo8(F v) { return v.lo; }
  static __m256 hi8(F v) { return v.hi; }
  static F join_f(__m256 lo, __m256 hi) { return {lo, hi}; }
  static F loadu_f(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
  static void storeu_f(float* p, F v) {
    _mm256_storeu_ps(p, v.lo);
    _mm256_storeu_ps(p + 8, v.hi);
  }
  static I bcast256_i(const void* p) { return dup256_i(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static I load2x256_i(const void* p, const void* q) {
    return {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q))};
  }
  static I join256_i(__m256i lo, __m256i hi) { return {lo, hi}; }
  static I dup256_i(__m256i v) { return {v, v}; }
  static I and_i(I a, I b) { return {_mm256_and_si256(a.lo, b.lo), _mm256_and_si256(a.hi, b.hi)}; }
  static I xor_i(I a, I b) { return {_mm256_xor_si256(a.lo, b.lo), _mm256_xor_si256(a.hi, b.hi)}; }
  static void storeu_i(void* p, I v) {
    _mm256_storeu_si256(static_cast<__m256i*>(p), v.lo);
    _mm256_storeu_si256(static_cast<__m256i*>(p) + 1, v.hi);
  }
  // lanes 0-7: a's adjacent pairs summed, 8-15: b's (vphaddd pairs within
  // 128-bit lanes; the qword permute puts them in lane order)
  static __m256i pairsum8(__m256i lo, __m256i hi) {
    return _mm256_permute4x64_epi64(_mm256_hadd_epi32(lo, hi), 0xD8);
  }
  static I pairsum(I a, I b) { return {pairsum8(a.lo, a.hi), pairsum8(b.lo, b.hi)}; }
  static I srli4_16(I v) { return {_mm256_srli_epi16(v.lo, 4), _mm256_srli_epi16(v.hi, 4)}; }
  static I or_i(I a, I b) { return {_mm256_or_si256(a.lo, b.lo), _mm256_or_si256(a.hi, b.hi)}; }
  static I add32(I a, I b) { return {_mm256_add_epi32(a.lo, b.lo), _mm256_add_epi32(a.hi, b.hi)}; }
  // vpdpbusd: acc + the sum of the 4 products u8 * s8 of each int32 lane,
  // exactly (no saturation): even and odd bytes widened to int16, then vpmaddwd.
  static __m256i dpbusd8(__m256i acc, __m256i u, __m256i s) {
#if PC_SIMD16_VNNI == 1
    return _mm256_dpbusd_avx_epi32(acc, u, s);
#else
    const __m256i ue = _mm256_and_si256(u, _mm256_set1_epi16(0x00FF)), uo = _mm256_srli_epi16(u, 8);
    const __m256i se = _mm256_srai_epi16(_mm256_slli_epi16(s, 8), 8), so = _mm256_srai_epi16(s, 8);
    return _mm256_add_epi32(acc, _mm256_add_epi32(_mm256_madd_epi16(ue, se), _mm256_madd_epi16(uo, so)));
#endif
  }
  static I dpbusd(I acc, I u8, I s8) { return {dpbusd8(acc.lo, u8.lo, s8.lo), dpbusd8(acc.hi, u8.hi, s8.hi)}; }
  // The X16 kernels' operations (matmul_avx512_impl.h "Q4_K_X16",
  // "Q6_K_X16"); this backend is also the AVX2 path's kernel for those layouts.
  static constexpr bool kVnni = PC_SIMD16_VNNI != 0;
  static constexpr int kKxRows = 2;  // 2 ymm registers a vector, 16 in all (decode, the 32-value types)
  static constexpr bool kFewRegs = true;
  // The X16 prompt tiles run a group's two halves of 8 lanes apart
  // (V256Half<0>, V256Half<1>: one ymm a vector), 6 rows a tile for the
  // K-quants and IQ4_XS, 4 for the 32-value types.
  static constexpr bool kHalfTiles = true;
  template <int H>
  using Half = V256Half<H>;
  // vpdpbusd for u7 < 128: vpmaddubsw cannot saturate (2 · 127 · 128 < 2^15),
  // so maddubs + madd by 1 is exact.
  static __m256i dpbusd_u7_8(__m256i acc, __m256i u7, __m256i s8) {
    if constexpr (kVnni) return dpbusd8(acc, u7, s8);
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u7, s8), _mm256_set1_epi16(1)));
  }
  static I dpbusd_u7(I acc, I u7, I s8) { return {dpbusd_u7_8(acc.lo, u7.lo, s8.lo), dpbusd_u7_8(acc.hi, u7.hi, s8.hi)}; }
  static I dpbusd_u7_at(I acc, I u7, const int8_t* x) { return dpbusd_u7(acc, u7, bcast32_i(x)); }
  static I dpwssd_at(I acc, I a, const int16_t* x) { return dpwssd(acc, a, bcast32_i(x)); }
  static I mullo32(I a, I b) { return {_mm256_mullo_epi32(a.lo, b.lo), _mm256_mullo_epi32(a.hi, b.hi)}; }
#if PC_SIMD16_VNNI == 0
  // Decode's one-row Q4_K_X16 and Q5_K_X16 tiles on AVX2 alone (k45x_tile16
  // takes these where V has kK45RowBlock): the isum and msum of one block and
  // activation row, the same integers as q4kx_half / q5kx_pairs and the
  // tile's mins, in fewer instructions:
  //   - each 32-byte load of qs serves two code vectors, its low nibbles
  //     (sub-block j) and its high ones (sub-block j + 4);
  //   - steps add up in int16 words while they fit (Q4_K: a sub-block's 8,
  //     8 · 2 · 15 · 128 < 2^15; Q5_K: 4, 4 · 2 · 31 · 128 < 2^15), then one
  //     vpmaddwd by the scale, which vpshufb puts in both words of each lane
  //     straight from the 16 scm bytes;
  //   - the mins' 6-bit values are formed on the 16 bytes of a sub-block
  //     pair and widened to the (mn_2q, mn_2q+1) word pairs once;
  //   - every shift count is a constant and the prefetches are whole lines
  //     at constant offsets.
  // The generic forms spent ~1,400 (Q4_K) and ~1,900 (Q5_K) instructions a
  // block, a third of them scalar address work of the prefetches and the
  // scales' widening; these ~830 and ~1,300. On a Zen 3, one thread decoding
  // the tinyllama matmuls streamed 1.22x (Q4_K) and 1.15x (Q5_K) as fast,
  // Q4_K at 97 % of that thread's read bandwidth; two threads, already at the
  // rate two threads read weights a matmul at a time, the same.
  // (Without their prefetches: 0.87x on one thread, 0.95x on two.)
  static constexpr bool kK45RowBlock = true;
  // dword lane c of the result: byte c (lo: lanes 0-7) or c + 8 (hi) of
  // the 16 in `b` (broadcast to both halves), in both int16 words
  static __m256i words_of_byte(__m256i b, bool hi) {
    const __m256i lo = _mm256_setr_epi8(0, -1, 0, -1, 1, -1, 1, -1, 2, -1, 2, -1, 3, -1, 3, -1, 4, -1, 4, -1, 5, -1,
                                        5, -1, 6, -1, 6, -1, 7, -1, 7, -1);
    return _mm256_shuffle_epi8(b, hi ? _mm256_add_epi8(lo, _mm256_set1_epi16(8)) : lo);
  }
  // scm[s]'s 6-bit scales, 16 bytes broadcast to both halves
  static __m256i scales16(const uint8_t* scm) {
    return _mm256_and_si256(_mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scm))),
                            _mm256_set1_epi8(0x3F));
  }
  // msum of one block and row: mn_s has the low 4 bits from a nibble of
  // mnl[s / 2] and the top 2 from scm[s]'s (word shifts: the mask keeps each
  // byte's own bits 6-7, moved to 4-5)
  template <class B>
  static I k45_row_msum(const B& blk, const int16_t* bs32) {
    const __m128i n15 = _mm_set1_epi8(0x0F), n48 = _mm_set1_epi8(0x30);
    __m256i m_lo = _mm256_setzero_si256(), m_hi = m_lo;
    PC_EMU_UNROLL for (int q = 0; q < 4; ++q) {
      const __m128i n = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.mnl[q]));
      const __m128i t0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scm[2 * q]));
      const __m128i t1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scm[2 * q + 1]));
      const __m128i m0 = _mm_or_si128(_mm_and_si128(n, n15), _mm_and_si128(_mm_srli_epi16(t0, 2), n48));
      const __m128i m1 =
          _mm_or_si128(_mm_and_si128(_mm_srli_epi16(n, 4), n15), _mm_and_si128(_mm_srli_epi16(t1, 2), n48));
      const __m256i sums = bcast32_i(bs32 + 2 * q).lo;  // the pair's activation sums of 32
      m_lo = _mm256_add_epi32(m_lo, _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m0, m1)), sums));
      m_hi = _mm256_add_epi32(m_hi, _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_unpackhi_epi8(m0, m1)), sums));
    }
    return {m_lo, m_hi};
  }
  // s += the int16 sums of sub-blocks j (a: lanes 0-7 in a0, 8-15 in a1)
  // and j + 4 (b) times their scales (c, e: scales16's bytes)
  static void add_scaled(__m256i& s_lo, __m256i& s_hi, __m256i a0, __m256i a1, __m256i b0, __m256i b1, __m256i c,
                         __m256i e) {
    s_lo = _mm256_add_epi32(s_lo, _mm256_add_epi32(_mm256_madd_epi16(a0, words_of_byte(c, false)),
                                                   _mm256_madd_epi16(b0, words_of_byte(e, false))));
    s_hi = _mm256_add_epi32(s_hi, _mm256_add_epi32(_mm256_madd_epi16(a1, words_of_byte(c, true)),
                                                   _mm256_madd_epi16(b1, words_of_byte(e, true))));
    asm("" : "+x"(s_lo), "+x"(s_hi));  // keeps GCC from holding the products to the end
  }
  static void k45x_row_block(const BlockQ4_KX16& blk, const int8_t* x, const int16_t* bs32, I& isum, I& msum) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256i s_lo = _mm256_setzero_si256(), s_hi = _mm256_setzero_si256();
    PC_EMU_UNROLL for (int j = 0; j < 4; ++j) {
      __m256i a0 = _mm256_setzero_si256(), a1 = a0, b0 = a0, b1 = a0;
      PC_EMU_UNROLL for (int u = 0; u < 8; ++u) {
        if (u % 4 == 0) prefetch_part<sizeof blk, 8>(&blk, 2 * j + u / 4);
        const int t = 8 * j + u;  // values 4t .. 4t + 3 (low nibbles), 128 + 4t .. (high)
        const __m256i p0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs[t]));
        const __m256i p1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs[t] + 32));
        const __m256i xa = bcast32_i(x + 4 * t).lo, xb = bcast32_i(x + 128 + 4 * t).lo;
        a0 = _mm256_add_epi16(a0, _mm256_maddubs_epi16(_mm256_and_si256(p0, m4), xa));
        a1 = _mm256_add_epi16(a1, _mm256_maddubs_epi16(_mm256_and_si256(p1, m4), xa));
        b0 = _mm256_add_epi16(b0, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(p0, 4), m4), xb));
        b1 = _mm256_add_epi16(b1, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(p1, 4), m4), xb));
        // each step's sums in registers: without this GCC formed all 32
        // products of the sub-block pair first and spilled them
        asm("" : "+x"(a0), "+x"(a1), "+x"(b0), "+x"(b1));
      }
      add_scaled(s_lo, s_hi, a0, a1, b0, b1, scales16(blk.scm[j]), scales16(blk.scm[j + 4]));
    }
    isum = {s_lo, s_hi};
    msum = k45_row_msum(blk, bs32);
  }
  // Q5_K_X16: the codes as q5kx_pairs forms them (bit j of qh[u] moved to
  // bit 4 of sub-block j's code, bit j + 4 to sub-block j + 4's), a pair's
  // two halves of 4 steps each summed in int16 words. Prefetched 12 KiB
  // ahead, as the AVX-512 tile: on a Zen 3 the tinyllama decode matmuls on
  // two threads streamed 1.04-1.10x as fast as with 8 KiB (medians of 10-12
  // alternating rounds, three runs; Q4_K_X16 gained nothing from it).
  static void k45x_row_block(const BlockQ5_KX16& blk, const int8_t* x, const int16_t* bs32, I& isum, I& msum) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m10 = _mm256_set1_epi8(0x10);
    __m256i s_lo = _mm256_setzero_si256(), s_hi = _mm256_setzero_si256();
    PC_EMU_UNROLL for (int j = 0; j < 4; ++j) {
      const __m256i c = scales16(blk.scm[j]), e = scales16(blk.scm[j + 4]);
      PC_EMU_UNROLL for (int hh = 0; hh < 2; ++hh) {
        __m256i a0 = _mm256_setzero_si256(), a1 = a0, b0 = a0, b1 = a0;
        PC_EMU_UNROLL for (int uu = 0; uu < 4; ++uu) {
          const int u = 4 * hh + uu, t = 8 * j + u;
          if (uu % 2 == 0) prefetch_part<sizeof blk, 16, kQ5kxPrefetchAhead>(&blk, 4 * j + u / 2);
          const __m256i p0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs[t]));
          const __m256i p1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs[t] + 32));
          const __m256i h0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh[u]));
          const __m256i h1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh[u] + 32));
          const __m256i xa = bcast32_i(x + 4 * t).lo, xb = bcast32_i(x + 128 + 4 * t).lo;
          const auto code_a = [&](__m256i p, __m256i h) {
            return _mm256_or_si256(_mm256_and_si256(p, m4), _mm256_and_si256(_mm256_slli_epi16(h, 4 - j), m10));
          };
          const auto code_b = [&](__m256i p, __m256i h) {
            return _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(p, 4), m4),
                                   _mm256_and_si256(_mm256_srli_epi16(h, j), m10));
          };
          a0 = _mm256_add_epi16(a0, _mm256_maddubs_epi16(code_a(p0, h0), xa));
          a1 = _mm256_add_epi16(a1, _mm256_maddubs_epi16(code_a(p1, h1), xa));
          b0 = _mm256_add_epi16(b0, _mm256_maddubs_epi16(code_b(p0, h0), xb));
          b1 = _mm256_add_epi16(b1, _mm256_maddubs_epi16(code_b(p1, h1), xb));
          asm("" : "+x"(a0), "+x"(a1), "+x"(b0), "+x"(b1));
        }
        add_scaled(s_lo, s_hi, a0, a1, b0, b1, c, e);
      }
    }
    isum = {s_lo, s_hi};
    msum = k45_row_msum(blk, bs32);
  }
#endif
  // steps_sum (simd16_avx512.h): steps_scaled with a scale of 1 in both words.
  // With VNNI, the N steps' vpdpbusd added to isum (the AVX-512 form).
  template <int N>
  static __m256i dpbusd_chain8(__m256i isum, const __m256i* q, const int8_t* x) {
    PC_EMU_UNROLL for (int tt = 0; tt < N; ++tt) {
      int32_t v;
      std::memcpy(&v, x + 4 * tt, 4);
      isum = dpbusd8(isum, q[tt], _mm256_set1_epi32(v));
    }
    return isum;
  }
  template <int N, int kMax>
  static __m256i steps_sum8(__m256i isum, const __m256i* q, const int8_t* x) {
    if constexpr (kVnni) return dpbusd_chain8<N>(isum, q, x);
    return steps8<N, kMax>(isum, q, x, _mm256_set1_epi32(0x00010001));
  }
  template <int N, int kMax>
  static I steps_sum(I isum, const I* q, const int8_t* x) {
    if constexpr (kVnni) {
      PC_EMU_UNROLL for (int tt = 0; tt < N; ++tt) isum = dpbusd(isum, q[tt], bcast32_i(x + 4 * tt));
      return isum;
    } else {
      return steps_scaled<N, kMax>(isum, q, x, set1_i(0x00010001));
    }
  }
  // Q8_0_X16 (simd16_avx512.h): without VNNI q8x_prep flips the codes back to
  // the signed values, q8x_dot adds the exact products without the bias
  // (vpmaddubsw of |w| with x carrying w's sign: at most 2 · 128 · 127 < 2^15
  // a word, so no saturation; then vpmaddwd by 1); with VNNI the codes stay
  // biased and q8x_dot is one vpdpbusd, as on AVX-512.
  static constexpr bool kQ8xBiased = kVnni;
  static __m256i q8x_prep8(__m256i w) {
    if constexpr (kVnni) return w;
    return _mm256_xor_si256(w, _mm256_set1_epi32(int32_t(0x80808080u)));
  }
  static I q8x_prep(I w) { return {q8x_prep8(w.lo), q8x_prep8(w.hi)}; }
  static __m256i q8x_dot8(__m256i acc, __m256i w, __m256i x) {
    if constexpr (kVnni) return dpbusd8(acc, w, x);
    const __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
  }
  static I q8x_dot(I acc, I w, const int8_t* x) {
    const I b = bcast32_i(x);
    return {q8x_dot8(acc.lo, w.lo, b.lo), q8x_dot8(acc.hi, w.hi, b.hi)};
  }
  // The table codes (simd16_avx512.h): vpshufb on each half.
  static I bcast128_i(const void* p) {
    const __m256i t = _mm256_broadcastsi128_si256(_mm_loadu_si128(static_cast<const __m128i*>(p)));
    return {t, t};
  }
  static I lut16(I table, I idx) { return {_mm256_shuffle_epi8(table.lo, idx.lo), _mm256_shuffle_epi8(table.hi, idx.hi)}; }
  static I zx16_32(const void* p) {
    const __m256i v = _mm256_loadu_si256(static_cast<const __m256i*>(p));
    return {_mm256_cvtepu16_epi32(_mm256_castsi256_si128(v)), _mm256_cvtepu16_epi32(_mm256_extracti128_si256(v, 1))};
  }
  static __m256 e8m0_half8(__m256i e) {
    const __m256i m = _mm256_max_epu32(e, _mm256_set1_epi32(2));
    const __m256 base = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_sub_epi32(m, _mm256_set1_epi32(1)), 23));
    const __m256 scale = _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_sub_epi32(_mm256_set1_epi32(127), _mm256_sub_epi32(m, e)), 23));
    return _mm256_mul_ps(base, scale);
  }
  static F e8m0_half16(const uint8_t* p) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return {e8m0_half8(_mm256_cvtepu8_epi32(v)), e8m0_half8(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(v, v)))};
  }
  static I bcast32_i(const void* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    const __m256i b = _mm256_set1_epi32(v);
    return {b, b};
  }
  static I zx8_32(const void* p) {
    const __m128i v = _mm_loadu_si128(static_cast<const __m128i*>(p));
    return {_mm256_cvtepu8_epi32(v), _mm256_cvtepu8_epi32(_mm_unpackhi_epi64(v, v))};
  }
  template <int S>
  static I srli32(I v) { return {_mm256_srli_epi32(v.lo, S), _mm256_srli_epi32(v.hi, S)}; }
  static F sub(F a, F b) { return {_mm256_sub_ps(a.lo, b.lo), _mm256_sub_ps(a.hi, b.hi)}; }
  // steps_scaled (simd16_avx512.h) in AVX2's terms: each vpmaddubsw word is 2
  // products of at most 2 · kMax · 127, so runs of G steps add up in int16
  // words (G · 2 · kMax · 127 < 2^15: 8 steps for Q4_K's codes, 4 for Q5_K's,
  // 2 for Q6_K's), each run then multiplied by the scale, which scale_for
  // puts in both words of the lane, with one vpmaddwd: the same integer.
  //
  // With VNNI, the AVX-512 backend's form: the N steps' vpdpbusd in an int32
  // chain, then, where the N · 4 products fit an int16 word, one vpdpwssd by
  // the scale in the low word (scale_for leaves it so), else vpmulld.
  template <int N, int kMax>
  static __m256i scale_for8(__m256i sc) {
    if constexpr (kVnni) return sc;
    return _mm256_or_si256(_mm256_and_si256(sc, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(sc, 16));
  }
  template <int N, int kMax>
  static I scale_for(I sc) { return {scale_for8<N, kMax>(sc.lo), scale_for8<N, kMax>(sc.hi)}; }
  template <int N, int kMax>
  static __m256i steps8(__m256i isum, const __m256i* q, const int8_t* x, __m256i sc) {
    if constexpr (kVnni) {
      const __m256i s = dpbusd_chain8<N>(_mm256_setzero_si256(), q, x);
      if constexpr (N * 4 * kMax * 128 < 32768) return dpwssd8(isum, s, sc);
      else return _mm256_add_epi32(isum, _mm256_mullo_epi32(s, sc));
    }
    constexpr int G = 32767 / (2 * kMax * 127);
    static_assert(G >= 1 && kMax < 128, "codes below 128");
    __m256i p = _mm256_setzero_si256();
#pragma GCC unroll 16
    for (int tt = 0; tt < N; ++tt) {
      int32_t v;
      std::memcpy(&v, x + 4 * tt, 4);
      p = _mm256_add_epi16(p, _mm256_maddubs_epi16(q[tt], _mm256_set1_epi32(v)));
      if (tt % G == G - 1 || tt == N - 1) {
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, sc));
        p = _mm256_setzero_si256();
      }
    }
    return isum;
  }
  template <int N, int kMax>
  static I steps_scaled(I isum, const I* q, const int8_t* x, I sc) {
    __m256i lo[N], hi[N];
#pragma GCC unroll 16
    for (int tt = 0; tt < N; ++tt) {
      lo[tt] = q[tt].lo;
      hi[tt] = q[tt].hi;
    }
    return {steps8<N, kMax>(isum.lo, lo, x, sc.lo), steps8<N, kMax>(isum.hi, hi, x, sc.hi)};
  }
  static I sx8_32(const void* p) {
    const __m128i v = _mm_loadu_si128(static_cast<const __m128i*>(p));
    return {_mm256_cvtepi8_epi32(v), _mm256_cvtepi8_epi32(_mm_unpackhi_epi64(v, v))};
  }
  template <int S>
  static I slli16(I v) { return {_mm256_slli_epi16(v.lo, S), _mm256_slli_epi16(v.hi, S)}; }
  template <int S>
  static I srli16(I v) { return {_mm256_srli_epi16(v.lo, S), _mm256_srli_epi16(v.hi, S)}; }
  static I sub32(I a, I b) { return {_mm256_sub_epi32(a.lo, b.lo), _mm256_sub_epi32(a.hi, b.hi)}; }
  static I slli32_5(I v) { return {_mm256_slli_epi32(v.lo, 5), _mm256_slli_epi32(v.hi, 5)}; }
  template <int S>
  static I slli32(I v) { return {_mm256_slli_epi32(v.lo, S), _mm256_slli_epi32(v.hi, S)}; }
  // vpermw with zero masking of the odd words: word 2i of the result is
  // table word idx[2i] (0..31), word 2i + 1 is 0.
  static I words_zx(I table, I idx) {
    alignas(32) int16_t t[32], ix[32], out[32];
    _mm256_store_si256(reinterpret_cast<__m256i*>(t), table.lo);
    _mm256_store_si256(reinterpret_cast<__m256i*>(t + 16), table.hi);
    _mm256_store_si256(reinterpret_cast<__m256i*>(ix), idx.lo);
    _mm256_store_si256(reinterpret_cast<__m256i*>(ix + 16), idx.hi);
    for (int i = 0; i < 32; ++i) out[i] = i % 2 ? int16_t(0) : t[ix[i] & 31];
    return {_mm256_load_si256(reinterpret_cast<const __m256i*>(out)), _mm256_load_si256(reinterpret_cast<const __m256i*>(out + 16))};
  }
  static I loadu_i(const void* p) { return load2x256_i(p, static_cast<const uint8_t*>(p) + 32); }
  static __m256i lo8_i(I v) { return v.lo; }
  static __m256i hi8_i(I v) { return v.hi; }
  static I sll16_2(I v, int s0, int s1) {
    return {_mm256_sll_epi16(v.lo, _mm_cvtsi32_si128(s0)), _mm256_sll_epi16(v.hi, _mm_cvtsi32_si128(s1))};
  }
  static I srl16_2(I v, int s0, int s1) {
    return {_mm256_srl_epi16(v.lo, _mm_cvtsi32_si128(s0)), _mm256_srl_epi16(v.hi, _mm_cvtsi32_si128(s1))};
  }
  static I load_i16x32(const int16_t* p) {
    return {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16))};
  }
  static F load_h2(const uint16_t* lo, const uint16_t* hi) { return {cvt_h8(lo), cvt_h8(hi)}; }
  static F load_h16(const uint16_t* p) { return {cvt_h8(p), cvt_h8(p + 8)}; }
  static __m256 cvt_h8(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  template <class L>
  static F load_w2(const uint8_t* p, const uint8_t* q, int64_t i) { return {L::load8(p, i), L::load8(q, i)}; }
  static F bcast8(const float* x) { return {_mm256_loadu_ps(x), _mm256_loadu_ps(x)}; }
  static F cvt_i8(__m128i v) {
    return {_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)), _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(v, 8)))};
  }
  static F fmadd(F a, F b, F c) { return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)}; }
  static F max_f(F a, F b) { return {_mm256_max_ps(a.lo, b.lo), _mm256_max_ps(a.hi, b.hi)}; }
  static F set2_f(float lo, float hi) { return {_mm256_set1_ps(lo), _mm256_set1_ps(hi)}; }
  static F select_gt(F a, F b, F x, F y) {
    return {_mm256_blendv_ps(y.lo, x.lo, _mm256_cmp_ps(a.lo, b.lo, _CMP_GT_OQ)),
            _mm256_blendv_ps(y.hi, x.hi, _mm256_cmp_ps(a.hi, b.hi, _CMP_GT_OQ))};
  }
  static F fixed_exp(F x) { return {fixed_exp8(x.lo), fixed_exp8(x.hi)}; }
  static void transpose8x2(const F in[8], F out[8]) {
    __m256 lo[8], hi[8], tlo[8], thi[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      lo[i] = in[i].lo;
      hi[i] = in[i].hi;
    }
    transpose8_ps(lo, tlo);
    transpose8_ps(hi, thi);
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) out[j] = {tlo[j], thi[j]};
  }
};

// Lanes 8H .. 8H + 7 of V512Emu's 16, as a backend of their own for the X16
// prompt tiles (k45x_tile16, q6kx_tile16, iq4xs_tile16, q32x_tile16): one ymm a vector, so
// a tile holds 6 rows' sums in AVX2's 16 registers where the 16-lane form
// holds 2, and each code vector unpacked serves three times the rows. Every memory operand of a vector is
// read at its half: a 64-byte vector of 16 lanes' bytes at p + 32H, 16 lanes'
// bytes / F16 values at p + 8H, and the tile's 16 outputs of a row written
// at p + 8H. Each lane's operations are V512Emu's, so the bits are the same.
template <int H>
struct V256Half {
  using I = __m256i;
  using F = __m256;
  static constexpr int kKxRows = 6;
  static constexpr int kQ32Rows = 4;  // 6: Q5_0 prompts 0.87-0.96x as fast (tinyllama, Zen 5)
  static constexpr bool kFewRegs = true;
  // k45x_tile16 takes q5kx_quarters (with VNNI: a vpdpbusd chain and a
  // vpmulld a quarter; against q5kx_pairs' two sums a row, 1.05-1.16x)
  static constexpr bool kQ5Quarters = true;
  static I zero_i() { return _mm256_setzero_si256(); }
  static F zero_f() { return _mm256_setzero_ps(); }
  static I set1_i(int32_t v) { return _mm256_set1_epi32(v); }
  static F set1_f(float v) { return _mm256_set1_ps(v); }
  static I loadu_i(const void* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint8_t*>(p) + 32 * H)); }
  static I zx8_32(const void* p) {
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(static_cast<const uint8_t*>(p) + 8 * H)));
  }
  static F load_h16(const uint16_t* p) { return V512Emu::cvt_h8(p + 8 * H); }
  static void storeu_f(float* p, F v) { _mm256_storeu_ps(p + 8 * H, v); }
  static I bcast32_i(const void* p) { return V512Emu::bcast32_i(p).lo; }
  static I and_i(I a, I b) { return _mm256_and_si256(a, b); }
  static I or_i(I a, I b) { return _mm256_or_si256(a, b); }
  static I srli4_16(I v) { return _mm256_srli_epi16(v, 4); }
  template <int S>
  static I srli32(I v) { return _mm256_srli_epi32(v, S); }
  template <int S>
  static I slli32(I v) { return _mm256_slli_epi32(v, S); }
  static I dpwssd(I acc, I a, I b) { return V512Emu::dpwssd8(acc, a, b); }
  static F cvt(I v) { return _mm256_cvtepi32_ps(v); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  template <int N, int kMax>
  static I scale_for(I sc) { return V512Emu::scale_for8<N, kMax>(sc); }
  template <int N, int kMax>
  static I steps_scaled(I isum, const I* q, const int8_t* x, I sc) { return V512Emu::steps8<N, kMax>(isum, q, x, sc); }
  // Q6_K_X16's and Q5_K_X16's further operations
  static I sx8_32(const void* p) {
    return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(static_cast<const uint8_t*>(p) + 8 * H)));
  }
  template <int S>
  static I slli16(I v) { return _mm256_slli_epi16(v, S); }
  template <int S>
  static I srli16(I v) { return _mm256_srli_epi16(v, S); }
  static I slli32_5(I v) { return _mm256_slli_epi32(v, 5); }
  static I sub32(I a, I b) { return _mm256_sub_epi32(a, b); }
  static I add32(I a, I b) { return _mm256_add_epi32(a, b); }
  static I mullo32(I a, I b) { return _mm256_mullo_epi32(a, b); }
  static I dpbusd_u7(I acc, I u7, I s8) { return V512Emu::dpbusd_u7_8(acc, u7, s8); }
  static I dpbusd_u7_at(I acc, I u7, const int8_t* x) { return dpbusd_u7(acc, u7, bcast32_i(x)); }
  static I dpwssd_at(I acc, I a, const int16_t* x) { return dpwssd(acc, a, bcast32_i(x)); }
  // IQ4_XS_X16's and the 32-value types' (q32x_tile16): the codes as
  // V512Emu reads them (biased by 128 with VNNI)
  static constexpr bool kQ8xBiased = V512Emu::kQ8xBiased;
  static I q8x_prep(I w) { return V512Emu::q8x_prep8(w); }
  template <int N, int kMax>
  static I steps_sum(I isum, const I* q, const int8_t* x) { return V512Emu::steps_sum8<N, kMax>(isum, q, x); }
  static F e8m0_half16(const uint8_t* p) {
    return V512Emu::e8m0_half8(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8 * H))));
  }
  static I bcast128_i(const void* p) { return _mm256_broadcastsi128_si256(_mm_loadu_si128(static_cast<const __m128i*>(p))); }
  static I lut16(I table, I idx) { return _mm256_shuffle_epi8(table, idx); }
  static I q8x_dot(I acc, I w, const int8_t* x) { return V512Emu::q8x_dot8(acc, w, bcast32_i(x)); }
  static I zx16_32(const void* p) {
    return _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint8_t*>(p) + 16 * H)));
  }
  // V512Emu's shifts of the low half's words by s0 and the high half's by s1
  static I sll16_2(I v, int s0, int s1) { return _mm256_sll_epi16(v, _mm_cvtsi32_si128(H ? s1 : s0)); }
  static I srl16_2(I v, int s0, int s1) { return _mm256_srl_epi16(v, _mm_cvtsi32_si128(H ? s1 : s0)); }
};

}  // namespace
}  // namespace pc::kern
