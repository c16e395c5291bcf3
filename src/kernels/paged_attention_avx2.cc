// AVX2 + FMA + F16C attention path: the arithmetic of paged_attention.cc (the
// query's F16 rounding done by vcvtps2ph). Only this file is compiled for AVX2 (the
// target pragma after the includes), so the rest of the binary stays portable;
// paged_attention() / paged_attention_tokens() select it at run time.
//
// Two kernels, both the block-wise arithmetic of paged_attention.cc:
//  * paged_attention_avx2: one token's query heads (any head_dim % 8 == 0).
//  * tokens_kernel<NV>: up to kAttnMaxTokens tokens × group heads of one KV
//    head, page by page: K/V converted to float once per page for all queries,
//    scores of a block's 8 keys at once (8 independent FMA chains, each the
//    dot of paged_attention.cc, then a transposed hsum with the same
//    pairings), the block's exps in one 8-lane call (fixed_exp8: the operations of
//    fixed_exp),
//    then the accumulator update key by key with the accumulator in registers.
//    A query's operations are exactly those of the one-token kernel, so the
//    grouping never changes a bit.
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

// NV = head_dim / 8 vectors per head. Per page:
//   1. K and V of the page's visible slots -> float (kf, vf), once for all queries;
//   2. per query and block of 8 slots: the scores (eight independent 8-lane
//      FMA chains over head_dim, a transposed hsum with the dot's pairings,
//      times scale), the block maximum and rescale, the block's exps, then the
//      accumulator update slot by slot with the accumulator in registers.
template <int NV>
void tokens_kernel(const PagedAttentionArgs& a, int group, const PagedAttentionTokens& tk,
                   float* scratch) {
  constexpr int hd = 8 * NV;
  const int P = a.page_size, Pr = (P + 7) & ~7;
  const int nq = tk.n_tok * group;
  const size_t slab = size_t(a.kv_head) * P * hd;
  float* q16 = scratch;                  // [nq][hd] query rounded to F16
  float* acc = q16 + size_t(nq) * hd;    // [nq][hd]
  float* M = acc + size_t(nq) * hd;      // [nq]
  float* S = M + nq;                     // [nq]
  float* ex = S + nq;                    // [8] exps of a block
  float* sc = ex + Pr;                   // [Pr] scores of one query over the page
  float* kf = ex + 3 * Pr;               // [Pr][hd]
  float* vf = kf + size_t(Pr) * hd;      // [Pr][hd]
  int n_max = 0;
  for (int i = 0; i < tk.n_tok; ++i) n_max = tk.n_ctx[i] > n_max ? tk.n_ctx[i] : n_max;
  for (int qi = 0; qi < nq; ++qi) {
    const float* src = tk.q + (qi / group) * tk.q_stride + (qi % group) * hd;
    PC_UNROLL for (int v = 0; v < NV; ++v) {
      _mm256_storeu_ps(q16 + qi * hd + 8 * v, round_f16(_mm256_loadu_ps(src + 8 * v)));
      _mm256_storeu_ps(acc + qi * hd + 8 * v, _mm256_setzero_ps());
    }
    M[qi] = -std::numeric_limits<float>::infinity();
    S[qi] = 0.f;
  }
  const __m256 scale = _mm256_set1_ps(a.scale);
  for (int t0 = 0, p = 0, pg = P; t0 < n_max; t0 += pg, ++p) {
    pg = a.fills ? a.fills[p] : P;  // slots of this page
    const int nk = n_max - t0 < pg ? n_max - t0 : pg;
    const uint16_t* K = a.k_pages[p] + slab;
    const uint16_t* V = a.v_pages[p] + slab;
    for (int t = 0; t < nk; ++t)
      PC_UNROLL for (int v = 0; v < NV; ++v) {
        _mm256_storeu_ps(kf + t * hd + 8 * v, load_f16(K + t * hd + 8 * v));
        _mm256_storeu_ps(vf + t * hd + 8 * v, load_f16(V + t * hd + 8 * v));
      }
    const int nk8 = (nk + 7) & ~7;
    for (int t = nk; t < nk8; ++t)
      PC_UNROLL for (int v = 0; v < NV; ++v) _mm256_storeu_ps(kf + t * hd + 8 * v, _mm256_setzero_ps());
    for (int qi = 0; qi < nq; ++qi) {
      const int ctx = tk.n_ctx[qi / group] - t0;
      if (ctx <= 0) continue;
      const int nkq = ctx < nk ? ctx : nk;
      const float* qv = q16 + qi * hd;
      // Scores of the page's keys first, then the accumulator (held in
      // registers: with the eight score chains live as well it would spill).
      for (int t = 0; t < nkq; t += 8) {
        __m256 d8[8];
        PC_UNROLL for (int u = 0; u < 8; ++u) d8[u] = _mm256_setzero_ps();
        PC_UNROLL for (int v = 0; v < NV; ++v) {
          const __m256 x = _mm256_loadu_ps(qv + 8 * v);
          PC_UNROLL for (int u = 0; u < 8; ++u)
            d8[u] = _mm256_fmadd_ps(x, _mm256_loadu_ps(kf + (t + u) * hd + 8 * v), d8[u]);
        }
        _mm256_storeu_ps(sc + t, _mm256_mul_ps(hsum256_x8(d8), scale));
      }
      __m256 ac[NV];
      PC_UNROLL for (int v = 0; v < NV; ++v) ac[v] = _mm256_loadu_ps(acc + qi * hd + 8 * v);
      float m = M[qi], ssum = S[qi];
      for (int t = 0; t < nkq; t += 8) {
        const int nb = nkq - t < 8 ? nkq - t : 8;
        const __m256 e = block_softmax(_mm256_loadu_ps(sc + t), nb, m, ssum, ex, [&](__m256 c) {
          PC_UNROLL for (int v = 0; v < NV; ++v) ac[v] = _mm256_mul_ps(ac[v], c);
        });
        // The exps broadcast from the register (reloading them from the
        // vector just stored stalls on store forwarding).
        PC_UNROLL for (int u = 0; u < 8; ++u) {
          if (u >= nb) break;
          const __m256 pv = _mm256_permutevar8x32_ps(e, _mm256_set1_epi32(u));
          ssum = ssum + _mm256_cvtss_f32(pv);
          PC_UNROLL for (int v = 0; v < NV; ++v)
            ac[v] = _mm256_fmadd_ps(_mm256_loadu_ps(vf + (t + u) * hd + 8 * v), pv, ac[v]);
        }
      }
      PC_UNROLL for (int v = 0; v < NV; ++v) _mm256_storeu_ps(acc + qi * hd + 8 * v, ac[v]);
      M[qi] = m;
      S[qi] = ssum;
    }
  }
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
