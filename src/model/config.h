// Hyperparameters of a Llama-family model, read from GGUF metadata.
#pragma once
#include <cstdint>
#include <string>

namespace pc {

class GgufFile;

enum class Arch { Llama, Qwen2, Qwen3 };

struct ModelConfig {
  Arch arch = Arch::Llama;
  std::string arch_name;     // "llama", "qwen2", "qwen3"
  int64_t n_vocab = 0;
  int64_t n_embd = 0;        // residual width
  int64_t n_layer = 0;
  int64_t n_head = 0;        // query heads
  int64_t n_kv_head = 0;     // key/value heads (grouped-query attention when < n_head)
  int64_t head_dim = 0;      // per head; n_embd / n_head unless key_length says otherwise
  int64_t n_ff = 0;          // feed-forward hidden width
  int64_t n_ctx_train = 0;   // context length the model was trained with
  float rms_eps = 1e-5f;
  // RoPE: theta_i = pos * freq_scale * rope_base^(-2i/n_rot) / freq_factor_i,
  // applied to the first n_rot dims of each head, to adjacent pairs (normal) or
  // to halves (NeoX).
  float rope_base = 10000.f;
  float rope_freq_scale = 1.f;  // 1 / linear scaling factor
  int64_t n_rot = 0;
  bool rope_neox = false;

  // Reads and validates the config; throws pc::Error naming the missing/bad key.
  static ModelConfig from_gguf(const GgufFile& f);
  std::string describe() const;
};

}  // namespace pc
