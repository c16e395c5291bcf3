// AVX2 + FMA + F16C attention path: the arithmetic of paged_attention.cc (the
// query's F16 rounding done by vcvtps2ph). Only this file is compiled for AVX2 (the
// target pragma after the includes), so the rest of the binary stays portable;
// paged_attention() / paged_attention_tokens() select it at run time.
//
// Two kernels, both the block-wise arithmetic of paged_attention.cc:
//  * paged_attention_avx2: one token's query heads (any head_dim % 8 == 0).
//  * tokens_kernel<NV>: up to kAttnMaxTokens tokens × group heads of one KV
//    head, in chunks of up to 4 blocks of visible slots: K/V converted to
//    float once per chunk for all queries; scores in register tiles of 3
//    queries × 4 slots (each K load serves 3 queries; the dot's 8-lane chains
//    and pairings per pair); the softmax steps 8 queries at a time with a lane
//    per query (fixed_exp8: the operations of fixed_exp); the accumulators in
//    tiles of 3 queries × 4 vectors (each V load serves 3 queries). A query's
//    operations and their order are exactly those of the one-token kernel, so
//    the grouping never changes a bit.
#include <bit>
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

}  // namespace

#define PC_UNROLL _Pragma("GCC unroll 16")

namespace {

inline __m256 round_f16(__m256 v) {
  return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

// hsum256 of eight vectors at once: lane u of the result is hsum256(v[u]),
// computed with exactly the same pairings ((v0+v4)+(v2+v6)) + ((v1+v5)+(v3+v7)).
inline __m256 hsum256_x8(const __m256 v[8]) {
  __m256 t[4];
  PC_UNROLL for (int i = 0; i < 4; ++i) {  // t[i] = (lo+hi of v[2i] | lo+hi of v[2i+1])
    t[i] = _mm256_add_ps(_mm256_permute2f128_ps(v[2 * i], v[2 * i + 1], 0x20),
                         _mm256_permute2f128_ps(v[2 * i], v[2 * i + 1], 0x31));
  }
  // u = (x0+x2, x1+x3) per vector: [v0: 2 | v2: 2 | v1: 2 | v3: 2] and likewise v4..v7
  const __m256 u0 = _mm256_add_ps(_mm256_shuffle_ps(t[0], t[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                  _mm256_shuffle_ps(t[0], t[1], _MM_SHUFFLE(3, 2, 3, 2)));
  const __m256 u1 = _mm256_add_ps(_mm256_shuffle_ps(t[2], t[3], _MM_SHUFFLE(1, 0, 1, 0)),
                                  _mm256_shuffle_ps(t[2], t[3], _MM_SHUFFLE(3, 2, 3, 2)));
  // lanes: (v0, v2, v4, v6 | v1, v3, v5, v7)
  const __m256 r = _mm256_add_ps(_mm256_shuffle_ps(u0, u1, _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm256_shuffle_ps(u0, u1, _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm256_permutevar8x32_ps(r, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// One block of the arithmetic for one query: scores sc (lanes >= nb unused),
// running max m, sum S and accumulator (rescaled via `rescale` when the max
// grows); leaves the block's exps in ex[0..nb).
template <class Rescale>
inline __m256 block_softmax(__m256 sc, int nb, float& m, float& S, float* ex, Rescale rescale) {
  const __m256 live = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(nb), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
  __m256 mx = _mm256_blendv_ps(_mm256_set1_ps(-std::numeric_limits<float>::infinity()), sc, live);
  mx = _mm256_max_ps(mx, _mm256_permute2f128_ps(mx, mx, 1));
  mx = _mm256_max_ps(mx, _mm256_shuffle_ps(mx, mx, _MM_SHUFFLE(1, 0, 3, 2)));
  mx = _mm256_max_ps(mx, _mm256_shuffle_ps(mx, mx, _MM_SHUFFLE(2, 3, 0, 1)));
  const float bm = _mm256_cvtss_f32(mx);  // max is exact: any order
  if (bm > m) {
    const __m256 c = fixed_exp8(_mm256_set1_ps(m - bm));
    S = S * _mm256_cvtss_f32(c);
    rescale(c);
    m = bm;
  }
  const __m256 e = fixed_exp8(_mm256_sub_ps(sc, _mm256_set1_ps(m)));
  _mm256_storeu_ps(ex, e);
  return e;
}

}  // namespace


void paged_attention_avx2(const PagedAttentionArgs& a, const float* q, int group, float* out,
                          float* scratch) {
  const int hd = a.head_dim;
  float* q16 = scratch;                     // [group][hd] query rounded to F16
  float* acc = q16 + size_t(group) * hd;    // [group][hd]
  float* M = acc + size_t(group) * hd;      // [group]
  float* S = M + group;                     // [group]
  for (int j = 0; j < group; ++j) {
    for (int d = 0; d < hd; d += 8) {
      _mm256_storeu_ps(q16 + j * hd + d, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(q + size_t(j) * hd + d),
                                                                          _MM_FROUND_TO_NEAREST_INT)));
      _mm256_storeu_ps(acc + j * hd + d, _mm256_setzero_ps());
    }
    M[j] = -std::numeric_limits<float>::infinity();
    S[j] = 0.f;
  }
  for_each_key_block(a, a.n_ctx, [&](const uint16_t* K, const uint16_t* V, int b, int nb) {
    for (int j = 0; j < group; ++j) {
      const float* qj = q16 + j * hd;
      float* aj = acc + j * hd;
      alignas(32) float s[8] = {};
      for (int u = 0; u < nb; ++u) {
        const uint16_t* Kt = K + size_t(b + u) * hd;
        __m256 dot = _mm256_setzero_ps();
        for (int d = 0; d < hd; d += 8) dot = _mm256_fmadd_ps(_mm256_loadu_ps(qj + d), load_f16(Kt + d), dot);
        s[u] = hsum256(dot) * a.scale;
      }
      block_softmax(_mm256_loadu_ps(s), nb, M[j], S[j], s, [&](__m256 c) {
        for (int d = 0; d < hd; d += 8) _mm256_storeu_ps(aj + d, _mm256_mul_ps(_mm256_loadu_ps(aj + d), c));
      });
      for (int u = 0; u < nb; ++u) {
        S[j] = S[j] + s[u];
        const uint16_t* Vt = V + size_t(b + u) * hd;
        const __m256 pv = _mm256_set1_ps(s[u]);
        for (int d = 0; d < hd; d += 8)
          _mm256_storeu_ps(aj + d, _mm256_fmadd_ps(load_f16(Vt + d), pv, _mm256_loadu_ps(aj + d)));
      }
    }
  });
  for (int j = 0; j < group; ++j) {
    const __m256 inv = _mm256_set1_ps(1.f / S[j]);
    for (int d = 0; d < hd; d += 8)
      _mm256_storeu_ps(out + size_t(j) * hd + d, _mm256_mul_ps(_mm256_loadu_ps(acc + j * hd + d), inv));
  }
}

namespace {

// Sums of 4 vectors with hsum256's pairings, ((v0+v4)+(v2+v6)) + ((v1+v5)+(v3+v7)):
// lanes 0..3 of the result are the sums of v[0..3] (lanes 4..7: don't care).
inline __m128 hsum256_x4(__m256 a, __m256 b, __m256 c, __m256 d) {
  // (a0+a4, a1+a5, a2+a6, a3+a7 | b0+b4, ...), likewise c, d
  const __m256 ab = _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
  const __m256 cd = _mm256_add_ps(_mm256_permute2f128_ps(c, d, 0x20), _mm256_permute2f128_ps(c, d, 0x31));
  // (a04+a26, a15+a37, c04+c26, c15+c37 | b.., b.., d.., d..)
  const __m256 u = _mm256_add_ps(_mm256_shuffle_ps(ab, cd, _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm256_shuffle_ps(ab, cd, _MM_SHUFFLE(3, 2, 3, 2)));
  // (a, c, a, c | b, d, b, d)
  const __m256 r = _mm256_add_ps(_mm256_shuffle_ps(u, u, _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm256_shuffle_ps(u, u, _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm_unpacklo_ps(_mm256_castps256_ps128(r), _mm256_extractf128_ps(r, 1));  // (a, b, c, d)
}

constexpr int kChunkBlocks = 4;                  // blocks of 8 slots per chunk
constexpr int kChunkSlots = 8 * kChunkBlocks;

// Scores of QT queries × 4 slots of the chunk (kf rows t..t+3): the dot of
// paged_attention.cc per pair (an 8-lane FMA chain over head_dim, then the
// fixed pairings), times scale; each K vector loaded once for the QT queries.
// (Not inlined: inlined into the loop over t, GCC turns each of the 4·NV
// load addresses into an induction variable of its own and spills them.)
template <int NV, int QT>
__attribute__((noinline)) void score_tile(const float* const* qv, const float* kf, int t, float scale, float* const* sc) {
  constexpr int hd = 8 * NV;
  const float* kt = kf + t * hd;
  __m256 d[QT][4];
  PC_UNROLL for (int i = 0; i < QT; ++i) PC_UNROLL for (int u = 0; u < 4; ++u) d[i][u] = _mm256_setzero_ps();
  PC_UNROLL for (int v = 0; v < NV; ++v) {
    __m256 x[QT];
    PC_UNROLL for (int i = 0; i < QT; ++i) x[i] = _mm256_loadu_ps(qv[i] + 8 * v);
    PC_UNROLL for (int u = 0; u < 4; ++u) {
      const __m256 k = _mm256_loadu_ps(kt + u * hd + 8 * v);
      PC_UNROLL for (int i = 0; i < QT; ++i) d[i][u] = _mm256_fmadd_ps(x[i], k, d[i][u]);
    }
  }
  PC_UNROLL for (int i = 0; i < QT; ++i)
    _mm_storeu_ps(sc[i] + t, _mm_mul_ps(hsum256_x4(d[i][0], d[i][1], d[i][2], d[i][3]), _mm256_castps256_ps128(_mm256_set1_ps(scale))));
}

// Accumulator update of QT queries that see every slot of the chunk, for the
// DV vectors [v0, v0 + DV) of head_dim: per block, the rescale (when a query's
// maximum grew), then acc = fma(V[t], p_t, acc) slot by slot; each V vector
// loaded once for the QT queries.
template <int NV, int QT, int DV>
__attribute__((noinline)) void update_tile(float* const* acc, const float* const* p, const float* const* c, const float* vf,
                        const int* blk_len, int n_blk, int v0) {
  constexpr int hd = 8 * NV;
  __m256 a[QT][DV];
  PC_UNROLL for (int i = 0; i < QT; ++i) PC_UNROLL for (int j = 0; j < DV; ++j) a[i][j] = _mm256_loadu_ps(acc[i] + 8 * (v0 + j));
  for (int b = 0; b < n_blk; ++b) {
    bool rescale = false;
    PC_UNROLL for (int i = 0; i < QT; ++i) rescale |= c[i][b] != 1.f;
    if (rescale) {
      PC_UNROLL for (int i = 0; i < QT; ++i) {
        const __m256 ci = _mm256_broadcast_ss(c[i] + b);
        PC_UNROLL for (int j = 0; j < DV; ++j) a[i][j] = _mm256_mul_ps(a[i][j], ci);
      }
    }
    for (int u = 0; u < blk_len[b]; ++u) {
      const int t = 8 * b + u;
      __m256 pv[QT];
      PC_UNROLL for (int i = 0; i < QT; ++i) pv[i] = _mm256_broadcast_ss(p[i] + t);
      const float* vt = vf + t * hd + 8 * v0;
      PC_UNROLL for (int j = 0; j < DV; ++j) {
        const __m256 vv = _mm256_loadu_ps(vt + 8 * j);
        PC_UNROLL for (int i = 0; i < QT; ++i) a[i][j] = _mm256_fmadd_ps(vv, pv[i], a[i][j]);
      }
    }
  }
  PC_UNROLL for (int i = 0; i < QT; ++i) PC_UNROLL for (int j = 0; j < DV; ++j) _mm256_storeu_ps(acc[i] + 8 * (v0 + j), a[i][j]);
}

// 8×8 transpose of floats: out[j] lane i = in[i] lane j.
inline void transpose8_ps(const __m256 in[8], __m256 out[8]) {
  __m256 t[8], u[8];
  PC_UNROLL for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(in[2 * i], in[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(in[2 * i], in[2 * i + 1]);
  }
  PC_UNROLL for (int h = 0; h < 2; ++h) {
    const __m256* th = t + 4 * h;
    u[4 * h + 0] = _mm256_shuffle_ps(th[0], th[2], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * h + 1] = _mm256_shuffle_ps(th[0], th[2], _MM_SHUFFLE(3, 2, 3, 2));
    u[4 * h + 2] = _mm256_shuffle_ps(th[1], th[3], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * h + 3] = _mm256_shuffle_ps(th[1], th[3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  PC_UNROLL for (int p = 0; p < 4; ++p) {
    out[p] = _mm256_permute2f128_ps(u[p], u[4 + p], 0x20);
    out[p + 4] = _mm256_permute2f128_ps(u[p], u[4 + p], 0x31);
  }
}

// Softmax steps of 8 queries that see every slot of the chunk, a lane per
// query (the scores of a block transposed to a vector per slot): per block the
// maximum, c = exp(M - m) where it grew (else 1), S = S * c, the exps
// p_t = exp(s_t - M) and S = S + p_t slot by slot — each lane exactly the
// operations of the one-query path.
__attribute__((noinline)) void softmax_x8(const int* qs, float* sc, float* cf, float* M, float* S,
                                          const int* blk_len, int n_blk) {
  alignas(32) float mv[8], sv[8], cv[8];
  PC_UNROLL for (int i = 0; i < 8; ++i) {
    mv[i] = M[qs[i]];
    sv[i] = S[qs[i]];
  }
  __m256 m = _mm256_load_ps(mv), sum = _mm256_load_ps(sv);
  const __m256 one = _mm256_set1_ps(1.f);
  for (int b = 0; b < n_blk; ++b) {
    __m256 rows[8], s[8];
    PC_UNROLL for (int i = 0; i < 8; ++i) rows[i] = _mm256_loadu_ps(sc + qs[i] * kChunkSlots + 8 * b);
    transpose8_ps(rows, s);
    const int nb = blk_len[b];
    __m256 bm = s[0];
    for (int u = 1; u < nb; ++u) bm = _mm256_max_ps(bm, s[u]);  // exact: any order
    const __m256 grew = _mm256_cmp_ps(bm, m, _CMP_GT_OQ);
    const __m256 c = _mm256_blendv_ps(one, fixed_exp8(_mm256_sub_ps(m, bm)), grew);
    sum = _mm256_mul_ps(sum, c);
    m = _mm256_blendv_ps(m, bm, grew);
    __m256 p[8];
    PC_UNROLL for (int u = 0; u < 8; ++u) p[u] = fixed_exp8(_mm256_sub_ps(s[u], m));
    for (int u = 0; u < nb; ++u) sum = _mm256_add_ps(sum, p[u]);
    transpose8_ps(p, rows);
    PC_UNROLL for (int i = 0; i < 8; ++i) _mm256_storeu_ps(sc + qs[i] * kChunkSlots + 8 * b, rows[i]);
    _mm256_store_ps(cv, c);
    PC_UNROLL for (int i = 0; i < 8; ++i) cf[qs[i] * kChunkBlocks + b] = cv[i];
  }
  _mm256_store_ps(mv, m);
  _mm256_store_ps(sv, sum);
  PC_UNROLL for (int i = 0; i < 8; ++i) {
    M[qs[i]] = mv[i];
    S[qs[i]] = sv[i];
  }
}

// NV = head_dim / 8 vectors per head. The visible slots are taken in chunks of
// up to kChunkBlocks blocks (a block: up to 8 slots of one page, as
// paged_attention.cc defines them; a chunk may span pages). Per chunk:
//   1. K and V of the chunk's slots -> float (kf, vf; each block padded to 8
//      slots with zero keys), once for all queries;
//   2. scores of every query that sees part of the chunk, in tiles of 3
//      queries × 4 slots (register blocking: each K load serves 3 queries);
//   3. per query and visible block, in order: the block maximum, the rescale
//      factor c (1 when the maximum did not grow; multiplying by 1 is exact),
//      the exps p (in place of the scores), S = S * c, S = S + p_t;
//   4. the accumulators: queries that see the whole chunk in tiles of 3
//      queries × DV vectors (each V load serves 3 queries); the others (the
//      causal diagonal) one at a time over their visible slots.
// Every query's operations and their order are those of paged_attention.cc.
template <int NV>
void tokens_kernel(const PagedAttentionArgs& a, int group, const PagedAttentionTokens& tk,
                   float* scratch) {
  constexpr int hd = 8 * NV;
  constexpr int DV = NV % 4 == 0 ? 4 : 2;
  constexpr int QT = 3;
  const int nq = tk.n_tok * group;
  const size_t slab = size_t(a.kv_head) * a.page_size * hd;
  float* q16 = scratch;                          // [nq][hd] query rounded to F16
  float* acc = q16 + size_t(nq) * hd;            // [nq][hd]
  float* M = acc + size_t(nq) * hd;              // [nq]
  float* S = M + nq;                             // [nq]
  float* kf = S + nq;                            // [kChunkSlots][hd]
  float* vf = kf + size_t(kChunkSlots) * hd;     // [kChunkSlots][hd]
  float* sc = vf + size_t(kChunkSlots) * hd;     // [nq][kChunkSlots] scores, then exps
  float* cf = sc + size_t(nq) * kChunkSlots;     // [nq][kChunkBlocks] rescale factors
  int* ctx = reinterpret_cast<int*>(cf + size_t(nq) * kChunkBlocks);  // [nq]
  int* live = ctx + nq;                          // [nq] queries that see any of the chunk, then those that see all of it
  int* part = live + nq;                         // [nq] queries that see only part of it
  int n_max = 0;
  for (int qi = 0; qi < nq; ++qi) {
    ctx[qi] = tk.n_ctx[qi / group];
    n_max = ctx[qi] > n_max ? ctx[qi] : n_max;
    const float* src = tk.q + (qi / group) * tk.q_stride + (qi % group) * hd;
    PC_UNROLL for (int v = 0; v < NV; ++v) {
      _mm256_storeu_ps(q16 + qi * hd + 8 * v, round_f16(_mm256_loadu_ps(src + 8 * v)));
      _mm256_storeu_ps(acc + qi * hd + 8 * v, _mm256_setzero_ps());
    }
    M[qi] = -std::numeric_limits<float>::infinity();
    S[qi] = 0.f;
  }
  const float neg_inf = -std::numeric_limits<float>::infinity();

  int blk_pos[kChunkBlocks], blk_len[kChunkBlocks], n_blk = 0;
  auto run_chunk = [&] {
    const int first = blk_pos[0], end = blk_pos[n_blk - 1] + blk_len[n_blk - 1];
    // 2. scores of the queries that see any of it
    int n_live = 0, n_full = 0, n_part = 0;
    for (int qi = 0; qi < nq; ++qi)
      if (ctx[qi] > first) live[n_live++] = qi;
    for (int l = 0; l < n_live; l += QT) {
      const float* qv[QT];
      float* row[QT];
      const int n_here = n_live - l < QT ? n_live - l : QT;
      PC_UNROLL for (int i = 0; i < QT; ++i) {
        const int qi = live[l + (i < n_here ? i : 0)];
        qv[i] = q16 + qi * hd;
        row[i] = sc + qi * kChunkSlots;
      }
      for (int t = 0; t < 8 * n_blk; t += 4) {
        if (n_here == QT) score_tile<NV, QT>(qv, kf, t, a.scale, row);
        else if (n_here == 2) score_tile<NV, 2>(qv, kf, t, a.scale, row);
        else score_tile<NV, 1>(qv, kf, t, a.scale, row);
      }
    }
    // 3. softmax steps: the queries that see the whole chunk (live[0, n_full))
    // eight at a time with a lane per query, the others one at a time.
    for (int l = 0; l < n_live; ++l) {
      const int qi = live[l];
      if (ctx[qi] >= end) live[n_full++] = qi;  // (n_full <= l: entries already read)
      else part[n_part++] = qi;
    }
    int l8 = 0;
    for (; l8 + 8 <= n_full; l8 += 8) softmax_x8(live + l8, sc, cf, M, S, blk_len, n_blk);
    for (int r = 0; r < (n_full - l8) + n_part; ++r) {
      const int qi = r < n_full - l8 ? live[l8 + r] : part[r - (n_full - l8)];
      float* s = sc + qi * kChunkSlots;
      float* c = cf + qi * kChunkBlocks;
      float m = M[qi], sum = S[qi];
      for (int b = 0; b < n_blk; ++b) {
        const int vis = ctx[qi] - blk_pos[b];
        const int nb = vis < blk_len[b] ? vis : blk_len[b];
        if (nb <= 0) break;
        const __m256 livem = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(nb), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
        const __m256 sv = _mm256_loadu_ps(s + 8 * b);
        __m256 mx = _mm256_blendv_ps(_mm256_set1_ps(neg_inf), sv, livem);
        mx = _mm256_max_ps(mx, _mm256_permute2f128_ps(mx, mx, 1));
        mx = _mm256_max_ps(mx, _mm256_shuffle_ps(mx, mx, _MM_SHUFFLE(1, 0, 3, 2)));
        mx = _mm256_max_ps(mx, _mm256_shuffle_ps(mx, mx, _MM_SHUFFLE(2, 3, 0, 1)));
        const float bm = _mm256_cvtss_f32(mx);  // max is exact: any order
        c[b] = 1.f;
        if (bm > m) {
          c[b] = _mm256_cvtss_f32(fixed_exp8(_mm256_set1_ps(m - bm)));
          sum = sum * c[b];
          m = bm;
        }
        const __m256 e = fixed_exp8(_mm256_sub_ps(sv, _mm256_set1_ps(m)));
        _mm256_storeu_ps(s + 8 * b, e);
        for (int u = 0; u < nb; ++u) sum = sum + s[8 * b + u];
      }
      M[qi] = m;
      S[qi] = sum;
    }
    // 4a. accumulators of the queries that see the whole chunk
    for (int l = 0; l < n_full; l += QT) {
      const int n_here = n_full - l < QT ? n_full - l : QT;
      float* ap[QT];
      const float* pp[QT];
      const float* cp[QT];
      PC_UNROLL for (int i = 0; i < QT; ++i) {
        const int qi = live[l + (i < n_here ? i : 0)];
        ap[i] = acc + qi * hd;
        pp[i] = sc + qi * kChunkSlots;
        cp[i] = cf + qi * kChunkBlocks;
      }
      for (int v0 = 0; v0 < NV; v0 += DV) {
        if (n_here == QT) update_tile<NV, QT, DV>(ap, pp, cp, vf, blk_len, n_blk, v0);
        else if (n_here == 2) update_tile<NV, 2, DV>(ap, pp, cp, vf, blk_len, n_blk, v0);
        else update_tile<NV, 1, DV>(ap, pp, cp, vf, blk_len, n_blk, v0);
      }
    }
    // 4b. the others, each over its visible slots
    for (int r = 0; r < n_part; ++r) {
      const int qi = part[r];
      const float* p = sc + qi * kChunkSlots;
      const float* c = cf + qi * kChunkBlocks;
      __m256 ac[NV];
      PC_UNROLL for (int v = 0; v < NV; ++v) ac[v] = _mm256_loadu_ps(acc + qi * hd + 8 * v);
      for (int b = 0; b < n_blk; ++b) {
        const int vis = ctx[qi] - blk_pos[b];
        const int nb = vis < blk_len[b] ? vis : blk_len[b];
        if (nb <= 0) break;
        if (c[b] != 1.f) {
          const __m256 cv = _mm256_set1_ps(c[b]);
          PC_UNROLL for (int v = 0; v < NV; ++v) ac[v] = _mm256_mul_ps(ac[v], cv);
        }
        for (int u = 0; u < nb; ++u) {
          const int t = 8 * b + u;
          const __m256 pv = _mm256_broadcast_ss(p + t);
          PC_UNROLL for (int v = 0; v < NV; ++v) ac[v] = _mm256_fmadd_ps(_mm256_loadu_ps(vf + t * hd + 8 * v), pv, ac[v]);
        }
      }
      PC_UNROLL for (int v = 0; v < NV; ++v) _mm256_storeu_ps(acc + qi * hd + 8 * v, ac[v]);
    }
    n_blk = 0;
  };

  // 1. gather the visible blocks, page by page, into chunks
  for (int t0 = 0, p = 0; t0 < n_max; ++p) {
    const int pg = a.fills ? a.fills[p] : a.page_size;  // slots of this page
    const int nk = n_max - t0 < pg ? n_max - t0 : pg;
    const uint16_t* K = a.k_pages[p] + slab;
    const uint16_t* V = a.v_pages[p] + slab;
    for (int b = 0; b < nk; b += 8) {
      const int len = nk - b < 8 ? nk - b : 8;
      float* kd = kf + size_t(8 * n_blk) * hd;
      float* vd = vf + size_t(8 * n_blk) * hd;
      for (int u = 0; u < 8; ++u)
        PC_UNROLL for (int v = 0; v < NV; ++v) {
          const bool in = u < len;
          _mm256_storeu_ps(kd + u * hd + 8 * v, in ? load_f16(K + (b + u) * hd + 8 * v) : _mm256_setzero_ps());
          if (in) _mm256_storeu_ps(vd + u * hd + 8 * v, load_f16(V + (b + u) * hd + 8 * v));
        }
      blk_pos[n_blk] = t0 + b;
      blk_len[n_blk] = len;
      if (++n_blk == kChunkBlocks) run_chunk();
    }
    t0 += pg;
  }
  if (n_blk > 0) run_chunk();

  for (int qi = 0; qi < nq; ++qi) {
    const __m256 inv = _mm256_set1_ps(1.f / S[qi]);
    float* dst = tk.out + (qi / group) * tk.out_stride + (qi % group) * hd;
    PC_UNROLL for (int v = 0; v < NV; ++v)
      _mm256_storeu_ps(dst + 8 * v, _mm256_mul_ps(_mm256_loadu_ps(acc + qi * hd + 8 * v), inv));
  }
}

}  // namespace

bool paged_attention_tokens_avx2(const PagedAttentionArgs& a, int group,
                                 const PagedAttentionTokens& t, float* scratch) {
  switch (a.head_dim) {
    case 32: tokens_kernel<4>(a, group, t, scratch); return true;
    case 48: tokens_kernel<6>(a, group, t, scratch); return true;
    case 64: tokens_kernel<8>(a, group, t, scratch); return true;
    case 80: tokens_kernel<10>(a, group, t, scratch); return true;
    case 96: tokens_kernel<12>(a, group, t, scratch); return true;
    case 128: tokens_kernel<16>(a, group, t, scratch); return true;
    default: return false;
  }
}

}  // namespace pc
#pragma GCC pop_options

#else  // not x86-64: never called (cpu_level() is Scalar)

namespace pc {
void paged_attention_avx2(const PagedAttentionArgs&, const float*, int, float*, float*) {}
bool paged_attention_tokens_avx2(const PagedAttentionArgs&, int, const PagedAttentionTokens&,
                                 float*) {
  return false;
}
}  // namespace pc

#endif
