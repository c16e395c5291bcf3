// AVX2 + FMA + F16C kernels (CpuLevel::Avx2; on CpuLevel::Avx512 too, for
// the float types' and Q4_0 decode rows: kernels_avx512.cc has the prompt
// tiles of those types and both kinds of kernel of Q8_0 and the K-quants).
//
// Only the functions in this file are compiled for AVX2 (GCC/Clang target
// pragma below), so the rest of the binary runs on any x86-64; matmul.cc picks
// this path at run time. Everything here has internal linkage except the two
// entry points, so no AVX2-compiled inline/template copy can leak into other
// translation units through COMDAT folding. Standard headers are included
// before the pragma for the same reason.
//
// Tiling. A task (rows [r0,r1) × columns [c0,c1) of y) is covered by R×C
// micro-tiles: R rows of x (R <= 4) times C weight rows (C <= 4); tails use
// smaller R or C. Each weight block loaded is reused for R activation rows and
// each activation block for C weight rows. Full-height tiles, chosen so that
// accumulators and operands fit the 16 ymm registers without spilling:
//   F32/F16/BF16  4×3   (12 accumulators, 3 weight vectors, 1 activation)
//   Q8_0, Q4_0    own kernels (block sums, 8 columns a vector), see below
//   Q4_K, Q6_K    4×1   (plus R int32 block sums; 3×2, 2×3 for row tails)
// Decode (one row) reads the weights straight from the file: 1×4 tiles for
// the float and K-quant types, 8 columns a vector for Q8_0 / Q4_0.
//
// Batch invariance. Every output element y[r][c] owns one 8-lane float
// accumulator. A micro-tile of any shape R×C executes, for each of its
// elements, exactly the same instruction sequence: per block b (in increasing
// order) an exact int32 dot product (order-free: integer), converted to float,
// scaled and FMA'd into that element's accumulator; finally the fixed
// horizontal sum hsum8(). The loops over R and C only replicate that sequence
// for more elements, they never mix elements. So y[r][c] is bitwise the same
// whether it is computed in a 4×4 tile, a 1×1 tail, on any thread. (Q8_0 and
// Q4_0 instead follow the scalar kernel's order exactly, see their section.)
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "gguf/quants.h"
#include "kernels/cpu.h"
#include "kernels/matmul_internal.h"
#include "kernels/weight_repack.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "kernels/avx2_target_begin.inc"


#include "kernels/matmul_avx2_shared.h"  // after the pragma: compiled for AVX2 here

namespace pc::kern {

namespace {

// Full unrolling of the R×C loops keeps the accumulators in registers (GCC
// does not completely unroll them at -O2 on its own).
#define PC_UNROLL _Pragma("GCC unroll 16")



// Decode (one activation row) streams every weight from DRAM once per token.
// On the machines measured (AMD Zen 3 VMs) that is fastest as ONE forward
// stream per thread: the decode tiles take one weight row (column of y) at a
// time, in memory order, and prefetch kDecodePrefetchAhead bytes ahead of the
// read position (into L1). Reading 2-8 rows side by side, with or without
// prefetching, was 1.3-1.5× slower side by side (bench prefill --decode),
// prefetching the single stream 1.1-1.2× faster than leaving it to the
// hardware (1 KiB ahead; 8 KiB ahead is faster again, see there).
inline void prefetch_ahead(const void* p) {
  _mm_prefetch(static_cast<const char*>(p) + kDecodePrefetchAhead, _MM_HINT_T0);
}

// ---- float weights: F32 / F16 / BF16 ------------------------------------
// acc[r][c] lane l accumulates x[k]*w[k] for k = l mod 8 with FMA; then hsum8;
// then the k % 8 tail in order with separate multiply and add.

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
    if constexpr (R == 1) {
      if ((kk & 31) == 0) PC_UNROLL for (int j = 0; j < C; ++j) prefetch_ahead(w[j] + kk * L::kBytes);
      if constexpr (L::kBytes == 4) {
        if ((kk & 31) == 16) PC_UNROLL for (int j = 0; j < C; ++j) prefetch_ahead(w[j] + kk * L::kBytes);
      }
    }
    PC_UNROLL for (int j = 0; j < C; ++j) wv[j] = L::load8(w[j], kk);
    PC_UNROLL for (int i = 0; i < R; ++i) {
      __m256 xv = _mm256_loadu_ps(x[i] + kk);
      // Load x once into a register for the C FMAs (GCC would otherwise fold
      // the load into each FMA: C loads instead of one).
      if constexpr (C > 1) __asm__("" : "+x"(xv));
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

// ---- Q4_K weights: tile_q45_k (matmul_avx2_shared.h) ----------------------

// ---- Q6_K weights, Q8 activations (256 per block) ------------------------
// Half h (128 values) uses ql[64h..64h+63], qh[32h..32h+31]; the 32-value vector
// kk of the half is ql low/high nibbles | 2 bits of qh shifted to bits 4-5:
//   kk=0: ql[0..31]&15 | (qh&3)<<4        kk=1: ql[32..63]&15 | ((qh>>2)&3)<<4
//   kk=2: ql[0..31]>>4 | ((qh>>4)&3)<<4   kk=3: ql[32..63]>>4 | ((qh>>6)&3)<<4
// Value e of the block uses scale e/16, so vector v = 4h+kk covers scales 2v
// (low 16 values) and 2v+1. q6 is unsigned 0..63; the -32 offset is applied as
//   isum -= 32 * madd(bsums, scales)  (exact int32).
// The lanes are then summed to the block's exact integer, and the float part
// is the scalar kernel's (matmul_scalar.cc dot_q6_k): sum = sum + (d*d_x) *
// float(isum), so this, the scalar and the Q6_K_X16 kernels give the same bits.
template <int R, int C>
void tile_q6_k(const MatmulArgs& a, int64_t r, int64_t c) {
  const int64_t nb = a.k / 256;
  const TileCols<BlockQ6_K, C> w(a, c);
  const TileRows<R> rows(a, r);
  const int8_t* const* xq = rows.q;
  const float* const* xd = rows.d;
  const int16_t* const* xb = rows.s;
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i m3 = _mm256_set1_epi8(0x03);
  const __m256i m30 = _mm256_set1_epi8(0x30);
  float sum[R][C] = {};
  for (int64_t b = 0; b < nb; ++b) {
    PC_UNROLL for (int j = 0; j < C; ++j) {
      const BlockQ6_K& blk = w[j][b];
      if constexpr (R == 1) prefetch_block<sizeof blk>(&blk);
      const int8_t* s = blk.scales;
      __m256i isum[R];
      PC_UNROLL for (int i = 0; i < R; ++i) isum[i] = _mm256_setzero_si256();
      PC_UNROLL for (int v = 0; v < 8; ++v) {  // 32-value vector v = 4h + kk
        const int h = v / 4, kk = v % 4;
        const __m256i ql = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.ql + 64 * h + 32 * (kk & 1)));
        const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh + 32 * h));
        const __m256i lo4 = kk < 2 ? _mm256_and_si256(ql, m4) : _mm256_and_si256(_mm256_srli_epi16(ql, 4), m4);
        __m256i hi2;
        switch (kk) {
          case 0: hi2 = _mm256_slli_epi16(_mm256_and_si256(qh, m3), 4); break;
          case 1: hi2 = _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30); break;
          case 2: hi2 = _mm256_and_si256(qh, m30); break;
          default: hi2 = _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30); break;
        }
        __m256i q = _mm256_or_si256(lo4, hi2);
        __m256i scv = _mm256_set_m128i(_mm_set1_epi16(s[2 * v + 1]), _mm_set1_epi16(s[2 * v]));
        // Vectors in program order (else GCC hoists all eight and spills).
        __asm__ volatile("" : "+x"(q), "+x"(scv));
        PC_UNROLL for (int i = 0; i < R; ++i) {
          const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[i] + 256 * b + 32 * v));
          isum[i] = _mm256_add_epi32(isum[i], _mm256_madd_epi16(_mm256_maddubs_epi16(q, x), scv));
        }
      }
      const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s)));
      const float d = h2f(blk.d);
      PC_UNROLL for (int i = 0; i < R; ++i) {
        const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb[i] + 16 * b));
        const __m256i bias = _mm256_slli_epi32(_mm256_madd_epi16(bs, sc16), 5);
        const __m256i tot = _mm256_sub_epi32(isum[i], bias);
        sum[i][j] = sum[i][j] + (d * xd[i][b]) * float(hsum8_i32(tot));
      }
    }
  }
  PC_UNROLL for (int i = 0; i < R; ++i)
    PC_UNROLL for (int j = 0; j < C; ++j) a.y[(r + i) * a.ldy + c + j] = sum[i][j];
}

// ---- tiling driver: run_task (matmul_avx2_shared.h) ------------------------

template <int R, int C> struct KF32 { static void run(const MatmulArgs& a, int64_t r, int64_t c) { tile_float<LoadF32, R, C>(a, r, c); } };
template <int R, int C> struct KF16 { static void run(const MatmulArgs& a, int64_t r, int64_t c) { tile_float<LoadF16, R, C>(a, r, c); } };
template <int R, int C> struct KBF16 { static void run(const MatmulArgs& a, int64_t r, int64_t c) { tile_float<LoadBF16, R, C>(a, r, c); } };
template <int R, int C> struct KQ4_K { static void run(const MatmulArgs& a, int64_t r, int64_t c) { tile_q45_k<false, R, C>(a, r, c); } };
template <int R, int C> struct KQ6_K { static void run(const MatmulArgs& a, int64_t r, int64_t c) { tile_q6_k<R, C>(a, r, c); } };

// ---- Q8_0 / Q4_0 weights, Q8 activations (32 per block) -----------------
// Every element is computed as the scalar kernel computes it (bitwise equal):
//   isum_b = exact int32 dot product of block b (any order: integers),
//   sum = sum + (d_w[b] * d_x[b]) * float(isum_b)   for b = 0, 1, ... in order,
// with separately rounded multiplies and add (no FMA), starting from +0.
// The two kernels below only differ in how they get the integers, and both
// evaluate the float part in 8 output columns at once (a vector lane per
// column, so lanes never mix).
//
// Rows of x one at a time (decode, tasks of < kPanelRows rows): the weights
// come straight from the file and are read in memory order, a whole row
// (column of y) after another (passes of up to 512 blocks: whole rows up to
// k = 16384; passes of 64 blocks read 8 rows side by side in 2 KiB pieces
// and ran 1.1x slower on the tinyllama shape's k = 5632), because decode streams every weight from DRAM
// once per token and a single forward stream (plus a software prefetch a
// little ahead of it) is what the memory system serves fastest; reading 8 rows
// side by side block by block was ~1.4× slower. Per column, 8 blocks at a
// time give 8 vectors of int32 partial sums
//   madd(maddubs(|w|, sign(x, w)), 1)
// that reduce8() folds into one vector of the 8 block sums; 8 columns' sums,
// transposed 8×8, give a vector per block with a lane per column for the
// float part.
// Prompt batches (kPanelRows rows or more): the task first repacks its weight
// columns into the thread's scratch, 8 columns per group, as int16 pairs:
//   q  int16 [group][block][pair p = 0..15][column 0..7][2]   w[32b+2p], w[32b+2p+1]
//   d  float [group][block][column 0..7]                      F16 scale as float
// (columns past the end of the task are zero). The activations carry an int16
// copy of their quants (ActLayout::x16_off), so one vpbroadcastd of the pair
// (x[32b+2p], x[32b+2p+1]) times one panel vector with vpmaddwd gives the
// pair's products for 8 columns: per row, group and block 16 madd + 16 add
// give the 8 block sums directly, and the float part (cvt, 2 mul, add) runs
// once per 256 multiply-adds instead of per 32.

// Lane j of the result = the sum of the 8 lanes of v[j] (exact int32).
inline __m256i reduce8(const __m256i v[8]) {
  const __m256i a = _mm256_hadd_epi32(v[0], v[1]);
  const __m256i b = _mm256_hadd_epi32(v[2], v[3]);
  const __m256i c = _mm256_hadd_epi32(v[4], v[5]);
  const __m256i d = _mm256_hadd_epi32(v[6], v[7]);
  const __m256i ab = _mm256_hadd_epi32(a, b);  // [v0..v3: sums of lanes 0-3 | of lanes 4-7]
  const __m256i cd = _mm256_hadd_epi32(c, d);  // same for v4..v7
  return _mm256_add_epi32(_mm256_permute2x128_si256(ab, cd, 0x20), _mm256_permute2x128_si256(ab, cd, 0x31));
}

// Block sums of column j's blocks [b, b + n) (n <= 8; lanes past n are 0);
// for Q4_0 the -8 offset is left to the caller.
template <bool kQ4>
inline __m256i q32_block_sums8(const uint8_t* row, const int8_t* xq, int64_t b, int64_t n) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i v[8];
  PC_UNROLL for (int i = 0; i < 8; ++i) {
    if (i >= n) {
      v[i] = _mm256_setzero_si256();
      continue;
    }
    const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 32 * (b + i)));
    if constexpr (kQ4) {
      const BlockQ4_0& blk = reinterpret_cast<const BlockQ4_0*>(row)[b + i];
      if (i % 4 == 0) prefetch_ahead(&blk);
      // Unsigned nibbles times signed x: no sign trick needed (pairs <= 2·15·127).
      v[i] = _mm256_madd_epi16(_mm256_maddubs_epi16(unpack_u4(blk), xv), ones);
    } else {
      const BlockQ8_0& blk = reinterpret_cast<const BlockQ8_0*>(row)[b + i];
      if (i % 2 == 1) prefetch_ahead(&blk);
      const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs));
      v[i] = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(wv), _mm256_sign_epi8(xv, wv)), ones);
    }
  }
  return reduce8(v);
}

template <bool kQ4>
void q32_rows(const MatmulArgs& a, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  constexpr int64_t kChunk = 512;  // blocks per pass: whole rows up to k = 16384 (the sums, 16 KiB, stay in L1)
  const int64_t nb = a.k / 32;
  alignas(32) int32_t isum[8][kChunk];
  // Q4_0: 8 · (sum of each block's 32 x) of the current row, for all column
  // groups (sum (q-8)·x = sum q·x - 8·sum x, exactly, per block); grow-only.
  thread_local std::vector<int32_t> x8;
  if constexpr (kQ4) {
    if (x8.size() < size_t(nb + 8)) x8.resize(size_t(nb + 8));
  }
  for (int64_t r = r0; r < r1; ++r) {
    const int8_t* xq = a.xq(r);
    const float* xd = a.xd(r);
    if constexpr (kQ4) {
      const __m256i one8 = _mm256_set1_epi8(1), ones = _mm256_set1_epi16(1);
      for (int64_t b = 0; b < nb; b += 8) {
        __m256i v[8];
        PC_UNROLL for (int i = 0; i < 8; ++i) {
          v[i] = b + i < nb ? _mm256_madd_epi16(_mm256_maddubs_epi16(one8, _mm256_loadu_si256(
                                  reinterpret_cast<const __m256i*>(xq + 32 * (b + i)))), ones)
                            : _mm256_setzero_si256();
        }
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(x8.data() + b), _mm256_slli_epi32(reduce8(v), 3));
      }
    }
    for (int64_t c = c0; c < c1; c += 8) {
      const uint8_t* w[8];
      PC_UNROLL for (int j = 0; j < 8; ++j) w[j] = a.w + (c + j < c1 ? c + j : c1 - 1) * a.row_bytes;
      __m256 acc = _mm256_setzero_ps();
      for (int64_t b0 = 0; b0 < nb; b0 += kChunk) {
        const int64_t nbc = nb - b0 < kChunk ? nb - b0 : kChunk;
        // Integer pass: column after column, each in memory order.
        PC_UNROLL for (int j = 0; j < 8; ++j) {
          for (int64_t bb = 0; bb < nbc; bb += 8) {
            __m256i sums = q32_block_sums8<kQ4>(w[j], xq, b0 + bb, nbc - bb);
            if constexpr (kQ4) sums = _mm256_sub_epi32(sums, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x8.data() + b0 + bb)));
            _mm256_store_si256(reinterpret_cast<__m256i*>(&isum[j][bb]), sums);
          }
        }
        // Float part, block after block in order: 8 blocks' sums transposed
        // to a lane per column.
        for (int64_t bb = 0; bb < nbc; bb += 8) {
          __m256i in[8], t[8];
          PC_UNROLL for (int j = 0; j < 8; ++j) in[j] = _mm256_load_si256(reinterpret_cast<const __m256i*>(&isum[j][bb]));
          transpose8(in, t);
          const int64_t n_here = nbc - bb < 8 ? nbc - bb : 8;
          for (int64_t i = 0; i < n_here; ++i) {
            const int64_t b = b0 + bb + i;
            // (inserted, not stored and reloaded: eight 2-byte stores read
            // back as one vector would stall on store forwarding)
            // (_mm_setr_epi16 of the eight, not _mm_insert_epi16 in a loop:
            // that needs the loop unrolled to compile, so not at -O0)
            int16_t d[8];
            PC_UNROLL for (int j = 0; j < 8; ++j)
              d[j] = int16_t(kQ4 ? reinterpret_cast<const BlockQ4_0*>(w[j])[b].d
                                 : reinterpret_cast<const BlockQ8_0*>(w[j])[b].d);
            const __m128i dh = _mm_setr_epi16(d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]);
            const __m256 sc = _mm256_mul_ps(_mm256_cvtph_ps(dh), _mm256_broadcast_ss(xd + b));
            acc = _mm256_add_ps(acc, _mm256_mul_ps(sc, _mm256_cvtepi32_ps(t[i])));
          }
        }
      }
      store_cols(a.y + r * a.ldy + c, acc, c1 - c);
    }
  }
}

constexpr int kPR = 3, kPC = 2;    // largest panel micro-tile: 3 rows × 2 groups of 8 columns

// y[r..r+R) × columns of groups [g, g+C) of the panel (task columns from c0).
template <int R, int C>
void q32_panel_tile(const MatmulArgs& a, const Q32Panel& p, int64_t r, int64_t g, int64_t c0, int64_t c1) {
  const int64_t nb = p.nb;
  const int32_t* x[R];
  const float* dx[R];
  panel_rows<R>(a, r, x, dx);
  const __m256i* wq[C];
  const float* wd[C];
  PC_UNROLL for (int j = 0; j < C; ++j) {
    wq[j] = reinterpret_cast<const __m256i*>(p.q) + (g + j) * nb * 16;
    wd[j] = p.d + (g + j) * nb * 8;
  }
  __m256 acc[R][C];
  PC_UNROLL for (int i = 0; i < R; ++i)
    PC_UNROLL for (int j = 0; j < C; ++j) acc[i][j] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m256i is[R][C];
    PC_UNROLL for (int i = 0; i < R; ++i)
      PC_UNROLL for (int j = 0; j < C; ++j) is[i][j] = _mm256_setzero_si256();
    PC_UNROLL for (int pp = 0; pp < 16; ++pp) {
      __m256i wv[C];
      PC_UNROLL for (int j = 0; j < C; ++j) wv[j] = _mm256_load_si256(wq[j] + 16 * b + pp);
      PC_UNROLL for (int i = 0; i < R; ++i) {
        const __m256i xv = _mm256_set1_epi32(x[i][16 * b + pp]);
        PC_UNROLL for (int j = 0; j < C; ++j) is[i][j] = _mm256_add_epi32(is[i][j], _mm256_madd_epi16(xv, wv[j]));
      }
      // Keep the sums in registers, pair after pair: GCC would otherwise
      // reassociate the integer adds into a tree and spill the products.
      PC_UNROLL for (int i = 0; i < R; ++i)
        PC_UNROLL for (int j = 0; j < C; ++j) __asm__("" : "+x"(is[i][j]));
    }
    PC_UNROLL for (int i = 0; i < R; ++i) {
      const __m256 dxv = _mm256_broadcast_ss(dx[i] + b);
      PC_UNROLL for (int j = 0; j < C; ++j) {
        const __m256 s = _mm256_mul_ps(_mm256_load_ps(wd[j] + 8 * b), dxv);
        acc[i][j] = _mm256_add_ps(acc[i][j], _mm256_mul_ps(s, _mm256_cvtepi32_ps(is[i][j])));
      }
    }
  }
  PC_UNROLL for (int i = 0; i < R; ++i)
    PC_UNROLL for (int j = 0; j < C; ++j) {
      const int64_t c = c0 + 8 * (g + j);
      store_cols(a.y + (r + i) * a.ldy + c, acc[i][j], c1 - c);
    }
}

using PanelTileFn = void (*)(const MatmulArgs&, const Q32Panel&, int64_t, int64_t, int64_t, int64_t);
template <int R, int C> struct KPanel { static void run(const MatmulArgs& a, const Q32Panel& p, int64_t r, int64_t g, int64_t c0, int64_t c1) { q32_panel_tile<R, C>(a, p, r, g, c0, c1); } };
template <int R, int C> constexpr PanelTileFn panel_fn(int nr, int nc) {
  if constexpr (R == 0) {
    return nullptr;
  } else if constexpr (C == 0) {
    return panel_fn<R - 1, kPC>(nr, nc);
  } else {
    return (nr == R && nc == C) ? KPanel<R, C>::run : panel_fn<R, C - 1>(nr, nc);
  }
}
// kX16: Q8_0_X16 weights. Batches planned without a panel (avx2_wants_x16:
// under kX16PanelRows rows, and any at CpuLevel::AvxVnni, whose X16 tiles
// take a vpdpbusd for 32 products where the panel takes a vpmaddwd and an add
// for 16) run the 16-lane kernel (x16_kernel_set()), larger ones this panel
// packed from the groups.
template <bool kQ4, bool kX16 = false>
void run_task_q32(const MatmulArgs& a, int64_t r0, int64_t r1, int64_t c0, int64_t c1, uint8_t* scratch) {
  if (r1 - r0 < kPanelRows || !a.al.x16_off) {
    if constexpr (kX16) x16_kernel_set()->kernel(GgmlType::Q8_0_X16)(a, r0, r1, c0, c1, scratch);
    else q32_rows<kQ4>(a, r0, r1, c0, c1);
    return;
  }
  const Q32Panel p = q32_task_panel<kQ4, kX16>(a, c0, c1, scratch);
  const int64_t groups = q32_groups(c1 - c0);
  // Groups outer: the C groups of a micro-tile (C × 8 columns × k int16) stay
  // in L1 while every row tile of the task passes over them.
  for (int64_t g = 0; g < groups; g += kPC) {
    const int nc = static_cast<int>(groups - g < kPC ? groups - g : kPC);
    for (int64_t r = r0; r < r1;) {
      const int nr = static_cast<int>(r1 - r < kPR ? r1 - r : kPR);
      panel_fn<kPR, kPC>(nr, nc)(a, p, r, g, c0, c1);
      r += nr;
    }
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
    if (l.x16_off) {  // int16 copy of the quants (q32 panel kernel)
      auto* x16 = reinterpret_cast<int16_t*>(out + l.x16_off);
      for (int64_t i = 0; i < qk; i += 16)
        _mm256_store_si256(reinterpret_cast<__m256i*>(x16 + b * qk + i),
                           _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + b * qk + i))));
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
    } else {  // sum of 32 int8 values: pairs by vpmaddubsw with 1, then vpmaddwd (exact)
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + b * qk));
      const __m256i s32 = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), q), _mm256_set1_epi16(1));
      bs[b] = static_cast<int16_t>(hsum8_i32(s32));
    }
  }
}

}  // namespace
}  // namespace pc::kern

#include "kernels/avx2_target_end.inc"

// Entry points: plain (baseline) code that only hands out the AVX2 functions.
namespace pc::kern {

const KernelSet* x16_kernel_set() {
  if (cpu_level() == CpuLevel::AvxVnni)
    if (const KernelSet* s = avxvnni_kernel_set()) return s;
  return avx512_emulated_kernel_set();
}

namespace {

// Q4_K as stored (--repack left it so, where its X16 layout decodes slower) in
// prompt batches of kQ4kRepackRows rows or more: each task's columns are
// repacked to Q4_K_X16 in its scratch, once per call and column block
// (must_pack_task_block, as q32_task_panel's panels), and run by the Q4_K_X16
// prompt tiles of x16_kernel_set(), which give the stored tiles' bits.
// Repacking costs about a 16-row pass of those tiles over the block, so
// smaller batches (and decode) keep the stored tiles, as does a block that is
// not whole groups of 16 columns. On a 128-bit-unit
// AVX2 core: 1.06x at 128 rows, 1.1-1.3x at 256-512 (one 5632 x 2048 matrix,
// docs/benchmarks.md). Q5_K and Q6_K are not repacked so: their X16 prompt
// tiles were no faster there, and repacking them costs more.
// Q8_0 as stored at CpuLevel::AvxVnni, in batches of kPanelRows rows or more:
// the same, to Q8_0_X16, in place of the int16 panel the AVX2 tiles pack
// (the X16 tiles there take a vpdpbusd for 32 products; tinyllama Q8_0
// prompts 1.6-1.8x on a Zen 5).
constexpr int64_t kQ4kRepackRows = 128;

bool repacks_task(GgmlType t, int64_t m) {
  if (t == GgmlType::Q4_K) return m >= kQ4kRepackRows;
  if (t == GgmlType::Q8_0) return m >= kPanelRows && cpu_level() == CpuLevel::AvxVnni;
  return false;
}

template <GgmlType T, GgmlType X>
void run_task_repacked(const MatmulArgs& a, int64_t r0, int64_t r1, int64_t c0, int64_t c1, uint8_t* scratch) {
  static const TaskKernel stored = avx2_kernel(T);
  // (scratch: the batch was planned with repacks_task's column blocks, or
  // for Q8_0 with the AVX2 panel, which holds the repacked block too)
  if (!scratch || c0 % kX16Rows != 0 || (c1 - c0) % kX16Rows != 0 ||
      (T == GgmlType::Q8_0 && cpu_level() != CpuLevel::AvxVnni))
    return stored(a, r0, r1, c0, c1, scratch);
  if (must_pack_task_block(a, c0, c1, scratch)) repack_rows(T, X, a.w + c0 * a.row_bytes, scratch, a.k, c1 - c0);
  MatmulArgs b = a;
  b.w = scratch;
  b.y = a.y + c0;
  x16_kernel_set()->kernel(X)(b, r0, r1, 0, c1 - c0, nullptr);
}

// The AVX2 set: avx2_kernel() and avx2_task_*(), but stored Q4_K and Q8_0 as
// above. (The AVX-512 set plans stored Q4_K with avx2_task_*() alone: its own
// X16 kernels are not the emulation's.)
TaskKernel avx2_set_kernel(GgmlType t) {
  if (t == GgmlType::Q4_K) return run_task_repacked<GgmlType::Q4_K, GgmlType::Q4_K_X16>;
  if (t == GgmlType::Q8_0) return run_task_repacked<GgmlType::Q8_0, GgmlType::Q8_0_X16>;
  return avx2_kernel(t);
}

int64_t avx2_set_col_bytes(GgmlType t, int64_t k, int64_t m) {
  return t == GgmlType::Q4_K && repacks_task(t, m) ? ggml_row_bytes(t, k) : avx2_task_col_bytes(t, k, m);
}

int64_t avx2_set_col_multiple(GgmlType t, int64_t m) {
  return repacks_task(t, m) ? kX16Rows : avx2_task_col_multiple(t, m);
}

int64_t avx2_set_scratch_bytes(GgmlType t, int64_t k, int64_t cols) {
  const int64_t x16 = round_up64((cols + kX16Rows - 1) / kX16Rows * kX16Rows * ggml_row_bytes(t, k));
  if (t == GgmlType::Q4_K) return x16;
  if (t == GgmlType::Q8_0) return std::max(x16, avx2_task_scratch_bytes(t, k, cols));
  return avx2_task_scratch_bytes(t, k, cols);
}

}  // namespace

TaskKernel avx2_kernel(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return run_task<KF32, 3>;
    case GgmlType::F16: return run_task<KF16, 3>;
    case GgmlType::BF16: return run_task<KBF16, 3>;
    case GgmlType::Q8_0: return run_task_q32<false>;
    case GgmlType::Q4_0: return run_task_q32<true>;
    case GgmlType::Q8_0_X16: return run_task_q32<false, true>;
    case GgmlType::Q4_K: return run_task<KQ4_K, 1, 2, 3>;
    case GgmlType::Q6_K: return run_task<KQ6_K, 1, 2, 3>;
    default:  // the other X16 layouts: the 16-lane kernels on the emulation
      if (x16_layout(t)) return x16_kernel_set()->kernel(t);
      return avx2_unpack_kernel(t);  // Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4, Q5_K, IQ4_XS as stored
  }
}

QuantizeRowFn avx2_quantize_row_fn() { return quantize_row_avx2; }

// Plain code below (no AVX2 instructions before the dispatcher chose this
// path), so the panel sizes are written out rather than calling q32_panel().
bool avx2_wants_x16(GgmlType t, int64_t m) {
  switch (t) {
    case GgmlType::Q8_0_X16: return m >= 128 && cpu_level() != CpuLevel::AvxVnni;  // kX16PanelRows
    case GgmlType::Q8_0:
    case GgmlType::Q4_0: return m >= 8;  // kPanelRows
    default: return false;
  }
}

int64_t avx2_task_col_bytes(GgmlType t, int64_t k, int64_t m) {
  return avx2_wants_x16(t, m) ? 2 * k + 4 * (k / 32) : 0;
}

int64_t avx2_task_col_multiple(GgmlType t, int64_t m) {
  switch (t) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:  // 4×3 tiles (run_task<K..., 3>) and 8-column groups
      return m >= 4 ? 24 : 8;
    default: return 8;
  }
}

int64_t avx2_task_scratch_bytes(GgmlType t, int64_t k, int64_t cols) {
  switch (t) {
    case GgmlType::Q8_0:
    case GgmlType::Q8_0_X16:
    case GgmlType::Q4_0: {  // q32_pack(): groups of 8 columns
      const int64_t groups = (cols + 7) / 8, nb = k / 32;
      return round_up64(groups * nb * 512) + round_up64(groups * nb * 32);
    }
    default: return 0;
  }
}

const KernelSet* avx2_kernel_set() {
  static const KernelSet set = {"avx2", avx2_set_kernel, quantize_row_avx2, avx2_wants_x16,
                                avx2_set_scratch_bytes, avx2_set_col_bytes, avx2_set_col_multiple};
  return &set;
}

}  // namespace pc::kern

#else  // not x86

namespace pc::kern {
TaskKernel avx2_kernel(GgmlType) { return nullptr; }
QuantizeRowFn avx2_quantize_row_fn() { return nullptr; }
int64_t avx2_task_scratch_bytes(GgmlType, int64_t, int64_t) { return 0; }
int64_t avx2_task_col_bytes(GgmlType, int64_t, int64_t) { return 0; }
int64_t avx2_task_col_multiple(GgmlType, int64_t) { return 8; }
bool avx2_wants_x16(GgmlType, int64_t) { return false; }
const KernelSet* avx2_kernel_set() { return nullptr; }
}  // namespace pc::kern

#endif
