// AVX-512 register tiles of the attention kernel (paged_attention_avx2.cc
// runs them through its AttnTiles table; F16 pages and dequantized F32 chunks
// alike), written once over a 16-lane backend
// V (simd16_avx512.h on AVX-512, simd16_emu.h emulated on AVX2 for tests; the
// operations are listed in matmul_avx512_impl.h). Each lane performs the AVX2
// tile's operations in its order, so scores, exps and accumulators are
// bitwise those of the AVX2 tiles:
//   scores: a lane per slot, two blocks of 8 slots per vector (lanes 0-7 block
//     b, 8-15 block b + 1), per pair one FMA chain over head_dim in order, then
//     times scale;
//   update: a lane per dimension, 16 dimensions per vector; per block the
//     rescale (when any query's maximum grew in the chunk), then
//     acc = fma(V[t], p_t, acc) slot by slot;
//   quantized K's scores (qscore): a lane per slot, two blocks per vector, the
//     integer dots by vpdpbusd on bytes (exact, so any grouping gives the
//     same integers), then the AVX2 tile's float operations.
// Head sizes whose update covers an odd number of 8-dimension vectors (head
// dimension 8) have no 16-lane tiles: the AVX2 ones run.
//
// Include inside a target region, after the backend header; internal linkage
// only (see matmul_avx2_shared.h).
#pragma once

#include "kernels/attn_tile_loops.h"
#include "kernels/kv_block_levels.h"
#include "kernels/kv_quant.h"

namespace pc {
namespace {

#ifndef PC_UNROLL
#define PC_UNROLL _Pragma("GCC unroll 16")
#endif

// 8 values from lo (lanes 0-7) and 8 from hi (8-15) / 16 from p: F16 from a
// page, or F32 dequantized (AttnTileSet).
template <class V>
inline typename V::F load2_16(const uint16_t* lo, const uint16_t* hi) { return V::load_h2(lo, hi); }
template <class V>
inline typename V::F load2_16(const float* lo, const float* hi) { return V::load_f2(lo, hi); }
template <class V>
inline typename V::F load16(const uint16_t* p) { return V::load_h16(p); }
template <class V>
inline typename V::F load16(const float* p) { return V::loadu_f(p); }

template <class V, int NV, int QT, int KB, class E>
__attribute__((noinline)) void score_tile16(const float* const* qv, const E* const* kb, float scale,
                                            float* const* sc, AttnPrefetch* pf) {
  AttnPrefetchCursor pfc(pf);
  using F = typename V::F;
  constexpr int hd = 8 * NV, KP = (KB + 1) / 2;
  F s[QT][KP];
  PC_UNROLL for (int i = 0; i < QT; ++i) PC_UNROLL for (int j = 0; j < KP; ++j) s[i][j] = V::zero_f();
  const float* q[QT];
  const E* k16[KP][2];
  PC_UNROLL for (int i = 0; i < QT; ++i) q[i] = qv[i];
  PC_UNROLL for (int j = 0; j < KP; ++j) {
    k16[j][0] = kb[2 * j];
    k16[j][1] = kb[2 * j + 1 < KB ? 2 * j + 1 : 2 * j];  // (past the last block: never stored)
  }
  auto dim = [&](int d) __attribute__((always_inline)) {
    F kv[KP];
    PC_UNROLL for (int j = 0; j < KP; ++j) kv[j] = load2_16<V>(k16[j][0] + 8 * d, k16[j][1] + 8 * d);
    PC_UNROLL for (int i = 0; i < QT; ++i) {
      const F qb = V::set1_f(q[i][d]);
      PC_UNROLL for (int j = 0; j < KP; ++j) s[i][j] = V::fmadd(qb, kv[j], s[i][j]);
    }
  };
  attn_dims<1>(pfc, hd, dim);
  const F sv = V::set1_f(scale);
  PC_UNROLL for (int i = 0; i < QT; ++i)
    PC_UNROLL for (int j = 0; j < KP; ++j) {
      const F r = V::mul(s[i][j], sv);
      _mm256_storeu_ps(sc[i] + 16 * j, V::lo8(r));
      if (2 * j + 1 < KB) _mm256_storeu_ps(sc[i] + 16 * j + 8, V::hi8(r));
    }
}

// What update_tile16 reads for slot u of a block, 16 dimensions at a time
// from 8 v0 (load(w): dimensions 8 v0 + 16 w ..): F16 or F32 rows (VT = kF16),
// or a quantized row straight from the page, dequantized as loaded (VT =
// kQ8_0 / kQ4_0, E = uint8_t, vb the block's first row; v0 a multiple of 4:
// quantization blocks v0 / 4 and, for w = 2 and 3, the one after it, each
// with its scale), bitwise dequant_v16()'s values.
template <class V, int NV, class E, KvType VT>
struct VSlot16 {
  static constexpr size_t kBlockBytes = VT == KvType::kQ8_0 ? 34 : 18;
  const E* p;
  typename V::F d[2];
  VSlot16(const E* vb, int u, int v0, int nblk = 1) {
    if constexpr (VT == KvType::kF16) {
      p = vb + u * 8 * NV + 8 * v0;
    } else {
      p = vb + size_t(u) * (NV / 4) * kBlockBytes + size_t(v0 / 4) * kBlockBytes;
      for (int k = 0; k < nblk; ++k) {
        uint16_t h;
        std::memcpy(&h, p + k * kBlockBytes, 2);
        d[k] = V::set1_f(_cvtsh_ss(h));
      }
    }
  }
  typename V::F load(int w) const {
    if constexpr (VT == KvType::kF16) {
      return load16<V>(p + 16 * w);
    } else {
      const E* b = p + (w / 2) * kBlockBytes;
      if constexpr (VT == KvType::kQ8_0) {
        return V::mul(d[w / 2], V::cvt_i8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2 + 16 * (w % 2)))));
      } else {  // q4_0: values 0-15 the low nibbles, 16-31 the high ones
        const __m128i qs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2));
        const __m128i mask = _mm_set1_epi8(15);
        const __m128i nib = w % 2 == 0 ? _mm_and_si128(qs, mask) : _mm_and_si128(_mm_srli_epi16(qs, 4), mask);
        return V::mul(d[w / 2], V::cvt_i8(_mm_sub_epi8(nib, _mm_set1_epi8(8))));
      }
    }
  }
};

// DV (even) vectors of 8 dimensions from v0: DV / 2 vectors of 16 (on F16
// pages 8 where the head has a multiple of 64 dimensions: 4 × QT
// accumulators, so a decode token's 3 queries have 12 FMA chains and a head
// of 64 is one pass).
template <class V, int NV, int QT, int DV, class E, KvType VT = KvType::kF16>
__attribute__((noinline)) void update_tile16(float* const* acc, const float* const* p, const float* const* c,
                                             const E* const* vb, const int* blk_len, int n_blk, int v0,
                                             AttnPrefetch* pf) {
  AttnPrefetchCursor pfc(pf);
  static_assert(DV % 2 == 0, "16 dimensions a vector");
  using F = typename V::F;
  [[maybe_unused]] constexpr int hd = 8 * NV, DW = DV / 2;
  F a[QT][DW];
  PC_UNROLL for (int i = 0; i < QT; ++i) PC_UNROLL for (int w = 0; w < DW; ++w) a[i][w] = V::loadu_f(acc[i] + 8 * v0 + 16 * w);
  const bool rescale = attn_chunk_rescales<QT>(c, n_blk);
  for (int b = 0; b < n_blk; ++b) {
    if (rescale) {
      PC_UNROLL for (int i = 0; i < QT; ++i) {
        const F ci = V::set1_f(c[i][b]);
        PC_UNROLL for (int w = 0; w < DW; ++w) a[i][w] = V::mul(a[i][w], ci);
      }
    }
    auto slot = [&](int u) __attribute__((always_inline)) {
      const int t = 8 * b + u;
      const VSlot16<V, NV, E, VT> vt(vb[b], u, v0, DW > 2 ? 2 : 1);
      F vv[DW];
      PC_UNROLL for (int w = 0; w < DW; ++w) vv[w] = vt.load(w);
      PC_UNROLL for (int i = 0; i < QT; ++i) {
        const F pv = V::set1_f(p[i][t]);
        PC_UNROLL for (int w = 0; w < DW; ++w) a[i][w] = V::fmadd(vv[w], pv, a[i][w]);
      }
    };
    attn_block_slots(pfc, blk_len[b], slot);
  }
  PC_UNROLL for (int i = 0; i < QT; ++i) PC_UNROLL for (int w = 0; w < DW; ++w) V::storeu_f(acc[i] + 8 * v0 + 16 * w, a[i][w]);
}

// AttnTileSet::softmax16: softmax_x8's steps (paged_attention_avx2.cc) for
// 16 queries, a lane per query (lanes 0-7 the queries qs[0..7], 8-15
// qs[8..15]; a block's scores transposed to a vector per slot): per block the
// maximum, c = exp(M - m) where it grew (else 1), S = S * c, the exps
// p_t = exp(s_t - M) and S = S + p_t slot by slot — each lane exactly the
// operations of the one-query path, twice the lanes of an AVX2 vector.
template <class V>
__attribute__((noinline)) void softmax16(const int* qs, float* sc, float* cf, float* M, float* S,
                                         const int* blk_len, int n_blk) {
  using F = typename V::F;
  alignas(64) float mv[16], sv[16], cv[16];
  PC_UNROLL for (int i = 0; i < 16; ++i) {
    mv[i] = M[qs[i]];
    sv[i] = S[qs[i]];
  }
  F m = V::loadu_f(mv), sum = V::loadu_f(sv);
  const F one = V::set1_f(1.f);
  float* row[16];
  PC_UNROLL for (int i = 0; i < 16; ++i) row[i] = sc + qs[i] * kAttnChunkSlots;
  for (int b = 0; b < n_blk; ++b) {
    F rows[8], s[8];
    PC_UNROLL for (int i = 0; i < 8; ++i) rows[i] = V::load_f2(row[i] + 8 * b, row[i + 8] + 8 * b);
    V::transpose8x2(rows, s);
    const int nb = blk_len[b];
    F bm = s[0];
    for (int u = 1; u < nb; ++u) bm = V::max_f(bm, s[u]);  // exact: any order
    const F c = V::select_gt(bm, m, V::fixed_exp(V::sub(m, bm)), one);
    sum = V::mul(sum, c);
    m = V::select_gt(bm, m, bm, m);
    F p[8];
    PC_UNROLL for (int u = 0; u < 8; ++u) p[u] = V::fixed_exp(V::sub(s[u], m));
    for (int u = 0; u < nb; ++u) sum = V::add(sum, p[u]);
    V::transpose8x2(p, rows);
    PC_UNROLL for (int i = 0; i < 8; ++i) {
      _mm256_storeu_ps(row[i] + 8 * b, V::lo8(rows[i]));
      _mm256_storeu_ps(row[i + 8] + 8 * b, V::hi8(rows[i]));
    }
    V::storeu_f(cv, c);
    PC_UNROLL for (int i = 0; i < 16; ++i) cf[qs[i] * kAttnChunkBlocks + b] = cv[i];
  }
  V::storeu_f(mv, m);
  V::storeu_f(sv, sum);
  PC_UNROLL for (int i = 0; i < 16; ++i) {
    M[qs[i]] = mv[i];
    S[qs[i]] = sv[i];
  }
}

// AttnTileSet::softmax8: softmax_x8's steps (paged_attention_avx2.cc) for
// 8 queries, a lane per query and two blocks a vector (lanes 0-7 block b,
// 8-15 block b + 1, when the two are the same length; else one block): the
// two blocks' maxima at once, then the running maximum through b and b + 1
// (8 lanes each), the two blocks' factors c and their exps in 16 lanes, and
// S = S * c, S = S + p_t through block b, then block b + 1 — each lane
// exactly the operations of the one-query path, with half the exps and
// transposes of 8 lanes a block (a decode token's group of 8 query heads).
template <class V>
__attribute__((noinline)) void softmax8x2(const int* qs, float* sc, float* cf, float* M, float* S,
                                          const int* blk_len, int n_blk) {
  using F = typename V::F;
  alignas(32) float mv[8], sv[8];
  alignas(64) float cv[16];
  PC_UNROLL for (int i = 0; i < 8; ++i) {
    mv[i] = M[qs[i]];
    sv[i] = S[qs[i]];
  }
  __m256 m = _mm256_load_ps(mv), sum = _mm256_load_ps(sv);
  const F one = V::set1_f(1.f);
  float* row[8];
  PC_UNROLL for (int i = 0; i < 8; ++i) row[i] = sc + qs[i] * kAttnChunkSlots;
  for (int b = 0; b < n_blk;) {
    const bool two = b + 1 < n_blk && blk_len[b + 1] == blk_len[b];
    const int b1 = two ? b + 1 : b, nb = blk_len[b];
    F rows[8], s[8];
    PC_UNROLL for (int i = 0; i < 8; ++i) rows[i] = V::load_f2(row[i] + 8 * b, row[i] + 8 * b1);
    V::transpose8x2(rows, s);
    F bm = s[0];
    for (int u = 1; u < nb; ++u) bm = V::max_f(bm, s[u]);  // exact: any order
    const __m256 bm0 = V::lo8(bm), bm1 = V::hi8(bm);
    const __m256 m1 = _mm256_blendv_ps(m, bm0, _mm256_cmp_ps(bm0, m, _CMP_GT_OQ));
    const __m256 m2 = two ? _mm256_blendv_ps(m1, bm1, _mm256_cmp_ps(bm1, m1, _CMP_GT_OQ)) : m1;
    const F prev = V::join_f(m, m1), run = V::join_f(m1, m2);
    const F c = V::select_gt(bm, prev, V::fixed_exp(V::sub(prev, bm)), one);
    F p[8];
    PC_UNROLL for (int u = 0; u < 8; ++u) p[u] = V::fixed_exp(V::sub(s[u], run));
    sum = _mm256_mul_ps(sum, V::lo8(c));
    for (int u = 0; u < nb; ++u) sum = _mm256_add_ps(sum, V::lo8(p[u]));
    if (two) {
      sum = _mm256_mul_ps(sum, V::hi8(c));
      for (int u = 0; u < nb; ++u) sum = _mm256_add_ps(sum, V::hi8(p[u]));
    }
    V::transpose8x2(p, rows);
    V::storeu_f(cv, c);
    PC_UNROLL for (int i = 0; i < 8; ++i) {
      if (two) V::storeu_f(row[i] + 8 * b, rows[i]);  // (blocks b and b + 1 adjacent in a row)
      else _mm256_storeu_ps(row[i] + 8 * b, V::lo8(rows[i]));
      cf[qs[i] * kAttnChunkBlocks + b] = cv[i];
      if (two) cf[qs[i] * kAttnChunkBlocks + b + 1] = cv[8 + i];
    }
    m = m2;
    b += two ? 2 : 1;
  }
  _mm256_store_ps(mv, m);
  _mm256_store_ps(sv, sum);
  PC_UNROLL for (int i = 0; i < 8; ++i) {
    M[qs[i]] = mv[i];
    S[qs[i]] = sv[i];
  }
}

// AttnTileSet::softmax_rows: the same steps for n queries, one at a time,
// a lane per slot. Per query: the block maxima (over each block's blk_len
// slots, in slot order as softmax_x8 takes them), the running maximum block
// by block, the factors c = exp(M - m) of the blocks where it grew (8 lanes,
// one per block, else 1), the exps p_t = exp(s_t - M) two blocks a vector
// (M the running maximum after the slot's block); then, 4 queries at a
// time, S = S * c and S = S + p_t slot by slot. Each value is the one-query path's: the same
// operations on the same operands, only in other lanes.
template <class V>
__attribute__((noinline)) void softmax_rows16(const int* qs, int n, float* sc, float* cf, float* M, float* S,
                                              const int* blk_len, int n_blk) {
  using F = typename V::F;
  for (int k = 0; k < n; ++k) {
    const int qi = qs[k];
    float* row = sc + qi * kAttnChunkSlots;
    float* c = cf + qi * kAttnChunkBlocks;
    alignas(64) float prev[16] = {}, bmax[16] = {}, run[kAttnChunkBlocks];
    float m = M[qi];
    for (int b = 0; b < n_blk; ++b) {
      const float* s = row + 8 * b;
      float bm = s[0];
      for (int u = 1; u < blk_len[b]; ++u) bm = bm > s[u] ? bm : s[u];  // (vmaxps's operand order)
      prev[b] = m;
      bmax[b] = bm;
      m = bm > m ? bm : m;
      run[b] = m;
    }
    // c: lanes b < n_blk; the others compute exp(0 - 0) and are not stored
    alignas(64) float cv[16];
    const F pv = V::loadu_f(prev), bv = V::loadu_f(bmax);
    V::storeu_f(cv, V::select_gt(bv, pv, V::fixed_exp(V::sub(pv, bv)), V::set1_f(1.f)));
    for (int b = 0; b < n_blk; b += 2) {
      // (b + 1 = n_blk: the upper lanes, the next block's scores or unused
      // scratch, are left as they are)
      const F e = V::fixed_exp(V::sub(V::loadu_f(row + 8 * b), V::set2_f(run[b], b + 1 < n_blk ? run[b + 1] : run[b])));
      if (b + 1 < n_blk) V::storeu_f(row + 8 * b, e);
      else _mm256_storeu_ps(row + 8 * b, V::lo8(e));
    }
    for (int b = 0; b < n_blk; ++b) c[b] = cv[b];
    M[qi] = m;
  }
  // The running sums, a chain of adds each: 4 queries at a time so that 4
  // chains are in flight (the last group repeats its last query: the same
  // operations, the same value stored again).
  for (int k0 = 0; k0 < n; k0 += 4) {
    const float* row[4];
    const float* c[4];
    float sum[4];
    int q[4];
    PC_UNROLL for (int i = 0; i < 4; ++i) {
      q[i] = qs[k0 + i < n ? k0 + i : n - 1];
      row[i] = sc + q[i] * kAttnChunkSlots;
      c[i] = cf + q[i] * kAttnChunkBlocks;
      sum[i] = S[q[i]];
    }
    for (int b = 0; b < n_blk; ++b) {
      PC_UNROLL for (int i = 0; i < 4; ++i) sum[i] = sum[i] * c[i][b];
      for (int u = 0; u < blk_len[b]; ++u) PC_UNROLL for (int i = 0; i < 4; ++i) sum[i] = sum[i] + row[i][8 * b + u];
    }
    PC_UNROLL for (int i = 0; i < 4; ++i) S[q[i]] = sum[i];
  }
}

// AttnTileSet::prep_k for the 16-lane tiles: each slot's levels plus 128 as
// unsigned bytes, 4 dimensions to an int32 lane, a lane per slot
// ([hd/4][8], AttnKeysQ): per quantization block of 32, the 8 rows' 8 dwords
// transposed (kv_block_levels.h gives the rows' levels and scales); heads of
// 8 or 16 (one block a row) through kv_row_levels().
template <KvType Q>
void prepare_keys_q4(const uint8_t* rows, size_t rb, int n, int hd, int32_t* quads, float* d) {
  if (hd % 32 != 0) {
    int8_t lv[16] = {};
    float sc = 0.f;
    for (int u = 0; u < 8; ++u) {
      if (u < n) kv_row_levels(Q, rows + u * rb, hd, lv, &sc);
      for (int g = 0; g < hd / 4; ++g) {
        uint32_t w = 0;
        for (int e = 0; e < 4; ++e) w |= uint32_t(uint8_t((u < n ? lv[4 * g + e] : 0) + 128)) << (8 * e);
        quads[g * 8 + u] = int32_t(w);
      }
      d[u] = u < n ? sc : 0.f;
    }
    return;
  }
  const __m256i bias = _mm256_set1_epi8(int8_t(0x80));
  for (int qb = 0; qb < hd / 32; ++qb) {
    __m256i x[8], t[8], v[8];
    _mm256_storeu_ps(d + 8 * qb, kvq_block_levels<Q>(rows, rb, n, qb, x));
    // 8 × 8 dwords transposed: out[g] lane u = x[u] dword g
    PC_UNROLL for (int i = 0; i < 4; ++i) {
      t[2 * i] = _mm256_unpacklo_epi32(x[2 * i], x[2 * i + 1]);
      t[2 * i + 1] = _mm256_unpackhi_epi32(x[2 * i], x[2 * i + 1]);
    }
    PC_UNROLL for (int h = 0; h < 2; ++h) {
      const __m256i* th = t + 4 * h;
      v[4 * h + 0] = _mm256_unpacklo_epi64(th[0], th[2]);
      v[4 * h + 1] = _mm256_unpackhi_epi64(th[0], th[2]);
      v[4 * h + 2] = _mm256_unpacklo_epi64(th[1], th[3]);
      v[4 * h + 3] = _mm256_unpackhi_epi64(th[1], th[3]);
    }
    int32_t* o = quads + qb * 8 * 8;
    PC_UNROLL for (int g = 0; g < 4; ++g) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 8 * g),
                          _mm256_xor_si256(bias, _mm256_permute2x128_si256(v[g], v[4 + g], 0x20)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 8 * (g + 4)),
                          _mm256_xor_si256(bias, _mm256_permute2x128_si256(v[g], v[4 + g], 0x31)));
    }
  }
}

void prepare_keys_q4(KvType t, const uint8_t* rows, size_t rb, int n, int hd, int32_t* quads, float* d) {
  if (t == KvType::kQ8_0) prepare_keys_q4<KvType::kQ8_0>(rows, rb, n, hd, quads, d);
  else prepare_keys_q4<KvType::kQ4_0>(rows, rb, n, hd, quads, d);
}

// AttnTileSet::qscore on 16 lanes (two prepared blocks a vector, as the
// scores above): per quantization block the integer dot of the query's levels
// with K's, by vpdpbusd on K's levels plus 128 (unsigned bytes) and the
// query's lo and hi bytes (AttnQueryQ): 256 * sum(k'·hi) + sum(k'·lo) - corr
// is the exact dot (no term leaves int32); then r = fma(float(dot), d_k * d_q,
// r); times scale. Each lane the AVX2 qscore_tile's integers and operations.
template <class V, int NV, int QT, int KB>
__attribute__((noinline)) void qscore_tile16(const AttnQueryQ* qv, const AttnKeysQ* kb, float scale,
                                             float* const* sc, AttnPrefetch* pf) {
  AttnPrefetchCursor pfc(pf);
  using F = typename V::F;
  using I = typename V::I;
  constexpr int hd = 8 * NV, B = hd % 32 == 0 ? 32 : hd, NB = hd / B, GB = B / 4, KP = (KB + 1) / 2;
  F r[QT][KP];
  PC_UNROLL for (int i = 0; i < QT; ++i) PC_UNROLL for (int j = 0; j < KP; ++j) r[i][j] = V::zero_f();
  const AttnKeysQ* k2[KP][2];
  PC_UNROLL for (int j = 0; j < KP; ++j) {
    k2[j][0] = kb + 2 * j;
    k2[j][1] = kb + (2 * j + 1 < KB ? 2 * j + 1 : 2 * j);  // (past the last block: never stored)
  }
  for (int qb = 0; qb < NB; ++qb) {
    I lo[QT][KP], hi[QT][KP];
    PC_UNROLL for (int i = 0; i < QT; ++i) {
      const I c = V::set1_i(-qv[i].corr[qb]);
      PC_UNROLL for (int j = 0; j < KP; ++j) {
        lo[i][j] = c;
        hi[i][j] = V::zero_i();
      }
    }
    PC_UNROLL for (int g = 0; g < GB; ++g) {
      if (g % 2 == 0) {
        pfc.step();
        pfc.skip(1);
      }
      const int gg = qb * GB + g;
      I kv[KP];
      PC_UNROLL for (int j = 0; j < KP; ++j)
        kv[j] = V::load_i2(reinterpret_cast<const __m256i*>(k2[j][0]->pairs + 8 * gg),
                           reinterpret_cast<const __m256i*>(k2[j][1]->pairs + 8 * gg));
      PC_UNROLL for (int i = 0; i < QT; ++i) {
        const I ql = V::set1_i(qv[i].lohi[2 * gg]), qh = V::set1_i(qv[i].lohi[2 * gg + 1]);
        PC_UNROLL for (int j = 0; j < KP; ++j) {
          lo[i][j] = V::dpbusd(lo[i][j], kv[j], ql);
          hi[i][j] = V::dpbusd(hi[i][j], kv[j], qh);
        }
      }
    }
    PC_UNROLL for (int j = 0; j < KP; ++j) {
      const F kd = V::load_f2(k2[j][0]->d + 8 * qb, k2[j][1]->d + 8 * qb);
      PC_UNROLL for (int i = 0; i < QT; ++i) {
        const I dot = V::add32(V::template slli32<8>(hi[i][j]), lo[i][j]);
        r[i][j] = V::fmadd(V::cvt(dot), V::mul(kd, V::set1_f(qv[i].d[qb])), r[i][j]);
      }
    }
  }
  const F sv = V::set1_f(scale);
  PC_UNROLL for (int i = 0; i < QT; ++i)
    PC_UNROLL for (int j = 0; j < KP; ++j) {
      const F o = V::mul(r[i][j], sv);
      _mm256_storeu_ps(sc[i] + 16 * j, V::lo8(o));
      if (2 * j + 1 < KB) _mm256_storeu_ps(sc[i] + 16 * j + 8, V::hi8(o));
    }
}

// AttnTileSet::dequant_v on 16 lanes: each block's 32 levels in two vectors,
// times its scale.
template <class V>
void dequant_v16(KvType t, const uint8_t* rows, size_t rb, int n, int hd, float* out) {
  const __m128i mask = _mm_set1_epi8(15), eight = _mm_set1_epi8(8);
  for (int u = 0; u < n; ++u) {
    const uint8_t* r = rows + u * rb;
    float* o = out + size_t(u) * hd;
    for (int b = 0; b < hd / 32; ++b, o += 32) {
      uint16_t dh;
      std::memcpy(&dh, r, 2);
      const typename V::F d = V::set1_f(_cvtsh_ss(dh));
      __m128i lo, hi;
      if (t == KvType::kQ8_0) {
        lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r + 2));
        hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r + 18));
        r += 34;
      } else {  // q4_0: values 0-15 the low nibbles, 16-31 the high ones
        const __m128i qs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r + 2));
        lo = _mm_sub_epi8(_mm_and_si128(qs, mask), eight);
        hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(qs, 4), mask), eight);
        r += 18;
      }
      V::storeu_f(o, V::mul(d, V::cvt_i8(lo)));
      V::storeu_f(o + 16, V::mul(d, V::cvt_i8(hi)));
    }
  }
}

// The 16-lane tiles for a head size (nullptr: none for it).
template <class V>
const AttnTiles* attn_tiles16(int head_dim) {
  const AttnTiles* tiles = nullptr;
  with_head_vectors(head_dim, [&](auto nv) {
    constexpr int NV = decltype(nv)::value, DV = attn_update_vectors(NV);
    if constexpr (DV % 2 == 0) {
      constexpr int DV16 = NV % 8 == 0 ? 8 : DV;
      static const AttnTiles t = [] {
        AttnTiles x = make_attn_tiles<kAttnMaxQT, kAttnMaxKB, kAttnMaxQT>(
            [](auto sh) { return score_tile16<V, NV, decltype(sh)::kQT, decltype(sh)::kKB, typename decltype(sh)::Elem>; },
            [](auto qt) {
              return update_tile16<V, NV, decltype(qt)::kQT, DV16, typename decltype(qt)::Elem>;
            });
        x.f16.dv = x.f32.dv = DV16;
        fill_attn_qscore<kAttnQuantMaxQT>(x.f32, [](auto sh) { return qscore_tile16<V, NV, decltype(sh)::kQT, decltype(sh)::kKB>; });
        x.f32.prep_k = prepare_keys_q4;
        x.f32.byte_query = true;
        if constexpr (NV % 4 == 0 && DV == 4)
          fill_attn_vupdate<kAttnMaxQT>(x.f32, DV16, [](auto qt, auto vt) {
            return update_tile16<V, NV, decltype(qt)::kQT, DV16, uint8_t, decltype(vt)::value>;
          });
        // A decode token's group of 8 in two tiles that each convert the V
        // rows they read: 1.11-1.2x the dequantized copy read by two tiles
        // (tinyllama's heads over 4096 q8_0 / q4_0 slots, one thread, Zen 5).
        x.f32.vtiles = 2;
        x.f32.dequant_v = dequant_v16<V>;
        x.f16.softmax16 = x.f32.softmax16 = softmax16<V>;
        x.f16.softmax8 = x.f32.softmax8 = softmax8x2<V>;
        x.f16.softmax_rows = x.f32.softmax_rows = softmax_rows16<V>;
        return x;
      }();
      tiles = &t;
    }
  });
  return tiles;
}

}  // namespace
}  // namespace pc
