// A loaded model: the mapped GGUF file, its config, weight views and tokenizer.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "kernels/elementwise.h"
#include "kernels/matmul.h"
#include "model/config.h"

namespace pc {

class GgufFile;
class Tokenizer;

// One transformer block. Matrices point into the mapped file (no copy);
// 1-D tensors (norms, biases) are converted to F32 and owned here.
struct LayerWeights {
  std::vector<float> attn_norm;               // [n_embd]
  WeightView wq, wk, wv, wo;                   // q: n_embd → n_head*hd, k/v: → n_kv*hd, o: n_head*hd → n_embd
  std::vector<float> bq, bk, bv;               // qwen2 biases, empty otherwise
  std::vector<float> q_norm, k_norm;           // qwen3 per-head RMSNorm weights [head_dim], empty otherwise
  std::vector<float> ffn_norm;                 // [n_embd]
  WeightView w_gate, w_up, w_down;             // gate/up: n_embd → n_ff, down: n_ff → n_embd
};

class Model {
 public:
  // Loads a GGUF model. Throws pc::Error for unsupported architectures, missing
  // tensors, tensors of unsupported types (naming tensor and type) or wrong shapes.
  // The weights are copied into huge-page memory unless `residency` says to map
  // the file (see Residency).
  static std::unique_ptr<Model> load(const std::string& path, Residency residency = Residency::kMemory);
  ~Model();

  const ModelConfig& config() const { return config_; }
  const GgufFile& file() const { return *file_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  // Identifies the weights for cache keys: architecture, shape and a hash of
  // the tensor bytes sampled at fixed strides (hex string).
  const std::string& fingerprint() const { return fingerprint_; }

  const WeightView& token_embd() const { return token_embd_; }
  const WeightView& output() const { return output_; }       // token_embd when tied
  const std::vector<float>& output_norm() const { return output_norm_; }
  const std::vector<LayerWeights>& layers() const { return layers_; }
  // Per rotary pair frequency divisors (Llama 3 rope_freqs); empty = all 1.
  const std::vector<float>& rope_freq_factors() const { return rope_freqs_; }
  // The model's RoPE settings (config plus frequency factors).
  RopeParams rope_params() const;

 private:
  Model() = default;
  void load_weights();
  void compute_fingerprint();

  std::unique_ptr<GgufFile> file_;
  std::unique_ptr<Tokenizer> tokenizer_;
  ModelConfig config_;
  WeightView token_embd_, output_;
  std::vector<float> output_norm_;
  std::vector<LayerWeights> layers_;
  std::vector<float> rope_freqs_;
  std::string fingerprint_;
};

}  // namespace pc
