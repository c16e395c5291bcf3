// Random-weight GGUF models of real shapes, for tests, benchmarks and demos.
//
// The file looks like a llama.cpp conversion of a Llama / Qwen2 / Qwen3 / Gemma 2 /
// Gemma 3 / Phi-3 model: the
// same metadata keys and tensor names, the tokenizer copied from a real vocabulary
// file, and weights drawn from a seeded generator (deterministic for a seed).
// Depends only on src/gguf.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gguf/types.h"

namespace pc {

// Per-tensor type mixes of llama.cpp's quantization presets (its
// llama_tensor_get_type rules for a model without an importance matrix):
//   kQ4_K_M  Q4_K; Q6_K for output, and for attn_v / attn_qkv and ffn_down of the
//            "more bits" layers (the first and last eighth, and every third between)
//   kQ5_K_M  Q5_K; Q6_K for output and the same attn_v / attn_qkv / ffn_down layers
//   kQ6_K    Q6_K everywhere
//   kIQ4_XS  IQ4_XS; Q6_K for output; Q5_K for attn_v / attn_qkv when the model has
//            4 or more query heads per KV head, and for ffn_down of the first eighth
//            of the layers
// A tied model's token_embd takes output's type. Rows that are not whole 256-element
// super-blocks fall back as llama.cpp does: Q4_K → Q5_0, Q5_K → Q5_1, Q6_K → Q8_0,
// IQ4_XS → IQ4_NL (output → Q8_0), and to F16 when not whole 32-element blocks.
enum class TypeMix { kNone, kQ4_K_M, kQ5_K_M, kQ6_K, kIQ4_XS };

struct MakeModelOptions {
  // "smollm-135m" (n_embd 576, 30 blocks, 9 heads, 3 KV heads, ff 1536),
  // "tinyllama-1.1b" (2048, 22, 32, 4, 5632), "tiny" (64, 2, 4, 2, 128), "small" (256, 2, 4, 2, 512),
  // "micro" (32, 1, 2, 1, 64), "gemma2-2b" (2304, 26, 8, 4, 9216, head size 256),
  // "llama3.2-3b" (3072, 28, 24, 8, 8192; 128256 tokens; its output matrix apart from the
  // token embedding), "llama3-8b" (4096, 32, 32, 8, 14336; 128256 tokens), "qwen2.5-7b" (3584, 28, 28, 4,
  // 18944; 152064 tokens); for the 2026 architectures "qwen3-30b-a3b-4l",
  // "gpt-oss-20b-4l" (real widths and experts, 4 blocks) and "qwen35-2b" (a
  // Qwen3.5-2B-like hybrid). MoE archs on the small shapes get 8 experts of n_ff / 2,
  // 2 per token; hybrid ones a full-attention block every min(4, n_layer). A shape with
  // a vocabulary size pads the tokenizer's token list to it with unused "[PADn]" tokens,
  // as llama.cpp's converter pads Qwen's (unless n_vocab_limit is set). See
  // make_model_shapes(). gemma2/gemma3 files get the shape's sliding window: 4096 for
  // the real-size shapes, 32 for tiny, small and micro.
  std::string shape = "smollm-135m";
  // llama | qwen2 | qwen3 | gemma2 | gemma3 | phi3. gemma2: soft-caps 50 / 30;
  // gemma3: rope base 1e6 with linear scaling 8 on global layers, 1e4 on local
  // ones; phi3: fused attn_qkv and gate/up; gemma files are always tied.
  // qwen3moe | gpt-oss | qwen35 | qwen35moe: routed experts (qwen35moe with a
  // shared expert), gpt-oss's sinks, biases, YaRN and window, qwen35's Gated
  // DeltaNet layers (tied output, as real Qwen3.5 files of small sizes).
  std::string arch = "llama";
  // Type of the 2-D weights when mix is kNone: any type ggml_type_supported() accepts
  // (real files hold MXFP4 only in MoE experts; here it serves tests). A matrix whose row length is not a
  // multiple of the type's block size falls back (256-element types → Q8_0, then
  // F16). Norms and biases are always F32.
  GgmlType type = GgmlType::Q8_0;
  TypeMix mix = TypeMix::kNone;  // a preset's per-tensor types instead of `type`
  std::string vocab_path;              // GGUF whose tokenizer.* keys are copied; empty = a
                                       // built-in byte-level SentencePiece-style vocabulary
  int64_t n_vocab_limit = 0;           // 0 = full vocab; else keep only the first N tokens
  uint64_t seed = 1;
  bool tied_output = false;            // omit output.weight (output tied to token_embd)
  int64_t context_length = 8192;
  // Called after each step of the work with (steps done, steps in all): the
  // embeddings, each block, then writing the file. Empty: not called.
  std::function<void(int64_t, int64_t)> on_progress;
};

// Writes a random-weight GGUF (atomically). Throws pc::Error (unknown shape/arch/type,
// unreadable vocab, I/O failure). Prints nothing.
void make_random_model(const MakeModelOptions& opt, const std::string& out_path);

// Names accepted as MakeModelOptions::shape.
std::vector<std::string> make_model_shapes();

// The type make_random_model stores a matrix with rows of `row_len` elements in,
// when `want` was asked for (the fallback rule above).
GgmlType make_model_matrix_type(GgmlType want, int64_t row_len);

// "Q4_K_M", "Q5_K_M", "Q6_K", "IQ4_XS" → the mix; anything else → kNone.
TypeMix parse_type_mix(const std::string& name);
std::string type_mix_name(TypeMix mix);

}  // namespace pc
