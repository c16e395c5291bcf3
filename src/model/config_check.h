// Hyperparameters checked against what the file holds, before anything is sized by
// them: a GGUF whose metadata claims a billion blocks or heads is an error naming the
// key, not an allocation that fails.
#pragma once
#include <cstdint>

namespace pc {

class GgufFile;
struct ModelConfig;

// Throws pc::Error naming the metadata key when a size (block_count, embedding_length,
// head counts, feed_forward_length, context_length, key_length) is beyond what int32
// positions and shapes allow, or disagrees with the tensors the file has: block_count
// above the blk.N tensors present; embedding_length, head_count x head dimension,
// head_count_kv x head dimension, feed_forward_length against the shapes of
// token_embd, blk.0.attn_q, blk.0.attn_k and blk.0.ffn_up where the file has them.
void check_config_against_tensors(const GgufFile& f, const ModelConfig& c);

// Positions one request may use: `requested` (-c/--ctx-size; 0 = not given) or the
// model's context_length (4096 when the file has none). Throws pc::Error when
// `requested` is negative or exceeds the model's context.
int64_t context_size(const ModelConfig& c, int64_t requested);

}  // namespace pc
