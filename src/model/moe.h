// Mixture-of-experts feed-forward (LayerConfig::ffn kMoe; MoeConfig states the
// routing): a router picks each token's experts, the batch's tokens are grouped
// by expert so that each active expert runs one matmul over its rows, and each
// token's expert outputs are summed in its own selection order.
//
// Batch invariance: a token's result depends only on its own row. The router
// and expert matmuls are row-invariant (kernels/matmul.h: a row's output never
// depends on the other rows), the selection and weights are per token, and the
// weighted sum runs over the token's experts in rank order — so which other
// tokens share an expert, the batch size and the thread count change nothing.
// A decode step (one token) reads only its n_used experts' weights.
#pragma once
#include <cstdint>
#include <vector>

#include "common/line_vector.h"
#include "kernels/matmul.h"
#include "model/config.h"

namespace pc {

class ThreadPool;

// One layer's experts. Expert e's matrices are views of slice e of the stored
// [in, out, n_expert] tensors (row_range of the whole).
struct MoeWeights {
  WeightView router;                       // n_embd → n_expert (ffn_gate_inp)
  std::vector<float> router_bias;          // [n_expert] (MoeConfig::router_bias), else empty
  std::vector<WeightView> gate, up, down;  // [n_expert]: n_embd → n_ff, n_embd → n_ff, n_ff → n_embd
  std::vector<float> gate_bias, up_bias;   // [n_expert][n_ff] (MoeConfig::expert_bias), else empty
  std::vector<float> down_bias;            // [n_expert][n_embd], else empty
  // The shared expert (MoeConfig::n_ff_shared > 0): a dense SwiGLU FFN whose
  // output is scaled by sigmoid(shared_gate · h).
  std::vector<float> shared_gate;          // [n_embd] (ffn_gate_inp_shexp)
  WeightView sh_gate, sh_up, sh_down;      // n_embd → n_ff_shared, n_ff_shared → n_embd
};

// gpt-oss's clamped SwiGLU: g' = min(g, 7), u' = clamp(u, -7, 7),
// out = g' * sigmoid(1.702 g') * (u' + 1), sigmoid(x) = 1 / (1 + fixed_exp(-x)).
void swiglu_clamped(const float* gate, const float* up, float* out, int64_t n);

// Picks a token's experts from its router logits (MoeConfig::gating): the
// n_used best in rank order (ties: the lower expert id first) and their
// weights. logits: [n_expert]; experts, weights: [n_used].
void route_token(const MoeConfig& c, const float* logits, int32_t* experts, float* weights);

// The run state of MoE layers: buffers grown on demand and reused.
class MoeFfn {
 public:
  // out[m][n_embd] = the MoE FFN of xn[m][n_embd] (the normed residual).
  void run(const MoeConfig& c, int64_t n_embd, const MoeWeights& w, const float* xn, int64_t m, float* out,
           ThreadPool& pool);

 private:
  void run_experts(const MoeConfig& c, int64_t n_embd, const MoeWeights& w, int64_t m, ThreadPool& pool);
  void add_shared(const MoeConfig& c, int64_t n_embd, const MoeWeights& w, const float* xn, int64_t m, float* out,
                  ThreadPool& pool);

  std::vector<float> logits_;     // [m][n_expert]
  std::vector<int32_t> experts_;  // [m][n_used] selected experts, rank order
  std::vector<float> weights_;    // [m][n_used]
  std::vector<int32_t> first_;    // [n_expert + 1] each expert's first (token, rank) in order_
  std::vector<int32_t> cursor_;   // [n_expert] fill position of each expert while grouping
  std::vector<int32_t> order_;    // [m * n_used] (token, rank) pairs i * n_used + k grouped by expert
  std::vector<int32_t> row_of_;   // [m * n_used] where pair i * n_used + k's output is in ye_
  LineVector<float> xe_;         // [m * n_used][n_embd] the inputs, grouped by expert
  LineVector<float> ge_, ue_;    // [m * n_used][n_ff]
  LineVector<float> ye_;         // [m * n_used][n_embd] expert outputs
  std::vector<MatmulOut> gate_up_;  // decode: [n_used * 2] every selected expert's gate and up
  std::vector<MatmulIn> down_;      // decode: [n_used] every selected expert's down projection
  LineVector<float> sg_, sh_g_, sh_u_, sh_y_;  // shared expert: gate logit [m], [m][n_ff_shared] x2, [m][n_embd]
};

}  // namespace pc
