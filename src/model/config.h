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

enum class Arch { Llama, Qwen2, Qwen3, Gemma2, Gemma3, Phi3 };

// The feed-forward gate: out = act(gate) * up.
//   kSwiGlu      act = silu                        (llama, qwen, phi3)
//   kGeGluTanh   act = gelu, tanh approximation    (gemma2, gemma3)
enum class Activation { kSwiGlu, kGeGluTanh };

// How a layer's projections are stored.
//   kSeparate  attn_q / attn_k / attn_v, ffn_gate / ffn_up
//   kFused     attn_qkv (rows: Q, then K, then V) and ffn_up (rows: gate, then up) (phi3)
enum class Projections { kSeparate, kFused };

// Which RoPE frequency divisors a layer uses (RopeParams::factors).
//   kNone       all 1
//   kRopeFreqs  the file's rope_freqs tensor (Llama 3 files that have one)
//   kLongRope   rope_factors_long or rope_factors_short, chosen by the context size
//               (ModelConfig::longrope_long), with cos/sin times rope_attn_factor (phi3)
enum class RopeFactors { kNone, kRopeFreqs, kLongRope };

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
struct LayerConfig {
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
  float embd_scale = 1.f;      // token embeddings times this (gemma: sqrt(n_embd))
  float final_softcap = 0.f;   // logits = c * tanh(logits / c) when > 0
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
