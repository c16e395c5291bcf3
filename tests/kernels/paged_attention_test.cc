// Tests of pc::paged_attention / pc::paged_attention_tokens.
//
//  * Against a plain reference: softmax(q·K * scale) · V in double over the same
//    F16 keys/values and the F16-rounded query. The kernel keeps its
//    accumulator in F16 (rounded after every key, see paged_attention.cc), so it
//    drifts by ~2^-11 relative per update; over <= 300 keys we allow
//    |out - ref| <= 1e-2 * max|V| per element (measured well below that).
//  * Scalar level: bitwise equal to a direct transcription of the arithmetic in
//    paged_attention.cc's header comment (the spec).
//  * Batch invariance, for every CpuLevel the machine runs: each query's output
//    is bitwise the same whether it is computed alone (paged_attention), or in
//    blocks of 1..kAttnMaxTokens tokens (paged_attention_tokens).
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
#include <vector>

#include "gguf/quants.h"
#include "kernels/cpu.h"
#include "kernels/paged_attention_internal.h"

namespace pc {
namespace {

using test::LevelGuard;
using test::levels;

float round_f16(float v) { return fp16_to_fp32(fp32_to_fp16(v)); }

// A sequence of n slots in pages of P, stored in shuffled page order, for
// n_kv KV heads of head_dim hd (layout of kv/kv_storage.h: per page K then V,
// each [n_kv][P][hd]).
struct Kv {
  int P, hd, n_kv, n;
  std::vector<uint16_t> mem;
  std::vector<const uint16_t*> kp, vp;
  Kv(int P_, int hd_, int n_kv_, int n_, uint32_t seed) : P(P_), hd(hd_), n_kv(n_kv_), n(n_) {
    const int n_pages = (n + P - 1) / P;
    const size_t page = size_t(2) * n_kv * P * hd;
    mem.resize(page * n_pages);
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.f, 1.f);
    for (auto& h : mem) h = fp32_to_fp16(nd(rng));
    std::vector<int> order(n_pages);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    for (int p = 0; p < n_pages; ++p) {
      kp.push_back(mem.data() + order[p] * page);
      vp.push_back(mem.data() + order[p] * page + size_t(n_kv) * P * hd);
    }
  }
  const uint16_t* k(int g, int t) const { return kp[t / P] + (size_t(g) * P + t % P) * hd; }
  const uint16_t* v(int g, int t) const { return vp[t / P] + (size_t(g) * P + t % P) * hd; }
  PagedAttentionArgs args(int g, float scale) const {
    PagedAttentionArgs a;
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
    for (int i = 0; i < kv.hd; ++i) d += double(round_f16(q[i])) * fp16_to_fp32(kv.k(g, t)[i]);
    s[t] = d * scale;
    mx = std::max(mx, s[t]);
  }
  double sum = 0;
  for (int t = 0; t < n_ctx; ++t) {
    const double e = std::exp(s[t] - mx);
    sum += e;
    for (int i = 0; i < kv.hd; ++i) out[i] += e * fp16_to_fp32(kv.v(g, t)[i]);
  }
  for (auto& v : out) v /= sum;
  return out;
}

// The arithmetic stated in paged_attention.cc, transcribed (sequential dot).
std::vector<float> spec(const Kv& kv, int g, const float* q, int n_ctx, float scale) {
  const int hd = kv.hd;
  std::vector<float> q16(hd), acc(hd, 0.f), out(hd);
  for (int i = 0; i < hd; ++i) q16[i] = round_f16(q[i]);
  float M = -std::numeric_limits<float>::infinity(), S = 0.f;
  for (int t = 0; t < n_ctx; ++t) {
    float dot = 0.f;
    for (int i = 0; i < hd; ++i) dot += q16[i] * fp16_to_fp32(kv.k(g, t)[i]);
    const float s = dot * scale;
    float ms = 1.f, vs = 1.f;
    if (s > M) {
      ms = std::exp(M - s);
      M = s;
      for (int i = 0; i < hd; ++i) acc[i] = round_f16(acc[i] * ms);
    } else {
      vs = std::exp(s - M);
    }
    for (int i = 0; i < hd; ++i) acc[i] = round_f16(acc[i] + fp16_to_fp32(kv.v(g, t)[i]) * vs);
    S = S * ms + vs;
  }
  const float inv = 1.f / S;
  for (int i = 0; i < hd; ++i) out[i] = acc[i] * inv;
  return out;
}

struct Shape {
  int P, hd, n_kv, group;
};
const Shape kShapes[] = {{16, 64, 3, 3}, {16, 128, 2, 4}, {16, 32, 1, 1}, {8, 48, 2, 2}, {16, 20, 1, 2}};

TEST(PagedAttention, MatchesReference) {
  LevelGuard guard;
  for (CpuLevel level : levels()) {
    set_cpu_level(level);
    for (const Shape& sh : kShapes) {
      const int n = 300;
      Kv kv(sh.P, sh.hd, sh.n_kv, n, 7);
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
              for (int i = 0; i < sh.hd; ++i) vmax = std::max(vmax, double(std::fabs(fp16_to_fp32(kv.v(g, t)[i]))));
            for (int i = 0; i < sh.hd; ++i)
              ASSERT_NEAR(out[j * sh.hd + i], ref[i], 1e-2 * vmax)
                  << cpu_level_name(level) << " hd=" << sh.hd << " n_ctx=" << n_ctx << " i=" << i;
          }
          if (level == CpuLevel::Scalar) {
            for (int j = 0; j < sh.group; ++j) {
              const auto sp = spec(kv, g, q.data() + j * sh.hd, n_ctx, scale);
              ASSERT_EQ(0, std::memcmp(sp.data(), out.data() + j * sh.hd, sp.size() * 4))
                  << "hd=" << sh.hd << " n_ctx=" << n_ctx;
            }
          }
        }
    }
  }
}

// A prompt of n tokens attending causally, computed one query at a time and in
// blocks of every size up to kAttnMaxTokens: all bitwise equal.
TEST(PagedAttention, TokenBlocksAreBatchInvariant) {
  LevelGuard guard;
  for (CpuLevel level : levels()) {
    set_cpu_level(level);
    for (const Shape& sh : kShapes) {
      const int n = 75;
      Kv kv(sh.P, sh.hd, sh.n_kv, n + 5, 3);
      const float scale = 1.f / std::sqrt(float(sh.hd));
      const int64_t qd = int64_t(sh.n_kv) * sh.group * sh.hd;
      // Large queries give peaked scores and frequent new maxima.
      const auto q = random_q(n * qd, 5, 6.f);
      std::vector<int> n_ctx(n);
      for (int i = 0; i < n; ++i) n_ctx[i] = i + 1 + (i % 3 == 0 ? 5 : 0);  // not always causal-contiguous
      std::vector<float> alone(n * qd), blocked(n * qd);
      std::vector<float> scratch(paged_attention_tokens_scratch(sh.P, sh.hd, sh.group, kAttnMaxTokens));
      for (int g = 0; g < sh.n_kv; ++g)
        for (int i = 0; i < n; ++i) {
          PagedAttentionArgs a = kv.args(g, scale);
          a.n_ctx = n_ctx[i];
          const int64_t off = i * qd + int64_t(g) * sh.group * sh.hd;
          paged_attention(a, q.data() + off, sh.group, alone.data() + off, scratch.data());
        }
      for (int bs : {1, 2, 3, 7, 16}) {
        std::fill(blocked.begin(), blocked.end(), std::nanf(""));
        for (int g = 0; g < sh.n_kv; ++g)
          for (int i0 = 0; i0 < n; i0 += bs) {
            PagedAttentionTokens t;
            t.n_tok = std::min(bs, n - i0);
            const int64_t off = i0 * qd + int64_t(g) * sh.group * sh.hd;
            t.q = q.data() + off;
            t.q_stride = qd;
            t.n_ctx = n_ctx.data() + i0;
            t.out = blocked.data() + off;
            t.out_stride = qd;
            paged_attention_tokens(kv.args(g, scale), sh.group, t, scratch.data());
          }
        ASSERT_EQ(0, std::memcmp(alone.data(), blocked.data(), alone.size() * 4))
            << cpu_level_name(level) << " hd=" << sh.hd << " block=" << bs;
      }
    }
  }
}

// The AVX2 softmax evaluates exp four lanes at a time; it must give exactly
// std::exp's bits (the attention arithmetic is specified with expf). Checked
// on every float in [-2, 0] with a stride, dense near 0, across [-120, 0], at
// the special values, and on random bit patterns.
TEST(PagedAttention, VectorExpMatchesStdExp) {
  if (detect_cpu_level() < CpuLevel::Avx2) GTEST_SKIP() << "no AVX2";
  std::vector<float> x;
  for (uint32_t b = 0x80000000u; b <= 0xC0000000u; b += 61) x.push_back(std::bit_cast<float>(b));
  for (uint32_t b = 0xC0000000u; b < 0xC3000000u; b += 997) x.push_back(std::bit_cast<float>(b));
  for (float v : {0.f, -0.f, 1.f, 88.7f, 89.f, -87.3f, -103.9f, -104.f, -150.f,
                  std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min()})
    x.push_back(v);
  std::mt19937 rng(9);
  for (int i = 0; i < 1000000; ++i) x.push_back(std::bit_cast<float>(uint32_t(rng())));
  while (x.size() % 4 != 3) x.push_back(-1.f);  // leave a scalar tail
  std::vector<float> y(x.size());
  expf_avx2(x.data(), y.data(), int(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const float e = std::exp(x[i]);
    if (std::isnan(e)) {
      ASSERT_TRUE(std::isnan(y[i])) << x[i];
    } else {
      ASSERT_EQ(std::bit_cast<uint32_t>(e), std::bit_cast<uint32_t>(y[i])) << "x=" << x[i];
    }
  }
  // In place, as the kernel calls it.
  std::vector<float> z = x;
  expf_avx2(z.data(), z.data(), int(z.size()));
  ASSERT_EQ(0, std::memcmp(z.data(), y.data(), z.size() * 4));
}

}  // namespace
}  // namespace pc
