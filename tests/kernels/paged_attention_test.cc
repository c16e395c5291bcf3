// Tests of pc::paged_attention / pc::paged_attention_tokens, over pages of each
// KV type (F16, Q8_0, Q4_0: kernels/kv_quant.h).
//
//  * Against a plain reference: softmax(q·K * scale) · V in double over the same
//    keys/values (F16, or the quantized rows dequantized) and the F16-rounded
//    query (quantized K: the query itself; the kernels quantize it to levels
//    of ±16383 per block, finer than the F16 rounding). The kernels accumulate in
//    float (block-wise online softmax, see paged_attention.cc); over <= 300
//    keys we allow |out - ref| <= 1e-4 * max|V| per element.
//  * Every level: bitwise equal to a direct transcription of the arithmetic in
//    paged_attention.cc's header comment (the spec).
//  * Batch invariance, for every CpuLevel the machine runs: each query's output
//    is bitwise the same whether it is computed alone (paged_attention), or in
//    blocks of 1..kAttnMaxTokens tokens (paged_attention_tokens), or split by
//    softmax segment and merged (the decode split: attention_merge); with a
//    window, soft-cap or attention sinks too.
#include "cpu_levels.h"
#include "kernels/paged_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gguf/quants.h"
#include "kernels/cpu.h"
#include "kernels/elementwise.h"
#include "kernels/paged_attention_internal.h"

namespace pc {
namespace {

using test::LevelGuard;
using test::kernel_paths;
using test::KernelPath;
using test::levels;

float round_f16(float v) { return fp16_to_fp32(fp32_to_fp16(v)); }

// A sequence of n slots in pages of P, stored in shuffled page order, for
// n_kv KV heads of head_dim hd in KV type `type` (the KV page layout: per page
// K then V, each [n_kv][P × hd]; F16: K by kernels/k_layout.h, V slot-major;
// quantized: slot-major rows of kv_row_bytes(), each row quantized from random
// values). k() and vf() give the values as the kernels see them (decoded).
struct Kv {
  int P, hd, n_kv, n;
  KvType type;
  std::vector<uint16_t> mem;
  std::vector<const uint16_t*> kp, vp;
  std::vector<float> kdec, vdec;  // [n_kv][pages × P][hd] decoded, by logical slot
  // quantized K as its levels and block scales (kv_row_levels), by logical slot:
  // [n_kv][pages × P][hd] and [n_kv][pages × P][hd / B]
  std::vector<int8_t> klev;
  std::vector<float> kscale;
  int B = 0;
  Kv(int P_, int hd_, int n_kv_, int n_, uint32_t seed, KvType type_ = KvType::kF16)
      : P(P_), hd(hd_), n_kv(n_kv_), n(n_), type(type_) {
    const int n_pages = (n + P - 1) / P;
    const size_t rb = kv_row_bytes(type, hd);  // bytes of one row (F16: 2 * hd)
    const size_t page = size_t(2) * n_kv * P * rb / 2;  // in 16-bit words
    mem.resize(page * n_pages);
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.f, 1.f);
    if (type == KvType::kF16) {
      for (auto& h : mem) h = fp32_to_fp16(nd(rng));
    } else {
      std::vector<float> row(hd);
      auto* bytes = reinterpret_cast<uint8_t*>(mem.data());
      for (size_t r = 0; r < mem.size() * 2 / rb; ++r) {
        for (auto& x : row) x = nd(rng);
        kv_quantize_row(type, row.data(), hd, bytes + r * rb);
      }
    }
    std::vector<int> order(n_pages);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    for (int p = 0; p < n_pages; ++p) {
      kp.push_back(mem.data() + order[p] * page);
      vp.push_back(mem.data() + order[p] * page + size_t(n_kv) * P * rb / 2);
    }
    const size_t slots = size_t(n_pages) * P;
    kdec.resize(n_kv * slots * hd);
    vdec.resize(n_kv * slots * hd);
    B = kv_quant_block(type, hd);
    klev.resize(n_kv * slots * hd);
    kscale.resize(n_kv * slots * (hd / B));
    for (int g = 0; g < n_kv; ++g)
      for (size_t t = 0; t < slots; ++t) {
        float* kd = kdec.data() + (g * slots + t) * hd;
        float* vd = vdec.data() + (g * slots + t) * hd;
        const size_t row = size_t(g) * P + t % P;  // in the head's slab
        if (type == KvType::kF16) {
          for (int d = 0; d < hd; ++d) kd[d] = fp16_to_fp32(kp[t / P][size_t(g) * P * hd + k_index(P, hd, int(t % P), d)]);
        } else {
          kv_dequantize_row(type, reinterpret_cast<const uint8_t*>(kp[t / P]) + row * rb, hd, kd);
          kv_row_levels(type, reinterpret_cast<const uint8_t*>(kp[t / P]) + row * rb, hd,
                        klev.data() + (g * slots + t) * hd, kscale.data() + (g * slots + t) * (hd / B));
        }
        kv_dequantize_row(type, reinterpret_cast<const uint8_t*>(vp[t / P]) + row * rb, hd, vd);
      }
  }
  float k(int g, int t, int d) const { return kdec[(size_t(g) * kp.size() * P + t) * hd + d]; }
  int8_t klevel(int g, int t, int d) const { return klev[(size_t(g) * kp.size() * P + t) * hd + d]; }
  float kscl(int g, int t, int b) const { return kscale[(size_t(g) * kp.size() * P + t) * (hd / B) + b]; }
  // The query the reference takes: F16-rounded for F16 K, else as given.
  double q_seen(float q) const { return type == KvType::kF16 ? double(round_f16(q)) : double(q); }
  float vf(int g, int t, int d) const { return vdec[(size_t(g) * kp.size() * P + t) * hd + d]; }
  PagedAttentionArgs args(int g, float scale) const {
    PagedAttentionArgs a;
    a.kv_type = type;
    a.k_pages = kp.data();
    a.v_pages = vp.data();
    a.page_size = P;
    a.head_dim = hd;
    a.kv_head = g;
    a.n_kv_head = n_kv;
    a.scale = scale;
    return a;
  }
};

std::vector<float> random_q(int64_t n, uint32_t seed, float mag) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, mag);
  std::vector<float> q(n);
  for (auto& v : q) v = nd(rng);
  return q;
}

// out[hd] for one query head over slots [0, n_ctx): exact softmax in double.
std::vector<double> reference(const Kv& kv, int g, const float* q, int n_ctx, float scale) {
  std::vector<double> s(n_ctx), out(kv.hd, 0.0);
  double mx = -std::numeric_limits<double>::infinity();
  for (int t = 0; t < n_ctx; ++t) {
    double d = 0;
    for (int i = 0; i < kv.hd; ++i) d += kv.q_seen(q[i]) * kv.k(g, t, i);
    s[t] = d * scale;
    mx = std::max(mx, s[t]);
  }
  double sum = 0;
  for (int t = 0; t < n_ctx; ++t) {
    const double e = std::exp(s[t] - mx);
    sum += e;
    for (int i = 0; i < kv.hd; ++i) out[i] += e * kv.vf(g, t, i);
  }
  for (auto& v : out) v /= sum;
  return out;
}

// The arithmetic stated in paged_attention.cc, transcribed.
std::vector<float> spec(const Kv& kv, int g, const float* q, int n_ctx, float scale,
                        int segment = kAttnSegmentSlots) {
  const int hd = kv.hd;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  std::vector<float> q16(hd), acc(hd, 0.f), out(hd), accm(hd, 0.f);
  float Mm = kNegInf, Sm = 0.f;
  bool first = true;
  for (int i = 0; i < hd; ++i) q16[i] = round_f16(q[i]);
  // Quantized K: the query's levels per block of B (dq = max|q| / 16383,
  // level = round half to even of q * (1 / dq)), the integer dot per block,
  // one fma per block.
  const int B = kv.B, nb = hd / B;
  std::vector<int32_t> ql(hd);
  std::vector<float> qd(nb);
  for (int b = 0; b < nb; ++b) {
    float amax = 0.f;
    for (int j = 0; j < B; ++j) amax = std::max(amax, std::fabs(q[b * B + j]));
    qd[b] = amax / 16383.f;
    const float id = qd[b] != 0.f ? 1.f / qd[b] : 0.f;
    for (int j = 0; j < B; ++j) ql[b * B + j] = int32_t(std::nearbyint(q[b * B + j] * id));
  }
  auto dot = [&](int t) {
    float r = 0.f;
    if (kv.type == KvType::kF16) {
      for (int d = 0; d < hd; ++d) r = std::fma(q16[d], kv.k(g, t, d), r);
      return r;
    }
    for (int b = 0; b < nb; ++b) {
      int32_t i = 0;
      for (int j = 0; j < B; ++j) i += ql[b * B + j] * int32_t(kv.klevel(g, t, b * B + j));
      r = std::fma(float(i), kv.kscl(g, t, b) * qd[b], r);
    }
    return r;
  };
  float M = kNegInf, S = 0.f;
  auto merge = [&] {  // the segment's state into the merged one
    if (first) {
      Mm = M, Sm = S, accm = acc;
      first = false;
      return;
    }
    const float m = std::max(Mm, M), cm = fixed_exp(Mm - m), c = fixed_exp(M - m);
    Sm = Sm * cm + S * c;
    for (int i = 0; i < hd; ++i) accm[i] = std::fma(acc[i], c, accm[i] * cm);
    Mm = m;
  };
  for (int b0 = 0, seg = 0; b0 < n_ctx;) {  // blocks: [8j, 8j+8) within each page
    if (b0 / segment != seg) {  // the block, by its first slot, is in the next segment
      merge();
      M = kNegInf, S = 0.f;
      std::fill(acc.begin(), acc.end(), 0.f);
      seg = b0 / segment;
    }
    const int page_end = (b0 / kv.P + 1) * kv.P;
    const int b1 = std::min({b0 + 8 - (b0 % kv.P) % 8, page_end, n_ctx});
    std::vector<float> s;
    float m = M;
    for (int t = b0; t < b1; ++t) {
      s.push_back(dot(t) * scale);
      m = std::max(m, s.back());
    }
    if (m > M) {
      const float c = fixed_exp(M - m);
      S = S * c;
      for (auto& v : acc) v = v * c;
      M = m;
    }
    for (int t = b0; t < b1; ++t) {
      const float p = fixed_exp(s[t - b0] - M);
      S = S + p;
      for (int i = 0; i < hd; ++i) acc[i] = std::fma(kv.vf(g, t, i), p, acc[i]);
    }
    b0 = b1;
  }
  merge();
  const float inv = 1.f / Sm;
  for (int i = 0; i < hd; ++i) out[i] = accm[i] * inv;
  return out;
}

struct Shape {
  int P, hd, n_kv, group;
};
// (P = 12: pages whose last block of keys is 4 slots wide, k_layout.h;
// head_dim 20: the scalar path; 8, 16, 256: the AVX2 kernel's smallest and
// largest heads; groups of 8: a decode token's softmax two blocks a vector,
// AttnTileSet::softmax8, with P = 12 blocks of unequal lengths side by side.)
const Shape kShapes[] = {{16, 64, 3, 3}, {16, 128, 2, 4}, {16, 32, 1, 1}, {8, 48, 2, 2},  {16, 20, 1, 2},
                         {12, 64, 3, 3}, {16, 8, 2, 4},   {16, 16, 4, 2}, {16, 256, 1, 2}, {16, 64, 2, 8},
                         {12, 32, 1, 8}};

// Every KV type the kernels read (kernels/kv_quant.h).
const KvType kAllTypes[] = {KvType::kF16, KvType::kQ8_0, KvType::kQ4_0};

// Prompt tests' layout: token i's queries (and outputs) at [i][n_kv][group][hd].
int64_t token_floats(const Shape& sh) { return int64_t(sh.n_kv) * sh.group * sh.hd; }
int64_t query_offset(const Shape& sh, int i, int g) { return i * token_floats(sh) + int64_t(g) * sh.group * sh.hd; }

// Each of the n tokens' queries of every KV head computed alone
// (paged_attention), into out; args(g): the arguments for KV head g.
template <class Args>
void attend_alone(const Shape& sh, Args&& args, int n, const float* q, const int* n_ctx, float* out,
                  float* scratch) {
  for (int g = 0; g < sh.n_kv; ++g)
    for (int i = 0; i < n; ++i) {
      PagedAttentionArgs a = args(g);
      a.n_ctx = n_ctx[i];
      paged_attention(a, q + query_offset(sh, i, g), sh.group, out + query_offset(sh, i, g), scratch);
    }
}

// Tokens [i0, i0 + n_tok) of KV head g as one paged_attention_tokens call.
PagedAttentionTokens token_block(const Shape& sh, const float* q, const int* n_ctx, float* out, int i0, int n_tok,
                                 int g) {
  PagedAttentionTokens t;
  t.n_tok = n_tok;
  t.q = q + query_offset(sh, i0, g);
  t.q_stride = token_floats(sh);
  t.n_ctx = n_ctx + i0;
  t.out = out + query_offset(sh, i0, g);
  t.out_stride = token_floats(sh);
  return t;
}

TEST(PagedAttention, MatchesReference) {
  LevelGuard guard;
  for (const KernelPath& path : kernel_paths()) {
    path.use();
    for (KvType type : kAllTypes)
    for (const Shape& sh : kShapes) {
      if (kv_row_bytes(type, sh.hd) == 0) continue;  // (heads this type cannot store)
      const int n = 300;
      Kv kv(sh.P, sh.hd, sh.n_kv, n, 7, type);
      const float scale = 1.f / std::sqrt(float(sh.hd));
      const auto q = random_q(int64_t(sh.group) * sh.hd, 11, 2.f);
      std::vector<float> out(q.size()), scratch(paged_attention_scratch(sh.P, sh.hd, sh.group));
      for (int g = 0; g < sh.n_kv; ++g)
        for (int n_ctx : {1, 2, 17, 300}) {
          PagedAttentionArgs a = kv.args(g, scale);
          a.n_ctx = n_ctx;
          paged_attention(a, q.data(), sh.group, out.data(), scratch.data());
          for (int j = 0; j < sh.group; ++j) {
            const auto ref = reference(kv, g, q.data() + j * sh.hd, n_ctx, scale);
            double vmax = 0;
            for (int t = 0; t < n_ctx; ++t)
              for (int i = 0; i < sh.hd; ++i) vmax = std::max(vmax, double(std::fabs(kv.vf(g, t, i))));
            for (int i = 0; i < sh.hd; ++i)
              ASSERT_NEAR(out[j * sh.hd + i], ref[i], 1e-4 * vmax)
                  << path.name() << " " << kv_type_name(type) << " hd=" << sh.hd << " n_ctx=" << n_ctx << " i=" << i;
          }
          for (int j = 0; j < sh.group; ++j) {
            const auto sp = spec(kv, g, q.data() + j * sh.hd, n_ctx, scale);
            ASSERT_EQ(0, std::memcmp(sp.data(), out.data() + j * sh.hd, sp.size() * 4))
                << path.name() << " " << kv_type_name(type) << " hd=" << sh.hd << " n_ctx=" << n_ctx;
          }
        }
    }
  }
}

// A prompt of n tokens attending causally, computed one query at a time and in
// blocks of every size up to kAttnMaxTokens: all bitwise equal.
// Token blocks give every query bitwise what it gets alone, with full pages
// and with partly filled ones (PML plans: blocks shorter than 8 in the middle
// of a sequence, chunks of the AVX2 kernel that span pages).
TEST(PagedAttention, TokenBlocksAreBatchInvariant) {
  LevelGuard guard;
  for (const KernelPath& path : kernel_paths()) {
    path.use();
    for (KvType type : kAllTypes)
    for (const Shape& sh : kShapes) {
      if (kv_row_bytes(type, sh.hd) == 0) continue;
      const int n = 75;
      Kv kv(sh.P, sh.hd, sh.n_kv, 3 * (n + 5), 3, type);
      std::vector<int32_t> fills(kv.kp.size());
      int filled = 0;
      for (size_t p = 0; p < fills.size(); ++p) {
        fills[p] = p % 3 == 1 ? std::max(1, sh.P / 2 - 3) : p % 5 == 2 ? 1 : sh.P;
        filled += fills[p];
      }
      ASSERT_GE(filled, n + 5);
      const float scale = 1.f / std::sqrt(float(sh.hd));
      const int64_t qd = int64_t(sh.n_kv) * sh.group * sh.hd;
      // Large queries give peaked scores and frequent new maxima.
      const auto q = random_q(n * qd, 5, 6.f);
      std::vector<int> n_ctx(n);
      for (int i = 0; i < n; ++i) n_ctx[i] = i + 1 + (i % 3 == 0 ? 5 : 0);  // not always causal-contiguous
      for (bool with_fills : {false, true}) {
        auto args = [&](int g) {
          PagedAttentionArgs a = kv.args(g, scale);
          a.fills = with_fills ? fills.data() : nullptr;
          return a;
        };
        std::vector<float> alone(n * qd), blocked(n * qd);
        std::vector<float> scratch(paged_attention_tokens_scratch(sh.P, sh.hd, sh.group, kAttnMaxTokens));
        attend_alone(sh, args, n, q.data(), n_ctx.data(), alone.data(), scratch.data());
        for (int bs : {1, 2, 3, 7, 16, 32}) {
          std::fill(blocked.begin(), blocked.end(), std::nanf(""));
          for (int g = 0; g < sh.n_kv; ++g)
            for (int i0 = 0; i0 < n; i0 += bs)
              paged_attention_tokens(args(g), sh.group,
                                     token_block(sh, q.data(), n_ctx.data(), blocked.data(), i0, std::min(bs, n - i0), g),
                                     scratch.data());
          ASSERT_EQ(0, std::memcmp(alone.data(), blocked.data(), alone.size() * 4))
              << path.name() << " " << kv_type_name(type) << " hd=" << sh.hd << " block=" << bs << " fills=" << with_fills;
        }
      }
    }
  }
}

// Contexts of several softmax segments (paged_attention.cc), with segments of
// 24, 64 and 256 slots (with 12-slot pages and partly filled ones, blocks
// start mid-segment and segments start mid-block: a block belongs to the
// segment its first slot is in). Each query's output is bitwise the same
// computed alone, in blocks of tokens, and split into one call per segment
// merged by attention_merge — the decode split — and equal to the spec.
TEST(PagedAttention, SegmentsSplitAndMergeExactly) {
  LevelGuard guard;
  for (const KernelPath& path : kernel_paths()) {
    path.use();
    for (KvType type : kAllTypes)
    for (const Shape& sh : kShapes) {
      if (kv_row_bytes(type, sh.hd) == 0) continue;
      // (the quantized types: one segment length, a few shapes — the walk is the F16 one)
      if (type != KvType::kF16 && sh.hd != 16 && sh.P != 12 && sh.hd != 128) continue;
      const int n = 24, max_ctx = 700;
      Kv kv(sh.P, sh.hd, sh.n_kv, 2 * max_ctx + 4 * sh.P, 9, type);
      std::vector<int32_t> fills(kv.kp.size());
      int filled = 0;
      for (size_t p = 0; p < fills.size(); ++p) {
        fills[p] = p % 4 == 1 ? std::max(1, sh.P / 2 - 1) : p % 7 == 3 ? 3 : sh.P;
        filled += fills[p];
      }
      ASSERT_GE(filled, max_ctx);
      const float scale = 1.f / std::sqrt(float(sh.hd));
      const int64_t qd = int64_t(sh.n_kv) * sh.group * sh.hd;
      const auto q = random_q(n * qd, 13, 6.f);
      std::vector<int> n_ctx(n);
      for (int i = 0; i < n; ++i) n_ctx[i] = 1 + (i * 331 + i * i * 17) % max_ctx;
      n_ctx[n - 1] = max_ctx;
      std::vector<float> scratch(paged_attention_tokens_scratch(sh.P, sh.hd, sh.group, kAttnMaxTokens));
      for (int segment : {24, 64, 256})
        for (bool with_fills : {false, true}) {
          if (type != KvType::kF16 && segment != 64) continue;
          auto args = [&](int g) {
            PagedAttentionArgs a = kv.args(g, scale);
            a.fills = with_fills ? fills.data() : nullptr;
            a.segment = segment;
            return a;
          };
          const std::string where = std::string(path.name()) + " " + kv_type_name(type) + " hd=" + std::to_string(sh.hd) +
                                    " P=" + std::to_string(sh.P) + " segment=" + std::to_string(segment) +
                                    " fills=" + std::to_string(with_fills);
          std::vector<float> alone(n * qd), blocked(n * qd), split(n * qd);
          attend_alone(sh, args, n, q.data(), n_ctx.data(), alone.data(), scratch.data());
          if (!with_fills)
            for (int g = 0; g < sh.n_kv; ++g)
              for (int i = 0; i < n; ++i)
                for (int j = 0; j < sh.group; ++j) {
                  const int64_t off = query_offset(sh, i, g) + j * sh.hd;
                  const auto sp = spec(kv, g, q.data() + off, n_ctx[i], scale, segment);
                  ASSERT_EQ(0, std::memcmp(sp.data(), alone.data() + off, sp.size() * 4))
                      << where << " n_ctx=" << n_ctx[i];
                }
          for (int bs : {7, 24}) {
            std::fill(blocked.begin(), blocked.end(), std::nanf(""));
            std::fill(split.begin(), split.end(), std::nanf(""));
            for (int g = 0; g < sh.n_kv; ++g)
              for (int i0 = 0; i0 < n; i0 += bs) {
                const PagedAttentionTokens t =
                    token_block(sh, q.data(), n_ctx.data(), blocked.data(), i0, std::min(bs, n - i0), g);
                paged_attention_tokens(args(g), sh.group, t, scratch.data());
                // The split: one call per segment, then the merge.
                const int most = *std::max_element(t.n_ctx, t.n_ctx + t.n_tok);
                const int n_seg = (most - 1) / segment + 1;
                const int64_t nq = int64_t(t.n_tok) * sh.group;
                std::vector<float> states(n_seg * attention_state_floats(sh.hd, nq), std::nanf(""));
                std::vector<AttentionState> parts;
                for (int k = 0; k < n_seg; ++k) {
                  PagedAttentionTokens ts = t;
                  ts.out = nullptr;
                  ts.seg = k;
                  ts.state = attention_state_at(states.data() + k * attention_state_floats(sh.hd, nq), sh.hd, nq);
                  paged_attention_tokens(args(g), sh.group, ts, scratch.data());
                  parts.push_back(ts.state);
                }
                for (int64_t qi = 0; qi < nq; ++qi)
                  attention_merge(sh.hd, parts.data(), n_seg, qi,
                                  split.data() + query_offset(sh, i0 + int(qi / sh.group), g) + (qi % sh.group) * sh.hd);
              }
            ASSERT_EQ(0, std::memcmp(alone.data(), blocked.data(), alone.size() * 4)) << where << " block=" << bs;
            ASSERT_EQ(0, std::memcmp(alone.data(), split.data(), alone.size() * 4)) << where << " block=" << bs;
          }
        }
    }
  }
}

// Sliding window and soft-capping (paged_attention.cc): the window is measured
// in position ids, which here leave gaps and run backwards for a stretch (PML
// layouts), so slots and positions differ. Per query: close to a plain masked
// softmax of the capped scores; bitwise the same alone, in blocks of tokens
// and split by segment and merged; and bitwise the same on every path.
TEST(PagedAttention, WindowAndSoftcap) {
  LevelGuard guard;
  const Shape shapes[] = {{16, 64, 3, 3}, {12, 64, 3, 3}, {16, 8, 2, 4}, {16, 20, 1, 2}, {16, 256, 1, 2}};
  const int n = 40, max_ctx = 300;
  std::vector<std::vector<float>> first_path;  // per case, the first path's outputs
  bool have_first = false;
  for (const KernelPath& path : kernel_paths()) {
    path.use();
    size_t case_i = 0;
    for (const Shape& sh : shapes) {
      Kv kv(sh.P, sh.hd, sh.n_kv, max_ctx, 21);
      // Position ids: gaps of 5 every 23 slots, and slots 120-159 counting down.
      std::vector<std::vector<int32_t>> pos(kv.kp.size(), std::vector<int32_t>(sh.P));
      std::vector<const int32_t*> pos_pages;
      std::vector<int32_t> flat(max_ctx);
      for (int t = 0; t < max_ctx; ++t) {
        flat[t] = t + 5 * (t / 23);
        if (t >= 120 && t < 160) flat[t] = flat[120] + (159 - t);
        pos[t / sh.P][t % sh.P] = flat[t];
      }
      for (auto& p : pos) pos_pages.push_back(p.data());
      const int64_t qd = int64_t(sh.n_kv) * sh.group * sh.hd;
      const auto q = random_q(n * qd, 23, 6.f);
      std::vector<int> n_ctx(n), q_pos(n);
      for (int i = 0; i < n; ++i) n_ctx[i] = 1 + (i * 151 + i * i * 7) % max_ctx;
      n_ctx[n - 1] = max_ctx;
      std::vector<float> scratch(paged_attention_tokens_scratch(sh.P, sh.hd, sh.group, kAttnMaxTokens));
      const float scale = 1.f / std::sqrt(float(sh.hd));
      // Attention sinks (gpt-oss): a logit per query head, no value.
      std::vector<float> sink_logits(size_t(sh.n_kv) * sh.group);
      for (size_t h = 0; h < sink_logits.size(); ++h) sink_logits[h] = -1.f + 0.7f * float(h);
      for (int window : {1, 7, 32, 100})
        for (int variant = 0; variant < 3; ++variant) {
          const float softcap = variant == 1 ? 6.f : 0.f;
          const bool sinks = variant == 2;
          // Its own slot's position, or a little past it (still seeing that slot).
          for (int i = 0; i < n; ++i) q_pos[i] = flat[n_ctx[i] - 1] + (i % 4 == 0 ? std::min(3, window - 1) : 0);
          auto args = [&](int g) {
            PagedAttentionArgs a = kv.args(g, scale);
            a.window = window;
            a.softcap = softcap;
            a.pos_pages = pos_pages.data();
            a.segment = 64;
            if (sinks) a.sinks = sink_logits.data() + g * sh.group;
            return a;
          };
          const std::string where = path.name() + " hd=" + std::to_string(sh.hd) + " P=" + std::to_string(sh.P) +
                                    " window=" + std::to_string(window) + " softcap=" + std::to_string(softcap) +
                                    (sinks ? " sinks" : "");
          std::vector<float> alone(n * qd), blocked(n * qd), split(n * qd);
          for (int g = 0; g < sh.n_kv; ++g)
            for (int i = 0; i < n; ++i) {
              PagedAttentionArgs a = args(g);
              a.n_ctx = n_ctx[i];
              a.q_pos = q_pos[i];
              paged_attention(a, q.data() + query_offset(sh, i, g), sh.group, alone.data() + query_offset(sh, i, g),
                              scratch.data());
            }
          // Against the plain masked softmax (double; the kernel's tanh and exp
          // are within 1e-6 of exact).
          for (int g = 0; g < sh.n_kv; ++g)
            for (int i = 0; i < n; i += 3)
              for (int j = 0; j < sh.group; ++j) {
                const float* qj = q.data() + query_offset(sh, i, g) + j * sh.hd;
                std::vector<double> s, out(sh.hd, 0.0);
                std::vector<int> seen;
                double mx = -INFINITY, vmax = 0;
                for (int t = 0; t < n_ctx[i]; ++t) {
                  if (q_pos[i] - flat[t] >= window) continue;
                  double d = 0;
                  for (int e = 0; e < sh.hd; ++e) d += kv.q_seen(qj[e]) * kv.k(g, t, e);
                  d *= scale;
                  if (softcap > 0) d = softcap * std::tanh(d / softcap);
                  s.push_back(d);
                  seen.push_back(t);
                  mx = std::max(mx, d);
                }
                ASSERT_FALSE(seen.empty()) << where;
                const double sink = sinks ? sink_logits[size_t(g) * sh.group + j] : -INFINITY;
                mx = std::max(mx, sink);
                double sum = sinks ? std::exp(sink - mx) : 0;
                for (size_t k = 0; k < seen.size(); ++k) {
                  const double e = std::exp(s[k] - mx);
                  sum += e;
                  for (int d = 0; d < sh.hd; ++d) {
                    const double v = kv.vf(g, seen[k], d);
                    out[d] += e * v;
                    vmax = std::max(vmax, std::fabs(v));
                  }
                }
                for (int d = 0; d < sh.hd; ++d)
                  ASSERT_NEAR(alone[query_offset(sh, i, g) + j * sh.hd + d], out[d] / sum, 2e-4 * vmax)
                      << where << " query " << i;
              }
          for (int bs : {1, 7, 32}) {
            std::fill(blocked.begin(), blocked.end(), std::nanf(""));
            std::fill(split.begin(), split.end(), std::nanf(""));
            for (int g = 0; g < sh.n_kv; ++g)
              for (int i0 = 0; i0 < n; i0 += bs) {
                PagedAttentionTokens t =
                    token_block(sh, q.data(), n_ctx.data(), blocked.data(), i0, std::min(bs, n - i0), g);
                t.q_pos = q_pos.data() + i0;
                paged_attention_tokens(args(g), sh.group, t, scratch.data());
                const int most = *std::max_element(t.n_ctx, t.n_ctx + t.n_tok);
                const int n_seg = (most - 1) / 64 + 1;
                const int64_t nq = int64_t(t.n_tok) * sh.group;
                std::vector<float> states(n_seg * attention_state_floats(sh.hd, nq), std::nanf(""));
                std::vector<AttentionState> parts;
                for (int k = 0; k < n_seg; ++k) {
                  PagedAttentionTokens ts = t;
                  ts.out = nullptr;
                  ts.seg = k;
                  ts.state = attention_state_at(states.data() + k * attention_state_floats(sh.hd, nq), sh.hd, nq);
                  paged_attention_tokens(args(g), sh.group, ts, scratch.data());
                  parts.push_back(ts.state);
                }
                for (int64_t qi = 0; qi < nq; ++qi)
                  attention_merge(sh.hd, parts.data(), n_seg, qi,
                                  split.data() + query_offset(sh, i0 + int(qi / sh.group), g) + (qi % sh.group) * sh.hd,
                                  sinks ? sink_logits.data() + g * sh.group + qi % sh.group : nullptr);
              }
            ASSERT_EQ(0, std::memcmp(alone.data(), blocked.data(), alone.size() * 4)) << where << " block=" << bs;
            ASSERT_EQ(0, std::memcmp(alone.data(), split.data(), alone.size() * 4)) << where << " block=" << bs;
          }
          if (!have_first) {
            first_path.push_back(alone);
          } else {
            ASSERT_EQ(0, std::memcmp(first_path[case_i].data(), alone.data(), alone.size() * 4))
                << where << " differs from " << kernel_paths()[0].name();
          }
          ++case_i;
        }
    }
    have_first = true;
  }
}

// The project's tanh (fixed_tanh, fixed_exp.h): close to std::tanh, odd, and
// the AVX2 form (through softcap_inplace and geglu_tanh at each level) bitwise
// the scalar one.
TEST(PagedAttention, AttentionTanh) {
  std::mt19937 rng(4);
  std::uniform_real_distribution<float> u(-12.f, 12.f);
  std::vector<float> x = {0.f, -0.f, 1e-6f, -1e-6f, 0.5f, 20.f, -20.f, 100.f};
  for (int i = 0; i < 100000; ++i) x.push_back(u(rng));
  double worst = 0;
  for (float v : x) {
    worst = std::max(worst, std::fabs(double(fixed_tanh(v)) - std::tanh(double(v))));
    ASSERT_EQ(std::bit_cast<uint32_t>(fixed_tanh(-v)), std::bit_cast<uint32_t>(-fixed_tanh(v)));
  }
  EXPECT_LT(worst, 3e-7);
  LevelGuard guard;
  std::vector<std::vector<float>> caps, gelus;
  for (CpuLevel l : levels()) {
    set_cpu_level(l);
    std::vector<float> c = x, g(x.size());
    softcap_inplace(c.data(), int64_t(c.size()), 6.f);
    geglu_tanh(x.data(), x.data(), g.data(), int64_t(x.size()));
    caps.push_back(c);
    gelus.push_back(g);
  }
  for (size_t i = 1; i < caps.size(); ++i) {
    EXPECT_EQ(0, std::memcmp(caps[0].data(), caps[i].data(), x.size() * 4)) << cpu_level_name(levels()[i]);
    EXPECT_EQ(0, std::memcmp(gelus[0].data(), gelus[i].data(), x.size() * 4)) << cpu_level_name(levels()[i]);
  }
  for (size_t i = 0; i < x.size(); i += 97) {
    const double g = x[i], want = 0.5 * g * (1 + std::tanh(0.7978845608028654 * (g + 0.044715 * g * g * g))) * g;
    EXPECT_NEAR(gelus[0][i], want, 1e-5 * std::max(1.0, std::fabs(want))) << x[i];
  }
}

// The decode kernel's prefetch walk (AttnPrefetchWalk) gives the pages the
// call reads, `ahead` pages on from the one it starts at: those holding slots
// of the range, in order, less the pages the window hides from the query
// (each page's slots checked one by one), as the head's K and V slabs; with
// next_head, then the next KV head's same pages (none after the last head);
// with a next segment's end, the last head's call then goes on into KV head
// 0's pages of the next segment's slots. Fills, windows, segments and
// page-ahead counts vary; the expected list is computed here from the
// definitions.
TEST(PagedAttention, PrefetchWalkGivesTheCallsPagesAhead) {
  const int P = 12, hd = 32, n_kv = 3, n_pages = 40;
  std::vector<std::vector<uint16_t>> blocks(2 * n_pages, std::vector<uint16_t>(size_t(n_kv) * P * hd));
  std::vector<const uint16_t*> kp, vp;
  std::vector<int32_t> fills;
  std::vector<std::vector<int32_t>> pos(n_pages, std::vector<int32_t>(P));
  std::vector<const int32_t*> pos_ptr;
  int next_pos = 0;
  for (int p = 0; p < n_pages; ++p) {
    kp.push_back(blocks[2 * p].data());
    vp.push_back(blocks[2 * p + 1].data());
    fills.push_back(p % 3 == 1 ? 5 : P);
    // positions increase, with a module-like jump every 7 pages (PML plans
    // reuse position ranges)
    if (p % 7 == 6) next_pos -= 40;
    for (int u = 0; u < P; ++u) pos[p][u] = next_pos + u;
    next_pos += P;
    pos_ptr.push_back(pos[p].data());
  }
  int cases = 0, crossed = 0, into_next = 0;
  for (bool with_fills : {false, true})
    for (int window : {0, 30, 100})
      for (int n_ctx : {1, 30, 64, 65, 200, 300})
        for (int seg = -1; seg <= (n_ctx - 1) / 64; ++seg)
          for (int head : {0, n_kv - 1})
            for (bool next_head : {false, true})
              for (bool next_seg : {false, true})
              for (int ahead : {1, 2, 5}) {
                PagedAttentionArgs a;
                a.k_pages = kp.data();
                a.v_pages = vp.data();
                a.page_size = P;
                a.head_dim = hd;
                a.kv_head = head;
                a.n_kv_head = n_kv;
                a.fills = with_fills ? fills.data() : nullptr;
                a.segment = 64;
                a.window = window;
                a.pos_pages = pos_ptr.data();
                const int q_pos = n_ctx + 5;
                int lo, hi;
                segment_range(a, seg, &lo, &hi);
                const int end = std::min(n_ctx, hi);
                // The pages the call reads, with their first slots.
                std::vector<std::pair<int, int>> pages;
                for (int p = 0, t0 = 0; t0 < end; ++p) {
                  const int fill = with_fills ? fills[p] : P, nk = std::min(fill, end - t0);
                  bool seen = window == 0;
                  for (int u = 0; u < nk && !seen; ++u) seen = q_pos - pos[p][u] < window;
                  if (t0 + nk > lo && seen) pages.push_back({p, t0});
                  t0 += fill;
                }
                if (pages.empty()) continue;
                std::vector<std::pair<int, int>> want;  // (page, head)
                for (auto [p, t0] : pages) want.push_back({p, head});
                if (next_head && head + 1 < n_kv)
                  for (auto [p, t0] : pages) want.push_back({p, head + 1});
                // The next segment's slots [end, next_end), from the page after
                // the last one that starts before end.
                const int next_end = next_seg && seg >= 0 && hi < n_ctx ? std::min(n_ctx, hi + 64) : 0;
                const size_t own = want.size();
                if (next_end > end && head + 1 >= n_kv) {
                  int p = 0, t0 = 0;
                  for (; t0 < end; ++p) t0 += with_fills ? fills[p] : P;
                  for (; t0 < next_end; ++p) {
                    const int fill = with_fills ? fills[p] : P, nk = std::min(fill, next_end - t0);
                    bool seen = window == 0;
                    for (int u = 0; u < nk && !seen; ++u) seen = q_pos - pos[p][u] < window;
                    if (seen) want.push_back({p, 0});
                    t0 += fill;
                  }
                }
                AttnPrefetchWalk walk;
                walk.start(a, end, q_pos, ahead, next_head, pages[0].first, pages[0].second, next_end);
                std::vector<std::pair<int, int>> got;
                const uint16_t *k, *v;
                size_t bytes;
                while (walk.next(&k, &v, &bytes)) {
                  ASSERT_EQ(bytes, size_t(P) * hd * 2);
                  int found = -1;
                  for (int q = 0; q < n_pages && found < 0; ++q)
                    for (int g = 0; g < n_kv; ++g)
                      if (k == kp[q] + size_t(g) * P * hd) {
                        found = q;
                        got.push_back({q, g});
                        ASSERT_EQ(v, vp[q] + size_t(g) * P * hd);
                      }
                  ASSERT_GE(found, 0) << "a K slab of no page";
                  ASSERT_LE(got.size(), want.size());
                }
                const std::vector<std::pair<int, int>> want_ahead(
                    want.begin() + std::min<size_t>(ahead, want.size()), want.end());
                ASSERT_EQ(got, want_ahead) << "fills " << with_fills << " window " << window << " n_ctx " << n_ctx
                                           << " seg " << seg << " head " << head << " next_head " << next_head
                                           << " next_seg " << next_seg << " ahead " << ahead;
                ++cases;
                crossed += next_head && head + 1 < n_kv && want.size() > pages.size() + ahead;
                into_next += want.size() > own && own > size_t(ahead);
              }
  EXPECT_GT(cases, 1000);
  EXPECT_GT(crossed, 100);
  EXPECT_GT(into_next, 20);
}

// The prefetch queue as the register tiles drain it (AttnPrefetchCursor):
// every queued line once, in order, across ranges and across tiles (a
// cursor takes up where the last one stopped); per_step lines a step; the
// steps the tiles count (skip) added into the queue; nothing once the queue
// is empty, nor with per_step 0 (a prompt's tiles).
TEST(PagedAttention, PrefetchCursorIssuesEveryQueuedLineOnce) {
  alignas(64) static char buf[64 * 64];
  AttnPrefetch q;
  q.per_step = 1;
  q.push(buf, 130);               // 3 lines
  q.push(buf + 1024, 64);         // 1
  q.push(buf + 2048, 0);          // none
  q.push(buf + 3072, 64 * 5 - 1);  // 5
  EXPECT_EQ(q.queued, 9);
  std::vector<const char*> want = {buf, buf + 64, buf + 128, buf + 1024};
  for (int i = 0; i < 5; ++i) want.push_back(buf + 3072 + 64 * i);
  std::vector<const char*> got;
  {
    AttnPrefetchCursor c(&q);
    for (int i = 0; i < 2; ++i) got.push_back(c.next_line());
  }
  {
    AttnPrefetchCursor c(&q);
    for (const char* line; (line = c.next_line()) != nullptr;) got.push_back(line);
    EXPECT_EQ(c.next_line(), nullptr);
  }
  EXPECT_EQ(got, want);
  // per_step lines a step: 3 steps of 2 from 5 queued leave none.
  q.push(buf, 64 * 5);
  q.per_step = 2;
  {
    AttnPrefetchCursor c(&q);
    EXPECT_TRUE(c.issuing());
    for (int i = 0; i < 2; ++i) c.step();
    EXPECT_EQ(c.next_line(), buf + 64 * 4);
    c.step();
    EXPECT_EQ(c.next_line(), nullptr);
    c.skip(3);
  }
  {
    AttnPrefetchCursor c(&q);
    c.skip(2);
  }
  EXPECT_EQ(q.steps, 5);
  // per_step 0: nothing, whatever is queued.
  AttnPrefetch off;
  off.push(buf, 64 * 4);
  {
    AttnPrefetchCursor c(&off);
    EXPECT_FALSE(c.issuing());
    EXPECT_EQ(c.next_line(), nullptr);
  }
  // A full ring drops what is pushed after it.
  AttnPrefetch full;
  full.per_step = 1;
  for (unsigned i = 0; i < AttnPrefetch::kRanges + 3; ++i) full.push(buf + 64 * (i % 64), 64);
  EXPECT_EQ(full.queued, int(AttnPrefetch::kRanges));
  int n = 0;
  {
    AttnPrefetchCursor c(&full);
    while (c.next_line()) ++n;
  }
  EXPECT_EQ(n, int(AttnPrefetch::kRanges));
}

// The softmax's exp (fixed_exp, fixed_exp.h): close to the
// exact exp over the softmax's range, 0 below -87, NaN for NaN; and the AVX2
// evaluation (8 lanes) bitwise equal to the scalar one, on every float in
// [-2, 0] with a stride, across [-120, 0], at the special values and on random
// bit patterns.
TEST(PagedAttention, AttentionExp) {
  std::vector<float> x;
  for (uint32_t b = 0x80000000u; b <= 0xC0000000u; b += 61) x.push_back(std::bit_cast<float>(b));
  for (uint32_t b = 0xC0000000u; b < 0xC3000000u; b += 997) x.push_back(std::bit_cast<float>(b));
  for (float v : {0.f, -0.f, 1.f, 88.f, 88.7f, 89.f, -87.f, -87.3f, -103.9f, -150.f,
                  std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min()})
    x.push_back(v);
  std::mt19937 rng(9);
  for (int i = 0; i < 1000000; ++i) x.push_back(std::bit_cast<float>(uint32_t(rng())));
  double worst = 0;
  for (float v : x) {
    const float y = fixed_exp(v);
    if (std::isnan(v)) {
      ASSERT_TRUE(std::isnan(y));
    } else if (v < -87.f) {
      ASSERT_EQ(std::bit_cast<uint32_t>(y), 0u) << v;
    } else if (v <= 88.f) {
      const double e = std::exp(double(v));
      worst = std::max(worst, std::fabs(double(y) - e) / e);
    }
  }
  EXPECT_LT(worst, 4e-7) << "relative error";
  if (detect_cpu_level() < CpuLevel::Avx2) return;
  for (size_t i = 0; i < x.size(); i += 8) {
    const int n = int(std::min<size_t>(8, x.size() - i));
    float v[8];
    std::copy(x.begin() + i, x.begin() + i + n, v);
    fixed_exp8_avx2(v, n);
    for (int j = 0; j < n; ++j) {
      const float want = fixed_exp(x[i + j]);
      if (std::isnan(want)) ASSERT_TRUE(std::isnan(v[j]));
      else ASSERT_EQ(std::bit_cast<uint32_t>(want), std::bit_cast<uint32_t>(v[j])) << "x=" << x[i + j];
    }
  }
}

}  // namespace
}  // namespace pc
