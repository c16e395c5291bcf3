// Gated DeltaNet, the linear-attention mixer of Qwen3.5's recurrent layers
// (LayerConfig::mixer kDeltaNet; DeltaNetConfig the shape). Per token t, with
// h the normed input:
//
//   qkv = W_qkv h, z = W_z h, b = W_beta h, a = W_alpha h
//   c   = silu(causal depthwise conv of qkv over the last d_conv tokens)
//         (tap d_conv-1 the current token; the conv state holds the previous
//          d_conv-1 qkv vectors, zeros before the sequence's first token)
//   q, k, v = heads of c (q: n_k heads, k: n_k heads, v: n_v heads, d each);
//   q, k L2-normalized: x / sqrt(Σx² + eps)
//   per v head j, with k head j mod n_k:
//     β = sigmoid(b_j), g = softplus(a_j + dt_bias_j) · A_j (A < 0), decay = exp(g)
//     S ← decay · S; u = Sᵀ k; S ← S + k (β (v − u))ᵀ; o_j = Sᵀ q / √d
//     o_j ← rmsnorm(o_j, ssm_norm) · silu(z_j)
//   out = W_out [o_0 … o_{n_v-1}]
//
// Every token runs this arithmetic in this order, one token after the other,
// in whatever batch or chunk it comes: the state after token t is a function
// of tokens 0..t only (bit for bit), which makes a saved state a valid resume
// point (recurrent_state.h). The projections are row-invariant matmuls.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "common/line_vector.h"
#include "kernels/matmul.h"
#include "model/config.h"

namespace pc {

class RecurrentState;
struct StateCapture;
class ThreadPool;

struct DeltaNetWeights {
  WeightView qkv;                  // n_embd → channels: q heads, then k heads, then v heads
  WeightView z;                    // n_embd → d_inner (attn_gate), d_head rows per v head
  WeightView beta, alpha;          // n_embd → n_v_head (ssm_beta, ssm_alpha)
  std::vector<float> conv;         // [channels][d_conv] (ssm_conv1d)
  std::vector<float> dt_bias, a;   // [n_v_head] (ssm_dt.bias; ssm_a = -exp(A_log) < 0)
  std::vector<float> norm;         // [d_head] (ssm_norm, shared by all heads)
  WeightView out;                  // d_inner → n_embd (ssm_out)
};

// The run state of Gated DeltaNet layers: buffers grown on demand and reused.
class DeltaNet {
 public:
  // One layer over a batch. xn: [m][n_embd] normed inputs. seq_rows[s]: the
  // batch rows of sequence s, in token order, continuing states[s] (whose layer
  // `state_index` is read and updated). captures[s] (empty span: none; the span
  // itself may be empty): copies of layer `state_index`'s state after given tokens of
  // sequence s (recurrent_state.h StateCapture). out: [m][n_embd].
  void run(const DeltaNetConfig& c, float eps, const DeltaNetWeights& w, int32_t state_index, const float* xn,
           int64_t m, std::span<const std::vector<int32_t>> seq_rows, std::span<RecurrentState* const> states,
           std::span<const std::span<const StateCapture>> captures, float* out, ThreadPool& pool);

 private:
  LineVector<float> qkv_;   // [m][channels] projections, then the conv's output
  LineVector<float> z_;     // [m][d_inner]
  std::vector<float> b_, a_; // [m][n_v_head]
  LineVector<float> o_;     // [m][d_inner]
};

}  // namespace pc
