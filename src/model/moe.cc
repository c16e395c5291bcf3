#include "model/moe.h"

#include <algorithm>
#include <cstring>

#include "kernels/elementwise.h"
#include "kernels/fixed_exp.h"
#include "kernels/thread_pool.h"

namespace pc {

namespace {

inline float sigmoid(float x) { return 1.f / (1.f + fixed_exp(-x)); }

void add_row(float* y, const std::vector<float>& bias, int64_t e, int64_t n) {
  if (!bias.empty()) add_inplace(y, bias.data() + e * n, n);
}

}  // namespace

void swiglu_clamped(const float* gate, const float* up, float* out, int64_t n) {
  constexpr float kLimit = 7.f, kAlpha = 1.702f;
  for (int64_t i = 0; i < n; ++i) {
    const float g = std::min(gate[i], kLimit);
    const float u = std::clamp(up[i], -kLimit, kLimit);
    out[i] = g * sigmoid(kAlpha * g) * (u + 1.f);
  }
}

namespace {

// One routed row of expert e: biases added to its gate and up rows, then the
// activation, written over the gate row.
void activate_row(float* g, float* u, const MoeWeights& w, const MoeConfig& c, int64_t e, int64_t F) {
  add_row(g, w.gate_bias, e, F);
  add_row(u, w.up_bias, e, F);
  if (c.activation == Activation::kSwiGluClamped)
    swiglu_clamped(g, u, g, F);
  else
    swiglu(g, u, g, F);
}

}  // namespace

void route_token(const MoeConfig& c, const float* logits, int32_t* experts, float* weights) {
  const int64_t n = c.n_expert, k = c.n_used;
  // Selection by logit (softmax is monotonic, so the same experts as by p).
  int32_t idx[4096];
  for (int64_t e = 0; e < n; ++e) idx[e] = int32_t(e);
  std::partial_sort(idx, idx + k, idx + n, [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  float mx = logits[idx[0]];
  if (c.gating == MoeGating::kSoftmaxTopK) {
    // p = softmax over all experts; weights p_e / Σ selected p (the full
    // softmax's denominator cancels, but its rounding is part of the result).
    float sum = 0.f;
    for (int64_t e = 0; e < n; ++e) sum += fixed_exp(logits[e] - mx);
    float sel = 0.f;
    for (int64_t j = 0; j < k; ++j) {
      weights[j] = fixed_exp(logits[idx[j]] - mx) / sum;
      sel += weights[j];
    }
    for (int64_t j = 0; j < k; ++j) weights[j] /= sel;
  } else {
    float sum = 0.f;
    for (int64_t j = 0; j < k; ++j) {
      weights[j] = fixed_exp(logits[idx[j]] - mx);
      sum += weights[j];
    }
    for (int64_t j = 0; j < k; ++j) weights[j] /= sum;
  }
  for (int64_t j = 0; j < k; ++j) experts[j] = idx[j];
}

void MoeFfn::run(const MoeConfig& c, int64_t E, const MoeWeights& w, const float* xn, int64_t m, float* out,
                 ThreadPool& pool) {
  const int64_t K = c.n_used, N = c.n_expert;
  logits_.resize(size_t(m * N));
  experts_.resize(size_t(m * K));
  weights_.resize(size_t(m * K));
  matmul(w.router, xn, m, logits_.data(), pool);
  for (int64_t i = 0; i < m; ++i) {
    float* r = logits_.data() + i * N;
    if (!w.router_bias.empty()) add_inplace(r, w.router_bias.data(), N);
    route_token(c, r, experts_.data() + i * K, weights_.data() + i * K);
  }
  // Group the (token, rank) pairs by expert, tokens in batch order (a counting sort).
  first_.assign(size_t(N + 1), 0);
  for (int64_t p = 0; p < m * K; ++p) ++first_[experts_[p] + 1];
  for (int64_t e = 0; e < N; ++e) first_[e + 1] += first_[e];
  order_.resize(size_t(m * K));
  row_of_.resize(size_t(m * K));
  cursor_.assign(first_.begin(), first_.end() - 1);
  for (int64_t p = 0; p < m * K; ++p) order_[cursor_[experts_[p]]++] = int32_t(p);
  for (int64_t r = 0; r < m * K; ++r) row_of_[order_[r]] = int32_t(r);
  xe_.resize(size_t(m * K * E));
  for (int64_t r = 0; r < m * K; ++r)
    std::memcpy(xe_.data() + r * E, xn + (order_[r] / K) * E, sizeof(float) * E);
  run_experts(c, E, w, m, pool);
  // Each token's experts, weighted, summed in rank order.
  for (int64_t i = 0; i < m; ++i) {
    float* o = out + i * E;
    std::fill(o, o + E, 0.f);
    for (int64_t k = 0; k < K; ++k) {
      const float wk = weights_[i * K + k];
      const float* y = ye_.data() + int64_t(row_of_[i * K + k]) * E;
      for (int64_t d = 0; d < E; ++d) o[d] += wk * y[d];
    }
  }
  if (c.n_ff_shared > 0) add_shared(c, E, w, xn, m, out, pool);
}

// Every active expert over its rows of xe_ (rows [first_[e], first_[e + 1])).
void MoeFfn::run_experts(const MoeConfig& c, int64_t E, const MoeWeights& w, int64_t m, ThreadPool& pool) {
  const int64_t F = c.n_ff, rows = m * c.n_used;
  ge_.resize(size_t(rows * F));
  ue_.resize(size_t(rows * F));
  ye_.resize(size_t(rows * E));
  if (m == 1) {
    // Decode: one row per selected expert, all the same x. Every expert's gate and up
    // run in one pool dispatch and every down projection in another (the same
    // kernels on the same rows as below, so bitwise the same results), so the
    // threads stream the active experts' weights back to back instead of waiting at
    // 3 dispatches per expert.
    gate_up_.clear();
    down_.clear();
    for (int64_t r = 0; r < rows; ++r) {
      const int32_t e = experts_[order_[r]];
      gate_up_.push_back({w.gate[e], ge_.data() + r * F});
      gate_up_.push_back({w.up[e], ue_.data() + r * F});
    }
    matmul_many(gate_up_, xe_.data(), 1, pool);
    for (int64_t r = 0; r < rows; ++r) {
      const int32_t e = experts_[order_[r]];
      float* g = ge_.data() + r * F;
      activate_row(g, ue_.data() + r * F, w, c, e, F);
      down_.push_back({w.down[e], g, ye_.data() + r * E});
    }
    matmul_each(down_, 1, pool);
    for (int64_t r = 0; r < rows; ++r) add_row(ye_.data() + r * E, w.down_bias, experts_[order_[r]], E);
    return;
  }
  for (int64_t e = 0; e < c.n_expert; ++e) {
    const int64_t r0 = first_[e], n = first_[e + 1] - r0;
    if (n == 0) continue;
    const MatmulOut gate_up[] = {{w.gate[e], ge_.data() + r0 * F}, {w.up[e], ue_.data() + r0 * F}};
    matmul_many(gate_up, xe_.data() + r0 * E, n, pool);
    for (int64_t r = r0; r < r0 + n; ++r) {
      float* g = ge_.data() + r * F;
      activate_row(g, ue_.data() + r * F, w, c, e, F);
    }
    matmul(w.down[e], ge_.data() + r0 * F, n, ye_.data() + r0 * E, pool);
    for (int64_t r = r0; r < r0 + n; ++r) add_row(ye_.data() + r * E, w.down_bias, e, E);
  }
}

// out += sigmoid(shared_gate · h) * down(silu(gate h) * (up h)), per token.
void MoeFfn::add_shared(const MoeConfig& c, int64_t E, const MoeWeights& w, const float* xn, int64_t m, float* out,
                        ThreadPool& pool) {
  const int64_t F = c.n_ff_shared;
  sg_.resize(size_t(m));
  sh_g_.resize(size_t(m * F));
  sh_u_.resize(size_t(m * F));
  sh_y_.resize(size_t(m * E));
  const MatmulOut gate_up[] = {{w.sh_gate, sh_g_.data()}, {w.sh_up, sh_u_.data()}};
  matmul_many(gate_up, xn, m, pool);
  for (int64_t i = 0; i < m; ++i) {
    float s = 0.f;
    for (int64_t d = 0; d < E; ++d) s += w.shared_gate[d] * xn[i * E + d];
    sg_[i] = s;
  }
  for (int64_t i = 0; i < m; ++i) swiglu(sh_g_.data() + i * F, sh_u_.data() + i * F, sh_g_.data() + i * F, F);
  matmul(w.sh_down, sh_g_.data(), m, sh_y_.data(), pool);
  for (int64_t i = 0; i < m; ++i) {
    const float g = sigmoid(sg_[i]);
    float* o = out + i * E;
    const float* y = sh_y_.data() + i * E;
    for (int64_t d = 0; d < E; ++d) o[d] += g * y[d];
  }
}

}  // namespace pc
