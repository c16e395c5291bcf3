// Hyperparameters of a model, read from GGUF metadata: the shape, and a
// description of every layer that the one forward pass (model/forward.cc) reads.
// An architecture is data here — which norms, which activation, which RoPE, which
// attention window — never a branch on the architecture's name in the forward pass.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace pc {

class GgufFile;

enum class Arch { Llama, Qwen2, Qwen3, Gemma2, Gemma3, Phi3, Qwen3Moe, GptOss, Qwen35, Qwen35Moe };

// The feed-forward gate: out = act(gate) * up.
//   kSwiGlu      act = silu                        (llama, qwen, phi3)
//   kGeGluTanh   act = gelu, tanh approximation    (gemma2, gemma3)
//   kSwiGluClamped  gpt-oss's experts: g' = min(g, 7), u' = clamp(u, -7, 7),
//                out = g' * sigmoid(1.702 g') * (u' + 1)   (moe.h)
enum class Activation { kSwiGlu, kGeGluTanh, kSwiGluClamped };

// What mixes information across tokens in a layer.
//   kAttention  softmax attention over the layer's KV pages
//   kDeltaNet   Gated DeltaNet linear attention (qwen35): a short causal conv and
//               a delta-rule recurrence whose fixed-size state lives in the
//               sequence's RecurrentState, not in KV pages (delta_net.h)
enum class Mixer { kAttention, kDeltaNet };

// The feed-forward block.
//   kDense  w_down(act(w_gate h) * (w_up h))
//   kMoe    routed experts (+ a shared expert) (moe.h, MoeConfig)
enum class Ffn { kDense, kMoe };

// How a layer's projections are stored.
//   kSeparate  attn_q / attn_k / attn_v, ffn_gate / ffn_up
//   kFused     attn_qkv (rows: Q, then K, then V) and ffn_up (rows: gate, then up) (phi3)
enum class Projections { kSeparate, kFused };

// Which RoPE frequency divisors a layer uses (RopeParams::factors).
//   kNone       all 1
//   kRopeFreqs  the file's rope_freqs tensor (Llama 3 files that have one)
//   kLongRope   rope_factors_long or rope_factors_short, chosen by the context size
//               (ModelConfig::longrope_long), with cos/sin times rope_attn_factor (phi3)
//   kYarn       YaRN (rope.scaling.type yarn; gpt-oss): pair i's angle blends the
//               interpolated (/ factor) and extrapolated angles by a ramp over the
//               pairs, with cos/sin times rope_attn_factor = 1 + 0.1 ln(factor)
//               (model.cc yarn_factors states it)
//   kSections   M-RoPE sections (rope.dimension_sections; qwen35), text only: pairs
//               of the t, h and w sections rotate by the token's position, pairs
//               of the e section (position 0) do not rotate
enum class RopeFactors { kNone, kRopeFreqs, kLongRope, kYarn, kSections };

// One transformer block (cf. gemma.cpp's LayerConfig). Shapes are the model's.
//
//   h = rmsnorm(x, attn_norm)
//   q, k, v = projections of h (+ bias when qkv_bias); per head rmsnorm of q and k
//             when qk_norm; RoPE of q and k with rope_base / rope_freq_scale
//   a = attention(q, k, v): scores dot(q, k) * attn_scale, then
//       attn_softcap * tanh(score / attn_softcap) when attn_softcap > 0; keys at
//       positions j with pos - j >= window masked when window > 0
//   x += post_attn_norm ? rmsnorm(wo a, post_attention_norm) : wo a
//   h = rmsnorm(x, ffn_norm);  f = w_down(act(w_gate h) * (w_up h))
//   x += post_ffn_norm ? rmsnorm(f, post_ffw_norm) : f
//
// Variants read by the same pass: attn_gate (qwen35 full attention: wq's rows
// per head are [q | gate], and a *= sigmoid(gate) before wo), attn_sinks
// (gpt-oss: a per-head logit with no value in the softmax), out_bias (wo's bias),
// mixer kDeltaNet (the attention sub-block is a Gated DeltaNet; delta_net.h),
// ffn kMoe (the FFN is routed experts; moe.h).
struct LayerConfig {
  Mixer mixer = Mixer::kAttention;
  Ffn ffn = Ffn::kDense;
  int32_t state_index = -1;  // kDeltaNet: which layer of RecurrentState is its state
  bool attn_gate = false;
  bool attn_sinks = false;
  bool out_bias = false;
  bool qkv_bias = false;
  bool qk_norm = false;
  bool post_attn_norm = false;
  bool post_ffn_norm = false;
  Projections projections = Projections::kSeparate;
  Activation activation = Activation::kSwiGlu;
  int32_t window = 0;  // sliding-window size in positions; 0: global attention
  float rope_base = 10000.f;
  float rope_freq_scale = 1.f;  // 1 / linear scaling factor
  RopeFactors rope_factors = RopeFactors::kNone;
  float attn_scale = 1.f;       // multiplies q·k (1/sqrt(head_dim) unless the architecture says)
  float attn_softcap = 0.f;     // 0: none
};

// Routed experts (LayerConfig::ffn kMoe):
//   r = router h (+ router bias)                       [n_expert] logits
//   kSoftmaxTopK: p = softmax(r), the n_used largest p, weights p_e / Σ selected p
//                 (qwen3moe, qwen35moe)
//   kTopKSoftmax: the n_used largest r, weights softmax over those r (gpt-oss)
//   f = Σ_e w_e (down_e act(gate_e h + bg_e) * (up_e h + bu_e) + bd_e)   (biases:
//       expert_bias), + sigmoid(shared_gate · h) * shared FFN(h) with a shared expert
enum class MoeGating { kSoftmaxTopK, kTopKSoftmax };
struct MoeConfig {
  int64_t n_expert = 0;
  int64_t n_used = 0;        // experts per token
  int64_t n_ff = 0;          // an expert's hidden width
  int64_t n_ff_shared = 0;   // the shared expert's hidden width (0: none)
  MoeGating gating = MoeGating::kSoftmaxTopK;
  bool router_bias = false;
  bool expert_bias = false;
  Activation activation = Activation::kSwiGlu;
};

// Gated DeltaNet layers (LayerConfig::mixer kDeltaNet; delta_net.h):
//   qkv conv channels = 2 n_k_head d_head + n_v_head d_head
struct DeltaNetConfig {
  int64_t d_conv = 0;     // causal conv length (ssm.conv_kernel)
  int64_t d_head = 0;     // head size of q, k and v (ssm.state_size)
  int64_t n_k_head = 0;   // q/k heads (ssm.group_count)
  int64_t n_v_head = 0;   // v heads (ssm.time_step_rank); v head j uses k head j mod n_k_head
  int64_t channels() const { return (2 * n_k_head + n_v_head) * d_head; }
  int64_t d_inner() const { return n_v_head * d_head; }
};

struct ModelConfig {
  Arch arch = Arch::Llama;
  std::string arch_name;     // "llama", "qwen2", "qwen3", "gemma2", "gemma3", "phi3"
  int64_t n_vocab = 0;
  int64_t n_embd = 0;        // residual width
  int64_t n_layer = 0;
  int64_t n_head = 0;        // query heads
  int64_t n_kv_head = 0;     // key/value heads (grouped-query attention when < n_head)
  int64_t head_dim = 0;      // per head; n_embd / n_head unless key_length says otherwise
  int64_t n_ff = 0;          // feed-forward hidden width
  int64_t n_ctx_train = 0;   // context length the model was trained with
  float rms_eps = 1e-5f;
  // RoPE: theta_i = pos * freq_scale * base^(-2i/n_rot) / factor_i (base, freq_scale
  // and the factor set per layer, LayerConfig), applied to the first n_rot dims of
  // each head, to adjacent pairs (normal) or to halves (NeoX).
  int64_t n_rot = 0;
  bool rope_neox = false;
  // LongRoPE (phi3 with rope.scaling.original_context_length < context_length): the
  // factor set is chosen once, from the context size the model is loaded for (as
  // llama.cpp does): long when it exceeds n_ctx_orig, else short. cos/sin are
  // multiplied by rope_attn_factor (rope.scaling.attn_factor, 1 when absent).
  int64_t n_ctx_orig = 0;
  bool longrope_long = false;
  float rope_attn_factor = 1.f;
  // YaRN (RopeFactors::kYarn): the scaling factor; n_ctx_orig is the original context.
  float yarn_factor = 1.f;
  // M-RoPE sections [t, h, w, e] in rotary pairs (RopeFactors::kSections).
  std::vector<int32_t> rope_sections;
  float embd_scale = 1.f;      // token embeddings times this (gemma: sqrt(n_embd))
  float final_softcap = 0.f;   // logits = c * tanh(logits / c) when > 0
  std::string ffn_norm_tensor = "ffn_norm";  // the FFN's input norm (qwen35, gpt-oss: post_attention_norm)
  MoeConfig moe;               // n_expert 0: no MoE layers
  DeltaNetConfig delta_net;    // d_head 0: no DeltaNet layers
  int64_t n_recurrent = 0;     // layers with a recurrent state (kDeltaNet)
  std::vector<LayerConfig> layers;  // [n_layer]

  // Reads and validates the config; throws pc::Error naming the missing/bad key.
  // context_length: the context size the model runs with (0: the file's
  // context_length); it selects the LongRoPE factor set.
  static ModelConfig from_gguf(const GgufFile& f, int64_t context_length = 0);
  std::string describe() const;
  // Whether any layer attends through a sliding window.
  bool has_window() const;
};

}  // namespace pc
