// AVX2 + FMA + F16C attention path: the arithmetic of paged_attention.cc, with
// the F16 roundings done by vcvtps2ph. Only this file is compiled for AVX2 (the
// target pragma after the includes), so the rest of the binary stays portable;
// paged_attention() / paged_attention_tokens() select it at run time.
//
// Two kernels:
//  * paged_attention_avx2: one token's query heads, key by key (decode).
//  * tokens_kernel<NV>: up to kAttnMaxTokens tokens × group heads of one KV
//    head, page by page: K/V converted to float once per page for all queries,
//    scores of 8 keys at a time (8 independent FMA chains, each the same dot as
//    the one-token kernel, then a transposed hsum with the same pairings), exp
//    arguments settled from the scores (the running max depends on nothing
//    else), exp evaluated 4 lanes at a time bitwise equal to expf, then the
//    F16-rounded accumulator update per key with the accumulator in registers.
//    A query's per-key operations and roundings are exactly those of the
//    one-token kernel, so the grouping never changes a bit.
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
inline void store_f16(uint16_t* p, __m256 v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

}  // namespace

void paged_attention_avx2(const PagedAttentionArgs& a, const float* q, int group, float* out,
                          float* scratch) {
  const int P = a.page_size, hd = a.head_dim;
  const size_t slab = size_t(a.kv_head) * P * hd;
  // scratch: q16 [group][hd] and acc [group][hd], both as F16 bits.
  uint16_t* q16 = reinterpret_cast<uint16_t*>(scratch);
  uint16_t* acc = q16 + size_t(group) * hd;
  float* M = scratch + size_t(group) * hd;  // [group] (after the 2*group*hd halves)
  float* S = M + group;
  for (int j = 0; j < group; ++j) {
    for (int d = 0; d < hd; d += 8) {
      store_f16(q16 + j * hd + d, _mm256_loadu_ps(q + size_t(j) * hd + d));
      store_f16(acc + j * hd + d, _mm256_setzero_ps());
    }
    M[j] = -std::numeric_limits<float>::infinity();
    S[j] = 0.f;
  }
  // Keys and values are loaded once per slot for all heads of the group.
  for (int t = 0, p = 0, o = 0; t < a.n_ctx; ++t, ++o) {
    if (o == (a.fills ? a.fills[p] : P)) ++p, o = 0;  // next page
    const uint16_t* K = a.k_pages[p] + slab + size_t(o) * hd;
    const uint16_t* V = a.v_pages[p] + slab + size_t(o) * hd;
    for (int j = 0; j < group; ++j) {
      __m256 dot = _mm256_setzero_ps();
      for (int d = 0; d < hd; d += 8) dot = _mm256_fmadd_ps(load_f16(q16 + j * hd + d), load_f16(K + d), dot);
      const float s = hsum256(dot) * a.scale;
      float ms = 1.f, vs = 1.f;
      uint16_t* aj = acc + j * hd;
      if (s > M[j]) {
        ms = std::exp(M[j] - s);
        M[j] = s;
        const __m256 m = _mm256_set1_ps(ms);
        for (int d = 0; d < hd; d += 8) store_f16(aj + d, _mm256_mul_ps(load_f16(aj + d), m));
      } else {
        vs = std::exp(s - M[j]);
      }
      const __m256 v = _mm256_set1_ps(vs);
      for (int d = 0; d < hd; d += 8) store_f16(aj + d, _mm256_fmadd_ps(load_f16(V + d), v, load_f16(aj + d)));
      S[j] = S[j] * ms + vs;
    }
  }
  for (int j = 0; j < group; ++j) {
    const __m256 inv = _mm256_set1_ps(1.f / S[j]);
    for (int d = 0; d < hd; d += 8)
      _mm256_storeu_ps(out + size_t(j) * hd + d, _mm256_mul_ps(load_f16(acc + j * hd + d), inv));
  }
}

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

// y[i] = expf(x[i]) for i < n, bitwise equal to glibc's expf on an FMA/AVX2
// machine (__expf_fma, glibc 2.28+: the algorithm and table of
// sysdeps/ieee754/flt-32/e_expf.c with FMA contraction), four lanes in double.
// Arguments outside its fast range (|x| >= ~88, NaN, inf: result 0, subnormal,
// overflow or NaN) go to std::exp itself. The softmax arguments are <= 0.
constexpr uint64_t kExp2fTab[32] = {
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51,
    0x3fef72b83c7d517b, 0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1,
    0x3fef06fe0a31b715, 0x3feef1a7373aa9cb, 0x3feedea64c123422, 0x3feece086061892d,
    0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429, 0x3feea47eb03a5585,
    0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d,
    0x3feee89f995ad3ad, 0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069,
    0x3fef5818dcfba487, 0x3fef7c97337b9b5f, 0x3fefa4afa2a490da, 0x3fefd0765b6e4540};

inline __m256d bits_pd(uint64_t b) { return _mm256_castsi256_pd(_mm256_set1_epi64x(int64_t(b))); }

}  // namespace

void expf_avx2(const float* x, float* y, int n) {
  const __m256d inv_ln2_n = bits_pd(0x40471547652b82feull);  // 32 / ln 2
  const __m256d shift = bits_pd(0x4338000000000000ull);      // 0x1.8p52
  const __m256d c0 = bits_pd(0x3ebc6af84b912394ull);
  const __m256d c1 = bits_pd(0x3f2ebfce50fac4f3ull);
  const __m256d c2 = bits_pd(0x3f962e42ff0c52d6ull);
  const __m256d one = _mm256_set1_pd(1.0);
  const __m128i top_limit = _mm_set1_epi32(0x42a);
  int i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m128 xf = _mm_loadu_ps(x + i);
    const __m128i top = _mm_and_si128(_mm_srli_epi32(_mm_castps_si128(xf), 20), _mm_set1_epi32(0x7ff));
    const __m256d xd = _mm256_cvtps_pd(xf);
    __m256d kd = _mm256_fmadd_pd(inv_ln2_n, xd, shift);
    const __m256i ki = _mm256_castpd_si256(kd);
    kd = _mm256_sub_pd(kd, shift);
    const __m256d r = _mm256_fmsub_pd(inv_ln2_n, xd, kd);
    const __m256i idx = _mm256_and_si256(ki, _mm256_set1_epi64x(31));
    const __m256i t = _mm256_add_epi64(
        _mm256_i64gather_epi64(reinterpret_cast<const long long*>(kExp2fTab), idx, 8),
        _mm256_slli_epi64(ki, 47));
    const __m256d z = _mm256_fmadd_pd(r, c0, c1);
    const __m256d r2 = _mm256_mul_pd(r, r);
    __m256d yy = _mm256_fmadd_pd(r, c2, one);
    yy = _mm256_fmadd_pd(z, r2, yy);
    yy = _mm256_mul_pd(yy, _mm256_castsi256_pd(t));
    if (_mm_movemask_epi8(_mm_cmpgt_epi32(top, top_limit))) {
      alignas(16) float xs[4], ys[4];
      _mm_store_ps(xs, xf);
      _mm_store_ps(ys, _mm256_cvtpd_ps(yy));
      for (int j = 0; j < 4; ++j)
        if (((std::bit_cast<uint32_t>(xs[j]) >> 20) & 0x7ff) > 0x42a) ys[j] = std::exp(xs[j]);
      _mm_storeu_ps(y + i, _mm_load_ps(ys));
    } else {
      _mm_storeu_ps(y + i, _mm256_cvtpd_ps(yy));
    }
  }
  for (; i < n; ++i) y[i] = std::exp(x[i]);
}

namespace {

// NV = head_dim / 8 vectors per head. Per page:
//   1. K and V of the page's visible slots -> float (kf, vf), once for all queries;
//   2. per query, scores of 8 slots at a time: eight independent 8-lane FMA
//      chains over head_dim (the dot of paged_attention_avx2, same order), a
//      transposed hsum with the same pairings, times scale;
//   3. per query, the online-softmax update slot by slot with the accumulator
//      held in registers (rounded to F16 after every update, as always).
template <int NV>
void tokens_kernel(const PagedAttentionArgs& a, int group, const PagedAttentionTokens& tk,
                   float* scratch) {
  constexpr int hd = 8 * NV;
  const int P = a.page_size, Pr = (P + 7) & ~7;
  const int nq = tk.n_tok * group;
  const size_t slab = size_t(a.kv_head) * P * hd;
  float* q16 = scratch;                  // [nq][hd] query rounded to F16
  float* acc = q16 + size_t(nq) * hd;    // [nq][hd] F16 values
  float* M = acc + size_t(nq) * hd;      // [nq]
  float* S = M + nq;                     // [nq]
  float* sc = S + nq;                    // [Pr] scores of one query
  float* ex = sc + Pr;                   // [Pr] exp arguments, then exp values
  int32_t* grow = reinterpret_cast<int32_t*>(ex + Pr);  // [Pr] slot raised the maximum
  float* kf = ex + 2 * Pr;               // [Pr][hd]
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
      // The running maximum, and so every exp argument, follows from the
      // scores alone: settle them (and S) first, then call exp in a tight loop,
      // so the accumulator loop below makes no calls (a call would spill it).
      float m = M[qi], ssum = S[qi];
      for (int t = 0; t < nkq; ++t) {
        const float s = sc[t];
        if (s > m) {
          ex[t] = m - s;  // -> ms
          m = s;
          grow[t] = 1;
        } else {
          ex[t] = s - m;  // -> vs
          grow[t] = 0;
        }
      }
      expf_avx2(ex, ex, nkq);
      __m256 ac[NV];
      PC_UNROLL for (int v = 0; v < NV; ++v) ac[v] = _mm256_loadu_ps(acc + qi * hd + 8 * v);
      for (int t = 0; t < nkq; ++t) {
        float ms = 1.f, vs = 1.f;
        if (grow[t]) {
          ms = ex[t];
          const __m256 mv = _mm256_set1_ps(ms);
          PC_UNROLL for (int v = 0; v < NV; ++v) ac[v] = round_f16(_mm256_mul_ps(ac[v], mv));
        } else {
          vs = ex[t];
        }
        const __m256 vv = _mm256_set1_ps(vs);
        PC_UNROLL for (int v = 0; v < NV; ++v)
          ac[v] = round_f16(_mm256_fmadd_ps(_mm256_loadu_ps(vf + t * hd + 8 * v), vv, ac[v]));
        ssum = ssum * ms + vs;
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
void expf_avx2(const float* x, float* y, int n) {
  for (int i = 0; i < n; ++i) y[i] = std::exp(x[i]);
}
}  // namespace pc

#endif
