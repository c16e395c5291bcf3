#include "model/config.h"

#include <sstream>

#include "gguf/gguf.h"

namespace pc {

namespace {

int64_t require_int(const GgufFile& f, const std::string& key) {
  int64_t v = f.get_int(key, -1);
  if (v <= 0) throw Error(f.path() + ": missing or invalid metadata key '" + key + "'");
  return v;
}

}  // namespace

ModelConfig ModelConfig::from_gguf(const GgufFile& f) {
  ModelConfig c;
  c.arch_name = f.get_string("general.architecture");
  if (c.arch_name == "llama") {
    c.arch = Arch::Llama;
  } else if (c.arch_name == "qwen2") {
    c.arch = Arch::Qwen2;
  } else if (c.arch_name == "qwen3") {
    c.arch = Arch::Qwen3;
  } else {
    throw Error(f.path() + ": unsupported architecture '" + c.arch_name +
                "' (supported: llama, qwen2, qwen3)");
  }
  const std::string a = c.arch_name + ".";
  c.n_embd = require_int(f, a + "embedding_length");
  c.n_layer = require_int(f, a + "block_count");
  c.n_head = require_int(f, a + "attention.head_count");
  c.n_kv_head = f.get_int(a + "attention.head_count_kv", c.n_head);
  c.n_ff = require_int(f, a + "feed_forward_length");
  c.n_ctx_train = f.get_int(a + "context_length", 2048);
  c.head_dim = f.get_int(a + "attention.key_length", c.n_embd / c.n_head);
  if (f.get_int(a + "attention.value_length", c.head_dim) != c.head_dim)
    throw Error(f.path() + ": key_length != value_length is not supported");
  if (c.n_kv_head <= 0 || c.n_head % c.n_kv_head != 0)
    throw Error(f.path() + ": head_count " + std::to_string(c.n_head) +
                " is not a multiple of head_count_kv " + std::to_string(c.n_kv_head));
  c.rms_eps = float(f.get_float(a + "attention.layer_norm_rms_epsilon", 1e-5));
  c.rope_base = float(f.get_float(a + "rope.freq_base", 10000.0));
  c.n_rot = f.get_int(a + "rope.dimension_count", c.head_dim);
  if (c.n_rot <= 0 || c.n_rot > c.head_dim || c.n_rot % 2 != 0)
    throw Error(f.path() + ": bad rope.dimension_count " + std::to_string(c.n_rot));
  c.rope_neox = c.arch != Arch::Llama;
  std::string scaling = f.get_string(a + "rope.scaling.type", "none");
  double factor = f.get_float(a + "rope.scaling.factor", 0.0);
  if (scaling == "linear" && factor > 0) {
    c.rope_freq_scale = float(1.0 / factor);
  } else if (scaling != "none" && scaling != "linear" && factor > 0 && factor != 1.0) {
    throw Error(f.path() + ": unsupported rope scaling '" + scaling + "'");
  }
  if (c.head_dim % 2 != 0) throw Error(f.path() + ": head dimension must be even");
  return c;
}

std::string ModelConfig::describe() const {
  std::ostringstream o;
  o << arch_name << ": " << n_layer << " blocks, embedding " << n_embd << ", heads " << n_head
    << "/" << n_kv_head << " (dim " << head_dim << "), feed-forward " << n_ff << ", vocab "
    << n_vocab << ", rope base " << rope_base << (rope_neox ? " neox" : " normal");
  return o.str();
}

}  // namespace pc
