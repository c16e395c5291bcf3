// Attention over paged F16 KV. The arithmetic, per query head:
//
//   q16 = f16(q)                                   query rounded to F16, like the keys
//   for each visible slot t, in sequence order:    (page by page, slot by slot)
//     s = dot(q16, K[t]) * scale
//     if s > M:  ms = exp(M - s); M = s; acc = f16(acc * ms); vs = 1
//     else:      ms = 1;          vs = exp(s - M)
//     acc = f16(acc + V[t] * vs)                   accumulator kept in F16
//     S = S * ms + vs
//   out = acc * (1 / S)
//
// This is the online softmax of llama.cpp's CPU flash-attention path, F16
// rounding included; we reproduce it so that greedy outputs match the
// reference texts of the shipped models even at near-ties. It visits keys in
// a fixed order and involves nothing but the query and its KV, so the result
// is the same however queries are batched (batch invariance).
#include "kernels/paged_attention.h"

#include <cmath>
#include <limits>

#include "gguf/quants.h"
#include "kernels/cpu.h"
#include "kernels/paged_attention_internal.h"

namespace pc {

namespace {

inline float round_f16(float v) { return fp16_to_fp32(fp32_to_fp16(v)); }

void attention_scalar(const PagedAttentionArgs& a, const float* q, int group, float* out,
                      float* scratch) {
  const int P = a.page_size, hd = a.head_dim;
  const size_t slab = size_t(a.kv_head) * P * hd;
  float* q16 = scratch;                 // [hd]
  float* acc = scratch + hd;            // [hd], values representable in F16
  for (int j = 0; j < group; ++j) {
    const float* qj = q + size_t(j) * hd;
    for (int d = 0; d < hd; ++d) {
      q16[d] = round_f16(qj[d]);
      acc[d] = 0.f;
    }
    float M = -std::numeric_limits<float>::infinity(), S = 0.f;
    for (int t = 0, p = 0, o = 0; t < a.n_ctx; ++t, ++o) {
      if (o == (a.fills ? a.fills[p] : P)) ++p, o = 0;  // next page
      const uint16_t* K = a.k_pages[p] + slab + size_t(o) * hd;
      const uint16_t* V = a.v_pages[p] + slab + size_t(o) * hd;
      float dot = 0.f;
      for (int d = 0; d < hd; ++d) dot += q16[d] * fp16_to_fp32(K[d]);
      const float s = dot * a.scale;
      float ms = 1.f, vs = 1.f;
      if (s > M) {
        ms = std::exp(M - s);
        M = s;
        for (int d = 0; d < hd; ++d) acc[d] = round_f16(acc[d] * ms);
      } else {
        vs = std::exp(s - M);
      }
      for (int d = 0; d < hd; ++d) acc[d] = round_f16(acc[d] + fp16_to_fp32(V[d]) * vs);
      S = S * ms + vs;
    }
    const float inv = 1.f / S;
    for (int d = 0; d < hd; ++d) out[size_t(j) * hd + d] = acc[d] * inv;
  }
}

}  // namespace

void paged_attention(const PagedAttentionArgs& a, const float* q, int group, float* out,
                     float* scratch) {
  if (cpu_level() >= CpuLevel::Avx2 && a.head_dim % 8 == 0) {
    paged_attention_avx2(a, q, group, out, scratch);
  } else {
    attention_scalar(a, q, group, out, scratch);
  }
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
