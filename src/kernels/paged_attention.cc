// Attention over paged KV. The arithmetic, per query head, over the keys K and
// values V as F32 — F16 widened, or quantized rows dequantized (exact in F32:
// kernels/kv_quant.h) — except the scores of quantized K, which are integer
// dot products per quantization block (dot below):
//
//   q16 = f16(q)                                  query rounded to F16 (F16 K)
//   the blocks of visible slots, in sequence order: a page's slots [8j, 8j+8)
//   that the query sees (the last block of a page or of the context may be
//   shorter; fills of partial pages end a page early); a block belongs to
//   softmax segment floor(pos / segment), pos its first slot's position in
//   the sequence (segment = PagedAttentionArgs::segment, 256 in the model).
//   With a sliding window (PagedAttentionArgs::window > 0), a slot is visible
//   only when q_pos - its position id < window; a block without a visible slot
//   is skipped, and only the visible slots of a block take part below.
//   Per segment, from M = -inf, S = 0, acc = 0 (float), for each of its blocks:
//     s_t = dot(q16, K[t]) * scale                 for each visible slot t
//     s_t = softcap * tanh(s_t * (1 / softcap))    with a soft-cap (tanh:
//                                                  fixed_tanh(), fixed_exp.h)
//     m = max(M, max_t s_t)
//     if m > M:  c = exp(M - m); S = S * c; acc = acc * c; M = m
//                                                  (exp: fixed_exp(), see
//                                                  fixed_exp.h)
//     for each visible slot t of the block, in order:
//       p = exp(s_t - M); S = S + p; acc = fma(V[t], p, acc)
//   The segments' states merged in order, (Mm, Sm, accm) from segment 0's,
//   then for each next segment's (M, S, acc) (merge_attention_state):
//       m = max(Mm, M); cm = exp(Mm - m); c = exp(M - m)
//       Sm = Sm * cm + S * c; accm = fma(acc, c, accm * cm); Mm = m
//   with an attention sink (gpt-oss), folded in as a last segment with
//   M = sink, S = 1, acc = 0 (add_attention_sink)
//   out = accm * (1 / Sm)
//
// A context of up to `segment` slots is one segment: the plain online softmax.
// Segments let a long context be split across threads (decode: one task per
// KV head and segment, PagedAttentionTokens::seg, merged by attention_merge)
// while every path computes the same operations in the same order.
//
// dot(a, b) over head_dim, F16 K: one fma chain, r = fma(a[d], b[d], r) for
// d = 0, 1, ... in order from r = 0 (vectorized across slots, a lane per key:
// the pages hold K dimension-major per block of 8 slots, so no horizontal sums
// and no transposing).
//
// dot(q, K[t]) for quantized K (q8_0, q4_0): K[t]'s row is levels k_j and an
// F16 scale dk_b per block of B = kv_quant_block() values. The query (F32, not
// rounded to F16) is quantized per block of B values to levels of at most
// 16383 in magnitude (quantize_query, paged_attention_internal.h):
// dq_b = max_j |q_j| / 16383, ql_j = round-half-to-even(q_j * (1 / dq_b)).
// Then, from r = 0, per block b in order:
//   I = sum_j ql_j * k_j over the block        exact in int32 (|I| < 2^27)
//   r = fma(float(I), dk_b * dq_b, r)          float(I) rounded to nearest even
// The integer sums have no order, so SIMD paths group them freely (AVX2:
// vpmaddwd on K's levels prepared per chunk as int16 pairs; 16-lane tiles:
// vpdpbusd on K's levels as bytes and the query's levels split in two bytes):
// every path gives the same scores bitwise. The query's levels per block are
// finer than the F16 rounding F16 K applies to it (docs/architecture.md "KV
// types").
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

#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>

#include "gguf/quants.h"
#include "kernels/cpu.h"
#include "kernels/paged_attention_internal.h"

namespace pc {

namespace {

inline float round_f16(float v) { return fp16_to_fp32(fp32_to_fp16(v)); }

// Key u of a block (K: [hd][8] F32).
float dot(const float* q, const float* K, int u, int hd) {
  float r = 0.f;
  for (int d = 0; d < hd; ++d) r = std::fma(q[d], K[d * 8 + u], r);
  return r;
}

// Quantized K: the quantized query (ql levels, qd scales) with a key's levels
// kl and scales kd, per block of B values (the arithmetic above).
float dot_q(const int16_t* ql, const float* qd, const int8_t* kl, const float* kd, int hd, int B) {
  float r = 0.f;
  for (int b = 0; b < hd / B; ++b) {
    int32_t s = 0;
    for (int j = 0; j < B; ++j) s += int32_t(ql[b * B + j]) * int32_t(kl[b * B + j]);
    r = std::fma(float(s), kd[b] * qd[b], r);
  }
  return r;
}

// A block of for_each_key_block() as F32: kf [hd][8] (key u, dimension d at
// kf[d * 8 + u]; lanes past nb zero), vf [nb][hd]; row: scratch [hd].
// Quantized types: K as levels instead, kf holding kl [nb][hd] int8 and then
// kd [nb][hd / B] scales (kv_row_levels).
void decode_block(const PagedAttentionArgs& a, const uint16_t* K, int kw, const uint16_t* V, int nb, float* kf,
                  float* vf, float* row) {
  const int hd = a.head_dim;
  for (int i = 0; i < 8 * hd; ++i) kf[i] = 0.f;
  if (a.kv_type == KvType::kF16) {
    for (int d = 0; d < hd; ++d)
      for (int u = 0; u < nb; ++u) kf[d * 8 + u] = fp16_to_fp32(K[d * kw + u]);
    for (int i = 0; i < nb * hd; ++i) vf[i] = fp16_to_fp32(V[i]);
    return;
  }
  const size_t rb = kv_row_bytes(a.kv_type, hd);
  const auto* kb = reinterpret_cast<const uint8_t*>(K);
  const auto* vb = reinterpret_cast<const uint8_t*>(V);
  auto* kl = reinterpret_cast<int8_t*>(kf);
  float* kd = kf + 2 * hd;  // (after 8 rows of hd bytes)
  const int nqb = hd / kv_quant_block(a.kv_type, hd);
  for (int u = 0; u < nb; ++u) {
    kv_row_levels(a.kv_type, kb + u * rb, hd, kl + size_t(u) * hd, kd + u * nqb);
    kv_dequantize_row(a.kv_type, vb + u * rb, hd, vf + size_t(u) * hd);
  }
}

// One token's query heads over the blocks of slots [lo, hi) (all, or one
// segment): to out (normalized) or, with st, the merged state to st at query
// qi0 + j.
void attention_scalar(const PagedAttentionArgs& a, const float* q, int group, int n_ctx, int q_pos, int lo,
                      int hi, float* out, const AttentionState* st, int64_t qi0, float* scratch) {
  const int hd = a.head_dim;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  // Each block is decoded once for the token's query heads; each query's operations
  // and their order are those of the arithmetic above.
  float* q16 = scratch;                       // [group][hd]
  float* acc = q16 + size_t(group) * hd;      // [group][hd] this segment
  float* accm = acc + size_t(group) * hd;     // [group][hd] the segments before it, merged
  float* kf = accm + size_t(group) * hd;      // [hd][8] a block's keys
  float* vf = kf + 8 * hd;                    // [8][hd] its values
  float* row = vf + 8 * hd;                   // [hd]
  float* M = row + hd;                        // [group] each query's state
  float* S = M + group;
  float* Mm = S + group;
  float* Sm = Mm + group;
  // Quantized K: the queries quantized instead (quantize_query), ql [group][hd]
  // levels then qd [group][hd / B] scales in q16's room.
  const bool quant = a.kv_type != KvType::kF16;
  const int B = kv_quant_block(a.kv_type, hd), nqb = hd / B;
  auto* ql = reinterpret_cast<int16_t*>(q16);
  float* qd = q16 + size_t(group) * hd / 2;
  for (int j = 0; j < group; ++j) {
    if (quant) quantize_query(q + size_t(j) * hd, hd, B, ql + size_t(j) * hd, qd + j * nqb);
    for (int d = 0; d < hd; ++d) {
      if (!quant) q16[j * hd + d] = round_f16(q[size_t(j) * hd + d]);
      acc[j * hd + d] = accm[j * hd + d] = 0.f;
    }
    M[j] = Mm[j] = kNegInf;
    S[j] = Sm[j] = 0.f;
  }
  int cur = -1;  // this segment
  for_each_key_block(a, n_ctx, [&](const uint16_t* K, int kw, const uint16_t* V, int nb, int pos,
                                   const int32_t* kpos) {
    if (pos / a.segment != cur) {
      for (int j = 0; j < group; ++j) {
        merge_attention_state(hd, Mm + j, Sm + j, accm + j * hd, M[j], S[j], acc + j * hd);
        M[j] = kNegInf;
        S[j] = 0.f;
        for (int d = 0; d < hd; ++d) acc[j * hd + d] = 0.f;
      }
      cur = pos / a.segment;
    }
    const unsigned vis = window_bits(a, kpos, nb, q_pos);
    if (vis == 0) return;
    decode_block(a, K, kw, V, nb, kf, vf, row);
    for (int j = 0; j < group; ++j) {
      float* aj = acc + j * hd;
      float s[8];
      float m = M[j];
      for (int u = 0; u < nb; ++u) {
        if (!(vis >> u & 1u)) continue;
        s[u] = (quant ? dot_q(ql + size_t(j) * hd, qd + j * nqb, reinterpret_cast<const int8_t*>(kf) + size_t(u) * hd,
                              kf + 2 * hd + u * nqb, hd, B)
                      : dot(q16 + j * hd, kf, u, hd)) *
               a.scale;
        if (a.softcap > 0) s[u] = softcap_score(s[u], a.softcap);
        m = s[u] > m ? s[u] : m;
      }
      if (m > M[j]) {
        const float c = fixed_exp(M[j] - m);
        S[j] = S[j] * c;
        for (int d = 0; d < hd; ++d) aj[d] = aj[d] * c;
        M[j] = m;
      }
      for (int u = 0; u < nb; ++u) {
        if (!(vis >> u & 1u)) continue;
        const float pu = fixed_exp(s[u] - M[j]);
        S[j] = S[j] + pu;
        const float* Vt = vf + size_t(u) * hd;
        for (int d = 0; d < hd; ++d) aj[d] = std::fma(Vt[d], pu, aj[d]);
      }
    }
  }, lo, hi);
  for (int j = 0; j < group; ++j) {
    float* am = accm + j * hd;
    merge_attention_state(hd, Mm + j, Sm + j, am, M[j], S[j], acc + j * hd);
    if (st) {
      const int64_t qi = qi0 + j;
      st->m[qi] = Mm[j];
      st->s[qi] = Sm[j];
      for (int d = 0; d < hd; ++d) st->acc[qi * hd + d] = am[d];
    } else {
      if (a.sinks) add_attention_sink(hd, Mm + j, Sm + j, am, a.sinks[j]);
      const float inv = 1.f / Sm[j];
      for (int d = 0; d < hd; ++d) out[size_t(j) * hd + d] = am[d] * inv;
    }
  }
}

}  // namespace

namespace {

std::atomic<const AttnTiles* (*)(int)> g_forced_tiles{nullptr};

// The attention kernel's tiles for the CPU level in use (nullptr: AVX2's).
const AttnTiles* level_tiles(int head_dim) {
  if (auto* f = g_forced_tiles.load(std::memory_order_relaxed)) return f(head_dim);
  return cpu_level() == CpuLevel::Avx512 ? avx512_attn_tiles(head_dim) : nullptr;
}

}  // namespace

namespace {
std::atomic<bool> g_attn_prefetch{true};
}  // namespace

void set_attn_prefetch(bool on) { g_attn_prefetch.store(on, std::memory_order_relaxed); }
bool attn_prefetch() { return g_attn_prefetch.load(std::memory_order_relaxed); }

void force_attn_tiles(const AttnTiles* (*provider)(int head_dim)) {
  g_forced_tiles.store(provider, std::memory_order_relaxed);
}

void paged_attention(const PagedAttentionArgs& a, const float* q, int group, float* out,
                     float* scratch) {
  if (cpu_level() >= CpuLevel::Avx2 && a.head_dim % 8 == 0) {
    // One token through the prompt kernel: the same arithmetic.
    const int n_ctx = a.n_ctx, q_pos = a.q_pos;
    PagedAttentionTokens t;
    t.n_tok = 1;
    t.q = q;
    t.n_ctx = &n_ctx;
    t.q_pos = &q_pos;
    t.out = out;
    if (paged_attention_tokens_avx2(a, group, t, scratch, level_tiles(a.head_dim))) return;
  }
  attention_scalar(a, q, group, a.n_ctx, a.q_pos, 0, std::numeric_limits<int>::max(), out, nullptr, 0, scratch);
}

void paged_attention_tokens(const PagedAttentionArgs& a, int group, const PagedAttentionTokens& t,
                            float* scratch) {
  if (cpu_level() >= CpuLevel::Avx2 && a.head_dim % 8 == 0 &&
      paged_attention_tokens_avx2(a, group, t, scratch, level_tiles(a.head_dim)))
    return;
  // One token at a time: the same per-query arithmetic by construction.
  int lo, hi;
  segment_range(a, t.seg, &lo, &hi);
  for (int i = 0; i < t.n_tok; ++i)
    attention_scalar(a, t.q + i * t.q_stride, group, t.n_ctx[i], t.q_pos ? t.q_pos[i] : 0, lo, hi, t.seg >= 0 ? nullptr : t.out + i * t.out_stride,
                     t.seg >= 0 ? &t.state : nullptr, int64_t(i) * group, scratch);
}

void attention_merge(int head_dim, const AttentionState* parts, int n_seg, int64_t qi, float* out,
                     const float* sink) {
  // (the scalar form calls libm for every fma where the CPU has them: decode
  // merges every query's segments each layer)
  if (cpu_level() >= CpuLevel::Avx2 && attention_merge_avx2(head_dim, parts, n_seg, qi, out, sink)) return;
  const int hd = head_dim;
  float mm = -std::numeric_limits<float>::infinity(), sm = 0.f;
  for (int d = 0; d < hd; ++d) out[d] = 0.f;
  for (int k = 0; k < n_seg; ++k)
    merge_attention_state(hd, &mm, &sm, out, parts[k].m[qi], parts[k].s[qi], parts[k].acc + qi * hd);
  if (sink) add_attention_sink(hd, &mm, &sm, out, *sink);
  const float inv = 1.f / sm;
  for (int d = 0; d < hd; ++d) out[d] = out[d] * inv;
}

}  // namespace pc
