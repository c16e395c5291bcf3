// A loaded model: the mapped GGUF file, its config, weight views and tokenizer.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "kernels/elementwise.h"
#include "kernels/matmul.h"
#include "model/config.h"
#include "model/delta_net.h"
#include "model/moe.h"

namespace pc {

class GgufFile;
class Tokenizer;

// One transformer block. Matrices point into the mapped file (no copy), or
// into the model's repacked copy (Model::WeightLayout);
// 1-D tensors (norms, biases) are converted to F32 and owned here.
struct LayerWeights {
  std::vector<float> attn_norm;               // [n_embd]
  // Attention (LayerConfig::mixer kAttention). With attn_gate, wq gives 2*hd
  // values per head: the head's query, then its output gate.
  WeightView wq, wk, wv, wo;                   // q: n_embd → n_head*hd, k/v: → n_kv*hd, o: n_head*hd → n_embd
  std::vector<float> bo;                       // [n_embd] when LayerConfig::out_bias, else empty
  std::vector<float> sinks;                    // [n_head] when LayerConfig::attn_sinks, else empty
  DeltaNetWeights delta_net;                   // LayerConfig::mixer kDeltaNet
  std::vector<float> bq, bk, bv;               // qwen2 biases, empty otherwise
  std::vector<float> q_norm, k_norm;           // qwen3 per-head RMSNorm weights [head_dim], empty otherwise
  std::vector<float> post_attn_norm;           // [n_embd] when LayerConfig::post_attn_norm, else empty
  std::vector<float> ffn_norm;                 // [n_embd]
  WeightView w_gate, w_up, w_down;             // gate/up: n_embd → n_ff, down: n_ff → n_embd (Ffn::kDense)
  MoeWeights moe;                              // Ffn::kMoe
  std::vector<float> post_ffn_norm;            // [n_embd] when LayerConfig::post_ffn_norm, else empty
};
// Fused projections (LayerConfig::projections kFused) are views of row ranges of
// the one stored matrix: attn_qkv's rows [0, q_dim) are wq, then wk, then wv;
// ffn_up's rows [0, n_ff) are w_gate, [n_ff, 2 n_ff) w_up.

class Model {
 public:
  // Loads a GGUF model. Throws pc::Error for unsupported architectures, missing
  // tensors, tensors of unsupported types (naming tensor and type) or wrong shapes.
  // The weights are copied into huge-page memory unless `residency` says to map
  // the file (see Residency).
  // context_length: the context size the model runs with (0: the file's
  // context_length); it selects LongRoPE's factor set (ModelConfig).
  // layout: kForKernels repacks the matrices the kernels in use read faster
  // in another layout (matmul_repacked_type(), kernels/weight_repack.h: Q4_K,
  // Q5_K, Q6_K, Q8_0 and the other block types to their X16 layouts on every
  // SIMD path) at load: in place in the file's copy in memory, or, from a
  // mapped file, into anonymous memory, giving the file's pages of those
  // tensors back; kFastest repacks a type only where its X16 layout runs a
  // reference request (512 prompt and 128 generated tokens) faster on this
  // machine (fastest_layout(), kernels/layout_choice.h: always on AVX-512,
  // measured once per type and process at the AVX2 level); kAsStored keeps every matrix as stored. The
  // logits are bitwise the same either way.
  enum class WeightLayout { kForKernels, kFastest, kAsStored };
  // "all", "auto", "none" (the CLI's --repack) -> the layout; false otherwise.
  static bool weight_layout_from_name(const std::string& name, WeightLayout* layout);
  static const char* weight_layout_name(WeightLayout layout);  // the inverse
  static std::unique_ptr<Model> load(const std::string& path, Residency residency = Residency::kMemory,
                                     int64_t context_length = 0, WeightLayout layout = WeightLayout::kForKernels);
  ~Model();

  const ModelConfig& config() const { return config_; }
  const GgufFile& file() const { return *file_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  // Identifies the KV the model computes, for cache keys (KvNamespace::model):
  // architecture, shape, a hash of the tensor bytes sampled at fixed strides and
  // the RoPE factor set in use (LongRoPE's long or short set) (hex string).
  const std::string& fingerprint() const { return fingerprint_; }
  // The matrices' layouts, one entry per stored type, e.g. "Q4_K: Q4_K_X16
  // (154 tensors)", with the decode speeds behind a measured choice.
  const std::string& weight_layouts() const { return weight_layouts_; }

  const WeightView& token_embd() const { return token_embd_; }
  const WeightView& output() const { return output_; }       // token_embd when tied
  const std::vector<float>& output_norm() const { return output_norm_; }
  const std::vector<LayerWeights>& layers() const { return layers_; }
  // Per rotary pair frequency divisors of a layer (Llama 3 rope_freqs, LongRoPE's
  // set in use); empty = all 1.
  const std::vector<float>& rope_freq_factors(int layer) const;
  // A layer's RoPE settings (config plus frequency factors). `with_attn_factor`:
  // cos/sin times LongRoPE's attention factor, as the forward pass applies it;
  // false for rotating stored keys by a position shift, which must not scale them
  // again (model/rope_shift.h).
  RopeParams rope_params(int layer, bool with_attn_factor = true) const;

 private:
  Model() = default;
  void load_weights();
  void load_attention(int64_t layer);
  void load_ffn(int64_t layer);
  void compute_fingerprint();
  void repack_weights(WeightLayout layout);  // model_repack.cc; sets weight_layouts_

  std::unique_ptr<GgufFile> file_;
  std::unique_ptr<Tokenizer> tokenizer_;
  ModelConfig config_;
  WeightView token_embd_, output_;
  std::vector<float> output_norm_;
  std::vector<LayerWeights> layers_;
  std::vector<float> rope_freqs_;   // rope_freqs, or LongRoPE's set in use
  std::vector<float> no_factors_;
  std::string fingerprint_;
  std::string weight_layouts_;
  std::shared_ptr<uint8_t> repacked_;  // the repacked matrices' memory from a mapped file (repack_weights)
};

}  // namespace pc
