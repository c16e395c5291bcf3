#include "model/config_check.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <string>

#include "gguf/gguf.h"
#include "model/config.h"

namespace pc {

namespace {

constexpr int64_t kMaxSize = std::numeric_limits<int32_t>::max();

// Layers the file has tensors for: one more than the largest N of a "blk.N." name.
int64_t blocks_in_file(const GgufFile& f) {
  int64_t n = 0;
  for (const GgufTensorInfo& t : f.tensors()) {
    if (t.name.rfind("blk.", 0) != 0) continue;
    char* end = nullptr;
    const long long i = std::strtoll(t.name.c_str() + 4, &end, 10);
    if (end != t.name.c_str() + 4 && *end == '.' && i >= 0 && i < kMaxSize) n = std::max<int64_t>(n, i + 1);
  }
  return n;
}

// The number of outputs (rows, ne[1]) of a 2-D tensor; -1 when absent or not 2-D.
int64_t rows_of(const GgufFile& f, const char* name) {
  const GgufTensorInfo* t = f.tensor(name);
  return t && t->ne.size() == 2 ? t->ne[1] : -1;
}

}  // namespace

void check_config_against_tensors(const GgufFile& f, const ModelConfig& c) {
  const std::string a = c.arch_name + ".";
  auto fail = [&](const std::string& key, int64_t value, const std::string& why) {
    throw Error(f.path() + ": metadata key '" + a + key + "' is " + std::to_string(value) + ", " + why);
  };
  const struct {
    const char* key;
    int64_t value;
  } sizes[] = {{"block_count", c.n_layer},
               {"embedding_length", c.n_embd},
               {"attention.head_count", c.n_head},
               {"attention.head_count_kv", c.n_kv_head},
               {"attention.key_length", c.head_dim},
               {"feed_forward_length", c.n_ff},
               {"context_length", c.n_ctx_train}};
  for (const auto& s : sizes)
    if (s.value > kMaxSize) fail(s.key, s.value, "beyond " + std::to_string(kMaxSize));

  const int64_t blocks = blocks_in_file(f);
  if (c.n_layer > blocks)
    fail("block_count", c.n_layer,
         "but the file has tensors for " + std::to_string(blocks) + " blocks" +
             (blocks > 0 ? " (blk.0 to blk." + std::to_string(blocks - 1) + ")" : ""));
  if (const GgufTensorInfo* e = f.tensor("token_embd.weight"); e && !e->ne.empty() && e->ne[0] != c.n_embd)
    fail("embedding_length", c.n_embd,
         "but token_embd.weight has rows of " + std::to_string(e->ne[0]) + " values");
  // Products of values below 2^31: no overflow in 64 bits.
  const std::string head = " x head dimension " + std::to_string(c.head_dim) + " = ";
  // Qwen3.5's gated attention: attn_q holds each head's query and its gate.
  const bool gated = c.arch == Arch::Qwen35 || c.arch == Arch::Qwen35Moe;
  if (const int64_t q = rows_of(f, "blk.0.attn_q.weight");
      q >= 0 && q != c.n_head * c.head_dim && !(gated && q == 2 * c.n_head * c.head_dim))
    fail("attention.head_count", c.n_head,
         "and" + head + std::to_string(c.n_head * c.head_dim) + ", but blk.0.attn_q.weight has " +
             std::to_string(q) + " outputs");
  if (const int64_t k = rows_of(f, "blk.0.attn_k.weight"); k >= 0 && k != c.n_kv_head * c.head_dim)
    fail("attention.head_count_kv", c.n_kv_head,
         "and" + head + std::to_string(c.n_kv_head * c.head_dim) + ", but blk.0.attn_k.weight has " +
             std::to_string(k) + " outputs");
  // Phi-3's ffn_up holds the gate and the up projection (2 x feed_forward_length rows).
  if (const int64_t ff = rows_of(f, "blk.0.ffn_up.weight"); ff >= 0 && ff != c.n_ff &&
                                                                !(c.arch == Arch::Phi3 && ff == 2 * c.n_ff))
    fail("feed_forward_length", c.n_ff, "but blk.0.ffn_up.weight has " + std::to_string(ff) + " outputs");
}

int64_t context_size(const ModelConfig& c, int64_t requested) {
  const int64_t model = c.n_ctx_train > 0 ? c.n_ctx_train : 4096;
  if (requested < 0) throw Error("--ctx-size must be 0 (the model's context) or a number of positions");
  if (requested > model)
    throw Error("--ctx-size " + std::to_string(requested) + " is beyond the model's context of " +
                std::to_string(model) + " positions (" + c.arch_name + ".context_length)");
  return requested > 0 ? requested : model;
}

}  // namespace pc
