// FROZEN REFERENCE: the AVX2 matmul kernels as they were before the issue #7
// rewrite (src/kernels/matmul_avx2.cc at that time), kept verbatim (namespace
// and entry point renamed) so that tests can require the new kernels to give
// bitwise the same y. Do not "improve" this file: its only job is to stay the
// old arithmetic. Single-threaded, one task over the whole output.
#include "matmul_avx2_ref.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "gguf/quants.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "kernels/avx2_target_begin.inc"

namespace pc::test::ref {

namespace {

struct ActLayout {
  int64_t qk = 0;        // values per scale: 32 or 256; 0 = float activations
  int64_t d_off = 0;     // byte offset of the float scales in a row
  int64_t bsum_off = 0;  // byte offset of the int16 sums of 16 (qk == 256)
  int64_t stride = 0;    // bytes per row
};

inline int64_t round_up64(int64_t v) { return (v + 63) & ~int64_t(63); }

inline ActLayout act_layout(int64_t k, int64_t qk) {
  ActLayout l;
  l.qk = qk;
  l.d_off = round_up64(k);
  l.bsum_off = l.d_off + round_up64(4 * (k / qk));
  l.stride = l.bsum_off + (qk == 256 ? round_up64(2 * (k / 16)) : 0);
  return l;
}

struct MatmulArgs {
  const uint8_t* w = nullptr;  // weight rows, row_bytes apart
  int64_t row_bytes = 0;
  int64_t k = 0;
  const float* x = nullptr;  // f32 activations (F32/F16/BF16 weights), k floats apart
  const uint8_t* act = nullptr;  // quantized activations (quantized weights)
  ActLayout al;
  float* y = nullptr;  // output, ldy floats apart
  int64_t ldy = 0;

  const int8_t* xq(int64_t r) const { return reinterpret_cast<const int8_t*>(act + r * al.stride); }
  const float* xd(int64_t r) const {
    return reinterpret_cast<const float*>(act + r * al.stride + al.d_off);
  }
  const int16_t* xbs(int64_t r) const {
    return reinterpret_cast<const int16_t*>(act + r * al.stride + al.bsum_off);
  }
};


inline float bf16_to_float(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}

using TaskKernel = void (*)(const MatmulArgs& a, int64_t r0, int64_t r1, int64_t c0, int64_t c1);


// Full unrolling of the R×C loops keeps the accumulators in registers (GCC
// does not completely unroll them at -O2 on its own).
#define PC_UNROLL _Pragma("GCC unroll 16")

constexpr int kMaxR = 4;  // activation rows per micro-tile
constexpr int kMaxC = 4;  // weight rows per micro-tile

// Fixed horizontal sum: (v0+v4, v1+v5, v2+v6, v3+v7) -> (t0+t2, t1+t3) -> u0+u1.
inline float hsum8(__m256 v) {
  __m128 t = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  __m128 u = _mm_add_ps(t, _mm_movehl_ps(t, t));
  __m128 s = _mm_add_ss(u, _mm_shuffle_ps(u, u, 1));
  return _mm_cvtss_f32(s);
}

inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

// ---- float weights: F32 / F16 / BF16 ------------------------------------
// acc[r][c] lane l accumulates x[k]*w[k] for k = l mod 8 with FMA; then hsum8;
// then the k % 8 tail in order with separate multiply and add.

struct LoadF32 {
  static __m256 load8(const uint8_t* w, int64_t i) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(w) + i);
  }
  static float load1(const uint8_t* w, int64_t i) {
    float v;
    std::memcpy(&v, w + 4 * i, 4);
    return v;
  }
};
struct LoadF16 {
  static __m256 load8(const uint8_t* w, int64_t i) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 2 * i)));
  }
  static float load1(const uint8_t* w, int64_t i) {
    uint16_t h;
    std::memcpy(&h, w + 2 * i, 2);
    return h2f(h);
  }
};
struct LoadBF16 {
  static __m256 load8(const uint8_t* w, int64_t i) {
    __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 2 * i)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
  }
  static float load1(const uint8_t* w, int64_t i) {
    uint16_t h;
    std::memcpy(&h, w + 2 * i, 2);
    return bf16_to_float(h);
  }
};

template <class L, int R, int C>
void tile_float(const MatmulArgs& a, int64_t r, int64_t c) {
  const int64_t k = a.k, k8 = k & ~int64_t(7);
  const uint8_t* w[C];
  const float* x[R];
  PC_UNROLL for (int j = 0; j < C; ++j) w[j] = a.w + (c + j) * a.row_bytes;
  PC_UNROLL for (int i = 0; i < R; ++i) x[i] = a.x + (r + i) * k;
  __m256 acc[R][C];
  PC_UNROLL for (int i = 0; i < R; ++i)
    PC_UNROLL for (int j = 0; j < C; ++j) acc[i][j] = _mm256_setzero_ps();
  for (int64_t kk = 0; kk < k8; kk += 8) {
    __m256 wv[C];
    PC_UNROLL for (int j = 0; j < C; ++j) wv[j] = L::load8(w[j], kk);
    PC_UNROLL for (int i = 0; i < R; ++i) {
      const __m256 xv = _mm256_loadu_ps(x[i] + kk);
      PC_UNROLL for (int j = 0; j < C; ++j) acc[i][j] = _mm256_fmadd_ps(xv, wv[j], acc[i][j]);
    }
  }
  PC_UNROLL for (int i = 0; i < R; ++i)
    PC_UNROLL for (int j = 0; j < C; ++j) {
      float s = hsum8(acc[i][j]);
      for (int64_t kk = k8; kk < k; ++kk) s = s + x[i][kk] * L::load1(w[j], kk);
      a.y[(r + i) * a.ldy + c + j] = s;
    }
}

// ---- Q8_0 / Q4_0 weights, Q8 activations (32 per block) -----------------
// Per block: signed×signed int8 products via the sign trick
//   maddubs(|w|, sign(x, w)) = pairwise sums of w*x as int16 (|.| <= 2*127*127),
//   madd(·, 1) -> 8 int32 lanes, cvt -> float,
//   acc = fma(d_x * d_w, that, acc).

inline __m256i unpack_q4_0(const BlockQ4_0& b) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
  const __m256i v = _mm256_set_m128i(_mm_srli_epi16(q, 4), q);  // high nibbles -> 16..31
  return _mm256_sub_epi8(_mm256_and_si256(v, _mm256_set1_epi8(0x0F)), _mm256_set1_epi8(8));
}

template <bool kQ4, int R, int C>
void tile_q32(const MatmulArgs& a, int64_t r, int64_t c) {
  const int64_t nb = a.k / 32;
  const uint8_t* w[C];
  const int8_t* xq[R];
  const float* xd[R];
  PC_UNROLL for (int j = 0; j < C; ++j) w[j] = a.w + (c + j) * a.row_bytes;
  PC_UNROLL for (int i = 0; i < R; ++i) {
    xq[i] = a.xq(r + i);
    xd[i] = a.xd(r + i);
  }
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[R][C];
  PC_UNROLL for (int i = 0; i < R; ++i)
    PC_UNROLL for (int j = 0; j < C; ++j) acc[i][j] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m256i wv[C], wa[C];
    __m256 dw[C];
    PC_UNROLL for (int j = 0; j < C; ++j) {
      if constexpr (kQ4) {
        const BlockQ4_0& blk = reinterpret_cast<const BlockQ4_0*>(w[j])[b];
        wv[j] = unpack_q4_0(blk);
        dw[j] = _mm256_set1_ps(h2f(blk.d));
      } else {
        const BlockQ8_0& blk = reinterpret_cast<const BlockQ8_0*>(w[j])[b];
        wv[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs));
        dw[j] = _mm256_set1_ps(h2f(blk.d));
      }
      wa[j] = _mm256_abs_epi8(wv[j]);
    }
    PC_UNROLL for (int i = 0; i < R; ++i) {
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[i] + 32 * b));
      const __m256 dx = _mm256_broadcast_ss(xd[i] + b);
      PC_UNROLL for (int j = 0; j < C; ++j) {
        const __m256i p = _mm256_maddubs_epi16(wa[j], _mm256_sign_epi8(xv, wv[j]));
        const __m256 f = _mm256_cvtepi32_ps(_mm256_madd_epi16(p, ones));
        acc[i][j] = _mm256_fmadd_ps(_mm256_mul_ps(dx, dw[j]), f, acc[i][j]);
      }
    }
  }
  PC_UNROLL for (int i = 0; i < R; ++i)
    PC_UNROLL for (int j = 0; j < C; ++j) a.y[(r + i) * a.ldy + c + j] = hsum8(acc[i][j]);
}

// ---- Q4_K weights, Q8 activations (256 per block) ------------------------
// Block: 4 chunks of 32 bytes; low nibbles = sub-block 2c, high = 2c+1.
// Per block and element: isum = sum_j sc_j * (q·x)_j (int32 lanes, exact),
//   msum = madd(bsums, mins) (int32 lanes, exact),
//   acc = fma(d*d_x, float(isum), acc); acc = fnma(dmin*d_x, float(msum), acc).
template <int R, int C>
void tile_q4_k(const MatmulArgs& a, int64_t r, int64_t c) {
  const int64_t nb = a.k / 256;
  const BlockQ4_K* w[C];
  const int8_t* xq[R];
  const float* xd[R];
  const int16_t* xb[R];
  PC_UNROLL for (int j = 0; j < C; ++j) w[j] = reinterpret_cast<const BlockQ4_K*>(a.w + (c + j) * a.row_bytes);
  PC_UNROLL for (int i = 0; i < R; ++i) {
    xq[i] = a.xq(r + i);
    xd[i] = a.xd(r + i);
    xb[i] = a.xbs(r + i);
  }
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  __m256 acc[R][C];
  PC_UNROLL for (int i = 0; i < R; ++i)
    PC_UNROLL for (int j = 0; j < C; ++j) acc[i][j] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    PC_UNROLL for (int j = 0; j < C; ++j) {
      const BlockQ4_K& blk = w[j][b];
      // 6-bit scales/mins of the 8 sub-blocks, decoded 4 at a time in 32-bit words
      // (same mapping as q4k_scales()): bytes sc[0..7] then mn[0..7].
      uint32_t u[3];
      std::memcpy(u, blk.scales, 12);
      const uint32_t sc_lo = u[0] & 0x3f3f3f3fu;
      const uint32_t sc_hi = (u[2] & 0x0f0f0f0fu) | ((u[0] >> 2) & 0x30303030u);
      const uint32_t mn_lo = u[1] & 0x3f3f3f3fu;
      const uint32_t mn_hi = ((u[2] >> 4) & 0x0f0f0f0fu) | ((u[1] >> 2) & 0x30303030u);
      const __m128i scmn = _mm_setr_epi32(int(sc_lo), int(sc_hi), int(mn_lo), int(mn_hi));
      alignas(16) int16_t sc[8];
      _mm_store_si128(reinterpret_cast<__m128i*>(sc), _mm_cvtepu8_epi16(scmn));
      // mins as int16, each repeated for the two 16-value halves of its sub-block
      const __m256i mins = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(scmn, scmn));
      __m256i isum[R];
      PC_UNROLL for (int i = 0; i < R; ++i) isum[i] = _mm256_setzero_si256();
      PC_UNROLL for (int ch = 0; ch < 4; ++ch) {
        const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs + 32 * ch));
        const __m256i lo = _mm256_and_si256(q, m4);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
        const __m256i slo = _mm256_set1_epi16(sc[2 * ch]);
        const __m256i shi = _mm256_set1_epi16(sc[2 * ch + 1]);
        PC_UNROLL for (int i = 0; i < R; ++i) {
          const int8_t* x = xq[i] + 256 * b + 64 * ch;
          const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
          const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 32));
          isum[i] = _mm256_add_epi32(isum[i], _mm256_madd_epi16(_mm256_maddubs_epi16(lo, x0), slo));
          isum[i] = _mm256_add_epi32(isum[i], _mm256_madd_epi16(_mm256_maddubs_epi16(hi, x1), shi));
        }
      }
      const __m256 d = _mm256_set1_ps(h2f(blk.d));
      const __m256 dmin = _mm256_set1_ps(h2f(blk.dmin));
      PC_UNROLL for (int i = 0; i < R; ++i) {
        const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb[i] + 16 * b));
        const __m256 msum = _mm256_cvtepi32_ps(_mm256_madd_epi16(bs, mins));
        const __m256 dx = _mm256_broadcast_ss(xd[i] + b);
        acc[i][j] = _mm256_fmadd_ps(_mm256_mul_ps(d, dx), _mm256_cvtepi32_ps(isum[i]), acc[i][j]);
        acc[i][j] = _mm256_fnmadd_ps(_mm256_mul_ps(dmin, dx), msum, acc[i][j]);
      }
    }
  }
  PC_UNROLL for (int i = 0; i < R; ++i)
    PC_UNROLL for (int j = 0; j < C; ++j) a.y[(r + i) * a.ldy + c + j] = hsum8(acc[i][j]);
}

// ---- Q6_K weights, Q8 activations (256 per block) ------------------------
// Half h (128 values) uses ql[64h..64h+63], qh[32h..32h+31]; the 32-value vector
// kk of the half is ql low/high nibbles | 2 bits of qh shifted to bits 4-5:
//   kk=0: ql[0..31]&15 | (qh&3)<<4        kk=1: ql[32..63]&15 | ((qh>>2)&3)<<4
//   kk=2: ql[0..31]>>4 | ((qh>>4)&3)<<4   kk=3: ql[32..63]>>4 | ((qh>>6)&3)<<4
// Value e of the block uses scale e/16, so vector v = 4h+kk covers scales 2v
// (low 16 values) and 2v+1. q6 is unsigned 0..63; the -32 offset is applied as
//   isum -= 32 * madd(bsums, scales)  (exact int32).
// Then acc = fma(d*d_x, float(isum), acc).
template <int R, int C>
void tile_q6_k(const MatmulArgs& a, int64_t r, int64_t c) {
  const int64_t nb = a.k / 256;
  const BlockQ6_K* w[C];
  const int8_t* xq[R];
  const float* xd[R];
  const int16_t* xb[R];
  PC_UNROLL for (int j = 0; j < C; ++j) w[j] = reinterpret_cast<const BlockQ6_K*>(a.w + (c + j) * a.row_bytes);
  PC_UNROLL for (int i = 0; i < R; ++i) {
    xq[i] = a.xq(r + i);
    xd[i] = a.xd(r + i);
    xb[i] = a.xbs(r + i);
  }
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i m3 = _mm256_set1_epi8(0x03);
  const __m256i m30 = _mm256_set1_epi8(0x30);
  __m256 acc[R][C];
  PC_UNROLL for (int i = 0; i < R; ++i)
    PC_UNROLL for (int j = 0; j < C; ++j) acc[i][j] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    PC_UNROLL for (int j = 0; j < C; ++j) {
      const BlockQ6_K& blk = w[j][b];
      const int8_t* s = blk.scales;
      __m256i isum[R];
      PC_UNROLL for (int i = 0; i < R; ++i) isum[i] = _mm256_setzero_si256();
      PC_UNROLL for (int h = 0; h < 2; ++h) {
        const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.ql + 64 * h));
        const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.ql + 64 * h + 32));
        const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh + 32 * h));
        __m256i q[4];
        q[0] = _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m3), 4));
        q[1] = _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
        q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), _mm256_and_si256(qh, m30));
        q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                               _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
        PC_UNROLL for (int kk = 0; kk < 4; ++kk) {
          const int v = 4 * h + kk;
          const __m256i scv = _mm256_set_m128i(_mm_set1_epi16(s[2 * v + 1]), _mm_set1_epi16(s[2 * v]));
          PC_UNROLL for (int i = 0; i < R; ++i) {
            const __m256i x =
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[i] + 256 * b + 32 * v));
            isum[i] = _mm256_add_epi32(isum[i], _mm256_madd_epi16(_mm256_maddubs_epi16(q[kk], x), scv));
          }
        }
      }
      const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s)));
      const __m256 d = _mm256_set1_ps(h2f(blk.d));
      PC_UNROLL for (int i = 0; i < R; ++i) {
        const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb[i] + 16 * b));
        const __m256i bias = _mm256_slli_epi32(_mm256_madd_epi16(bs, sc16), 5);
        const __m256i tot = _mm256_sub_epi32(isum[i], bias);
        const __m256 dx = _mm256_broadcast_ss(xd[i] + b);
        acc[i][j] = _mm256_fmadd_ps(_mm256_mul_ps(d, dx), _mm256_cvtepi32_ps(tot), acc[i][j]);
      }
    }
  }
  PC_UNROLL for (int i = 0; i < R; ++i)
    PC_UNROLL for (int j = 0; j < C; ++j) a.y[(r + i) * a.ldy + c + j] = hsum8(acc[i][j]);
}

// ---- tiling driver ------------------------------------------------------

using TileFn = void (*)(const MatmulArgs&, int64_t r, int64_t c);

template <template <int, int> class K>
struct Table {
  static constexpr TileFn fns[kMaxR][kMaxC] = {
      {K<1, 1>::run, K<1, 2>::run, K<1, 3>::run, K<1, 4>::run},
      {K<2, 1>::run, K<2, 2>::run, K<2, 3>::run, K<2, 4>::run},
      {K<3, 1>::run, K<3, 2>::run, K<3, 3>::run, K<3, 4>::run},
      {K<4, 1>::run, K<4, 2>::run, K<4, 3>::run, K<4, 4>::run},
  };
};

template <int R, int C> struct KF32 { static void run(const MatmulArgs& a, int64_t r, int64_t c) { tile_float<LoadF32, R, C>(a, r, c); } };
template <int R, int C> struct KF16 { static void run(const MatmulArgs& a, int64_t r, int64_t c) { tile_float<LoadF16, R, C>(a, r, c); } };
template <int R, int C> struct KBF16 { static void run(const MatmulArgs& a, int64_t r, int64_t c) { tile_float<LoadBF16, R, C>(a, r, c); } };
template <int R, int C> struct KQ8_0 { static void run(const MatmulArgs& a, int64_t r, int64_t c) { tile_q32<false, R, C>(a, r, c); } };
template <int R, int C> struct KQ4_0 { static void run(const MatmulArgs& a, int64_t r, int64_t c) { tile_q32<true, R, C>(a, r, c); } };
template <int R, int C> struct KQ4_K { static void run(const MatmulArgs& a, int64_t r, int64_t c) { tile_q4_k<R, C>(a, r, c); } };
template <int R, int C> struct KQ6_K { static void run(const MatmulArgs& a, int64_t r, int64_t c) { tile_q6_k<R, C>(a, r, c); } };

// Columns per micro-tile for a given number of rows in it: wide tiles for
// decode (more independent accumulators, more loads in flight), 4×2 for
// prompt batches (register budget: 16 ymm).
// Loop order: row tiles outer, column tiles inner, so the R activation rows
// stay in L1 while the task's weight rows (sized to stay in L2 by matmul.cc)
// stream past them.
template <template <int, int> class K, int C4>
void run_task(const MatmulArgs& a, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  static constexpr int kCols[kMaxR] = {4, 4, 3, C4};
  for (int64_t r = r0; r < r1;) {
    const int nr = static_cast<int>(r1 - r < kMaxR ? r1 - r : kMaxR);
    const int want = kCols[nr - 1];
    for (int64_t c = c0; c < c1;) {
      const int nc = static_cast<int>(c1 - c < want ? c1 - c : want);
      Table<K>::fns[nr - 1][nc - 1](a, r, c);
      c += nc;
    }
    r += nr;
  }
}

void quantize_row_avx2(const float* x, int64_t k, const ActLayout& l, uint8_t* out) {
  auto* qs = reinterpret_cast<int8_t*>(out);
  auto* d = reinterpret_cast<float*>(out + l.d_off);
  auto* bs = reinterpret_cast<int16_t*>(out + l.bsum_off);
  const int64_t qk = l.qk;
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t b = 0; b < k / qk; ++b) {
    const float* xb = x + b * qk;
    __m256 vmax = _mm256_setzero_ps();
    for (int64_t i = 0; i < qk; i += 8) vmax = _mm256_max_ps(vmax, _mm256_and_ps(_mm256_loadu_ps(xb + i), abs_mask));
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    const float amax = _mm_cvtss_f32(m);
    // Same scalar operations as scalar_quantize_row -> identical bytes.
    const float id = amax > 0.f ? 127.f / amax : 0.f;
    // Q8_0 activation blocks carry an F16 scale, as the Q8_0 format does (and as
    // llama.cpp's CPU path does): the products use the rounded scale.
    d[b] = qk == 32 ? fp16_to_fp32(fp32_to_fp16(amax / 127.f)) : amax / 127.f;
    const __m256 vid = _mm256_set1_ps(id);
    for (int64_t i = 0; i < qk; i += 32) {
      __m256i v[4];
      PC_UNROLL for (int t = 0; t < 4; ++t) {
        const __m256 p = _mm256_mul_ps(_mm256_loadu_ps(xb + i + 8 * t), vid);
        v[t] = _mm256_cvtps_epi32(_mm256_round_ps(p, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
      }
      const __m256i p16 = _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs + b * qk + i), _mm256_permutevar8x32_epi32(p16, perm));
    }
    if (qk == 256) {
      for (int g = 0; g < 16; ++g) {
        // Sum of 16 int8 values: widen to int16 and reduce (exact).
        const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + b * qk + 16 * g));
        __m256i w16 = _mm256_cvtepi8_epi16(q);
        __m128i s = _mm_add_epi16(_mm256_castsi256_si128(w16), _mm256_extracti128_si256(w16, 1));
        s = _mm_add_epi16(s, _mm_unpackhi_epi64(s, s));
        s = _mm_add_epi16(s, _mm_srli_epi64(s, 32));
        s = _mm_add_epi16(s, _mm_srli_epi32(s, 16));
        bs[b * 16 + g] = static_cast<int16_t>(_mm_cvtsi128_si32(s));
      }
    }
  }
}


int64_t act_block(GgmlType t) {
  switch (t) {
    case GgmlType::Q8_0:
    case GgmlType::Q4_0: return 32;
    case GgmlType::Q4_K:
    case GgmlType::Q6_K: return 256;
    default: return 0;
  }
}

TaskKernel kernel_for(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return run_task<KF32, 2>;
    case GgmlType::F16: return run_task<KF16, 2>;
    case GgmlType::BF16: return run_task<KBF16, 2>;
    case GgmlType::Q8_0: return run_task<KQ8_0, 2>;
    case GgmlType::Q4_0: return run_task<KQ4_0, 2>;
    case GgmlType::Q4_K: return run_task<KQ4_K, 2>;
    case GgmlType::Q6_K: return run_task<KQ6_K, 2>;
    default: return nullptr;
  }
}

}  // namespace
}  // namespace pc::test::ref

#include "kernels/avx2_target_end.inc"

// Plain (baseline) code from here on: no AVX2-compiled template instances.
namespace pc::test::ref {

bool matmul_avx2_ref(const WeightView& w, const float* x, int64_t m, float* y) {
  TaskKernel kernel = kernel_for(w.type);
  if (!kernel || m <= 0 || w.n <= 0) return false;
  MatmulArgs a;
  a.w = w.data;
  a.row_bytes = w.row_bytes;
  a.k = w.k;
  a.x = x;
  a.y = y;
  a.ldy = w.n;
  std::vector<uint8_t> buf;
  if (const int64_t qk = act_block(w.type)) {
    a.al = act_layout(w.k, qk);
    buf.resize(size_t(a.al.stride * m));
    for (int64_t r = 0; r < m; ++r) quantize_row_avx2(x + r * w.k, w.k, a.al, buf.data() + r * a.al.stride);
    a.act = buf.data();
  }
  kernel(a, 0, m, 0, w.n);
  return true;
}

}  // namespace pc::test::ref

#else
namespace pc::test::ref {
bool matmul_avx2_ref(const WeightView&, const float*, int64_t, float*) { return false; }
}  // namespace pc::test::ref
#endif
