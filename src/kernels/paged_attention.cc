// Attention over paged F16 KV. The arithmetic, per query head:
//
//   q16 = f16(q)                                  query rounded to F16, like the keys
//   M = -inf, S = 0, acc = 0 (float)
//   for each block of visible slots, in sequence order: a page's slots
//   [8j, 8j+8) that the query sees (the last block of a page or of the
//   context may be shorter; fills of partial pages end a page early):
//     s_t = dot(q16, K[t]) * scale                 for each slot t of the block
//     m = max(M, max_t s_t)
//     if m > M:  c = exp(M - m); S = S * c; acc = acc * c; M = m
//                                                  (exp: fixed_exp(), see
//                                                  fixed_exp.h)
//     for each slot t of the block, in order:
//       p = exp(s_t - M); S = S + p; acc = fma(V[t], p, acc)
//   out = acc * (1 / S)
//
// dot(a, b) over head_dim: one fma chain, r = fma(a[d], b[d], r) for d = 0, 1,
// ... in order from r = 0 (vectorized across slots, a lane per key: the
// pages hold K dimension-major per block of 8 slots, so no horizontal sums
// and no transposing).
//
// Block-wise online softmax with a float accumulator: one rescale per block of
// 8 keys at most, and per key one exp, one dot and one fma per element (the
// F16 rounding of the accumulator after every key that earlier stops copied
// from llama.cpp cost ~4x the update; the shipped models' reference texts do
// not depend on it). It visits keys in a fixed order with block boundaries
// fixed by the pages, and involves nothing but the query and its KV, so the
// result is the same however queries are batched (batch invariance); the
// scalar and AVX2 paths are bitwise equal.
#include "kernels/paged_attention.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "gguf/quants.h"
#include "kernels/cpu.h"
#include "kernels/paged_attention_internal.h"

namespace pc {

namespace {

inline float round_f16(float v) { return fp16_to_fp32(fp32_to_fp16(v)); }

// Key u of a block (K: [hd][kw], k_layout.h).
float dot(const float* q, const uint16_t* K, int kw, int u, int hd) {
  float r = 0.f;
  for (int d = 0; d < hd; ++d) r = std::fma(q[d], fp16_to_fp32(K[d * kw + u]), r);
  return r;
}

void attention_scalar(const PagedAttentionArgs& a, const float* q, int group, float* out,
                      float* scratch) {
  const int hd = a.head_dim;
  float* q16 = scratch;       // [hd]
  float* acc = scratch + hd;  // [hd]
  for (int j = 0; j < group; ++j) {
    const float* qj = q + size_t(j) * hd;
    for (int d = 0; d < hd; ++d) {
      q16[d] = round_f16(qj[d]);
      acc[d] = 0.f;
    }
    float M = -std::numeric_limits<float>::infinity(), S = 0.f;
    for_each_key_block(a, a.n_ctx, [&](const uint16_t* K, int kw, const uint16_t* V, int nb) {
      float s[8];
      float m = M;
      for (int u = 0; u < nb; ++u) {
        s[u] = dot(q16, K, kw, u, hd) * a.scale;
        m = s[u] > m ? s[u] : m;
      }
      if (m > M) {
        const float c = fixed_exp(M - m);
        S = S * c;
        for (int d = 0; d < hd; ++d) acc[d] = acc[d] * c;
        M = m;
      }
      for (int u = 0; u < nb; ++u) {
        const float pu = fixed_exp(s[u] - M);
        S = S + pu;
        const uint16_t* Vt = V + size_t(u) * hd;
        for (int d = 0; d < hd; ++d) acc[d] = std::fma(fp16_to_fp32(Vt[d]), pu, acc[d]);
      }
    });
    const float inv = 1.f / S;
    for (int d = 0; d < hd; ++d) out[size_t(j) * hd + d] = acc[d] * inv;
  }
}

}  // namespace

void paged_attention(const PagedAttentionArgs& a, const float* q, int group, float* out,
                     float* scratch) {
  if (cpu_level() >= CpuLevel::Avx2 && a.head_dim % 8 == 0) {
    // One token through the prompt kernel: the same arithmetic.
    const int n_ctx = a.n_ctx;
    PagedAttentionTokens t;
    t.n_tok = 1;
    t.q = q;
    t.n_ctx = &n_ctx;
    t.out = out;
    if (paged_attention_tokens_avx2(a, group, t, scratch)) return;
  }
  attention_scalar(a, q, group, out, scratch);
}

void paged_attention_tokens(const PagedAttentionArgs& a, int group, const PagedAttentionTokens& t,
                            float* scratch) {
  if (cpu_level() >= CpuLevel::Avx2 && a.head_dim % 8 == 0 &&
      paged_attention_tokens_avx2(a, group, t, scratch))
    return;
  // One token at a time: the same per-query arithmetic by construction.
  PagedAttentionArgs one = a;
  for (int i = 0; i < t.n_tok; ++i) {
    one.n_ctx = t.n_ctx[i];
    paged_attention(one, t.q + i * t.q_stride, group, t.out + i * t.out_stride, scratch);
  }
}

}  // namespace pc
