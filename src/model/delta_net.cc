#include "model/delta_net.h"

#include <cmath>
#include <cstring>

#include "kernels/elementwise.h"
#include "kernels/fixed_exp.h"
#include "kernels/thread_pool.h"
#include "model/recurrent_state.h"

namespace pc {

namespace {

inline float sigmoid(float x) { return 1.f / (1.f + fixed_exp(-x)); }
inline float silu(float x) { return x * sigmoid(x); }
inline float softplus(float x) { return x > 20.f ? x : std::log1p(std::exp(x)); }

// The causal conv of one token, in place: x [channels] in, silu(conv) out;
// state [d_conv-1][channels] shifts by one token.
void conv_token(const DeltaNetConfig& c, const float* taps, float* state, float* x) {
  const int64_t C = c.channels(), K = c.d_conv;
  for (int64_t ch = 0; ch < C; ++ch) {
    const float* w = taps + ch * K;
    float r = 0.f;
    for (int64_t k = 0; k < K - 1; ++k) r += w[k] * state[k * C + ch];
    r += w[K - 1] * x[ch];
    for (int64_t k = 0; k + 1 < K - 1; ++k) state[k * C + ch] = state[(k + 1) * C + ch];
    if (K > 1) state[(K - 2) * C + ch] = x[ch];
    x[ch] = silu(r);
  }
}

// x / sqrt(Σx² + eps) into y.
void l2_norm(const float* x, float* y, int64_t n, float eps) {
  float s = 0.f;
  for (int64_t i = 0; i < n; ++i) s += x[i] * x[i];
  const float inv = 1.f / std::sqrt(s + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * inv;
}

// One token of v head j: the delta rule on S [d][d] (S[r][c], r over k, c over
// v), o [d] the head's output before its norm and gate.
void delta_token(int64_t d, float* S, const float* q, const float* k, const float* v, float beta, float decay,
                 float scale, float* o) {
  float u[1024], dl[1024];
  for (int64_t i = 0; i < d * d; ++i) S[i] *= decay;
  for (int64_t col = 0; col < d; ++col) u[col] = 0.f;
  for (int64_t r = 0; r < d; ++r)
    for (int64_t col = 0; col < d; ++col) u[col] += S[r * d + col] * k[r];
  for (int64_t col = 0; col < d; ++col) dl[col] = beta * (v[col] - u[col]);
  for (int64_t r = 0; r < d; ++r)
    for (int64_t col = 0; col < d; ++col) S[r * d + col] += k[r] * dl[col];
  for (int64_t col = 0; col < d; ++col) o[col] = 0.f;
  for (int64_t r = 0; r < d; ++r) {
    const float qr = q[r] * scale;
    for (int64_t col = 0; col < d; ++col) o[col] += S[r * d + col] * qr;
  }
}

}  // namespace

void DeltaNet::run(const DeltaNetConfig& c, float eps, const DeltaNetWeights& w, int32_t state_index,
                   const float* xn, int64_t m, std::span<const std::vector<int32_t>> seq_rows,
                   std::span<RecurrentState* const> states, std::span<const std::span<const StateCapture>> captures,
                   float* out, ThreadPool& pool) {
  const int64_t C = c.channels(), D = c.d_head, NV = c.n_v_head, NK = c.n_k_head, I = c.d_inner();
  qkv_.resize(size_t(m * C));
  z_.resize(size_t(m * I));
  b_.resize(size_t(m * NV));
  a_.resize(size_t(m * NV));
  o_.resize(size_t(m * I));
  const MatmulOut proj[] = {{w.qkv, qkv_.data()}, {w.z, z_.data()}, {w.beta, b_.data()}, {w.alpha, a_.data()}};
  matmul_many(proj, xn, m, pool);
  const int64_t n_seq = int64_t(seq_rows.size());
  // Captures of sequence s: the state is copied right after the token that brings it
  // to `after` tokens (base + k + 1 after the k-th row of this batch).
  auto caps = [&](int64_t s) { return size_t(s) < captures.size() ? captures[s] : std::span<const StateCapture>(); };
  // The conv, token after token per sequence.
  pool.parallel_for(n_seq, [&](int64_t s, int) {
    if (seq_rows[s].empty()) return;
    float* state = states[s]->conv(state_index);
    const int64_t n = states[s]->conv_floats();
    int64_t t = states[s]->n_tokens();
    for (int32_t i : seq_rows[s]) {
      conv_token(c, w.conv.data(), state, qkv_.data() + i * C);
      ++t;
      for (const StateCapture& cap : caps(s))
        if (cap.after == t) std::memcpy(cap.into->conv(state_index), state, size_t(n) * sizeof(float));
    }
  });
  // The delta rule, token after token per sequence and v head.
  const float scale = 1.f / std::sqrt(float(D));
  pool.parallel_for(n_seq * NV, [&](int64_t task, int) {
    const int64_t s = task / NV, j = task % NV, kh = j % NK;
    if (seq_rows[s].empty()) return;
    float* S = states[s]->delta(state_index) + j * D * D;
    float q[1024], k[1024];
    int64_t t = states[s]->n_tokens();
    for (int32_t i : seq_rows[s]) {
      const float* row = qkv_.data() + i * C;
      l2_norm(row + kh * D, q, D, eps);
      l2_norm(row + (NK + kh) * D, k, D, eps);
      const float* v = row + (2 * NK + j) * D;
      const float beta = sigmoid(b_[i * NV + j]);
      const float decay = std::exp(softplus(a_[i * NV + j] + w.dt_bias[j]) * w.a[j]);
      float* o = o_.data() + i * I + j * D;
      delta_token(D, S, q, k, v, beta, decay, scale, o);
      rms_norm(o, w.norm.data(), o, D, eps);
      const float* z = z_.data() + i * I + j * D;
      for (int64_t d = 0; d < D; ++d) o[d] *= silu(z[d]);
      ++t;
      for (const StateCapture& cap : caps(s))
        if (cap.after == t) std::memcpy(cap.into->delta(state_index) + j * D * D, S, size_t(D * D) * sizeof(float));
    }
  });
  matmul(w.out, o_.data(), m, out, pool);
}

}  // namespace pc
