#include "model/model.h"

#include <algorithm>
#include <cstdio>

#include "gguf/gguf.h"
#include "gguf/quants.h"
#include "model/config_check.h"
#include "tokenizer/tokenizer.h"

namespace pc {

namespace {

std::string shape_str(const std::vector<int64_t>& ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

const GgufTensorInfo& require_tensor(const GgufFile& f, const std::string& name) {
  const GgufTensorInfo* t = f.tensor(name);
  if (!t) throw Error(f.path() + ": missing tensor '" + name + "'");
  return *t;
}

// A 2-D weight of shape [k, n] (ggml order) in a type the kernels compute with.
WeightView matrix(const GgufFile& f, const std::string& name, int64_t k, int64_t n) {
  const GgufTensorInfo& t = require_tensor(f, name);
  if (!ggml_type_supported(t.type))
    throw Error(f.path() + ": tensor '" + name + "' has unsupported type " +
                ggml_type_name(t.type) + " (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K)");
  int64_t rows = t.ne.size() > 1 ? t.ne[1] : 1;
  for (size_t i = 2; i < t.ne.size(); ++i) rows *= t.ne[i];
  if (t.ne[0] != k || rows != n)
    throw Error(f.path() + ": tensor '" + name + "' has shape " + shape_str(t.ne) +
                ", expected [" + std::to_string(k) + ", " + std::to_string(n) + "]");
  return WeightView{t.type, k, n, t.data, ggml_row_bytes(t.type, k)};
}

// A 1-D tensor converted to F32; empty when absent and optional.
std::vector<float> vector_f32(const GgufFile& f, const std::string& name, int64_t n,
                              bool required) {
  const GgufTensorInfo* t = f.tensor(name);
  if (!t) {
    if (required) throw Error(f.path() + ": missing tensor '" + name + "'");
    return {};
  }
  if (t->n_elements() != n)
    throw Error(f.path() + ": tensor '" + name + "' has shape " + shape_str(t->ne) +
                ", expected [" + std::to_string(n) + "]");
  if (!ggml_type_supported(t->type))
    throw Error(f.path() + ": tensor '" + name + "' has unsupported type " +
                ggml_type_name(t->type));
  std::vector<float> v(n);
  dequantize_row(t->type, t->data, v.data(), n);
  return v;
}

}  // namespace

Model::~Model() = default;

std::unique_ptr<Model> Model::load(const std::string& path, Residency residency) {
  std::unique_ptr<Model> m(new Model());
  m->file_ = GgufFile::open(path, residency);
  m->config_ = ModelConfig::from_gguf(*m->file_);
  check_config_against_tensors(*m->file_, m->config_);  // before anything is sized by it
  m->tokenizer_ = Tokenizer::from_gguf(*m->file_);
  m->load_weights();
  m->compute_fingerprint();
  return m;
}

void Model::load_weights() {
  const GgufFile& f = *file_;
  ModelConfig& c = config_;
  const GgufTensorInfo& embd = require_tensor(f, "token_embd.weight");
  if (embd.ne.size() != 2 || embd.ne[0] != c.n_embd)
    throw Error(f.path() + ": tensor 'token_embd.weight' has shape " + shape_str(embd.ne) +
                ", expected [" + std::to_string(c.n_embd) + ", n_vocab]");
  c.n_vocab = embd.ne[1];
  if (c.n_vocab != tokenizer_->n_vocab())
    throw Error(f.path() + ": token_embd has " + std::to_string(c.n_vocab) +
                " rows but the vocabulary has " + std::to_string(tokenizer_->n_vocab()) +
                " tokens");
  token_embd_ = matrix(f, "token_embd.weight", c.n_embd, c.n_vocab);
  output_ = f.tensor("output.weight") ? matrix(f, "output.weight", c.n_embd, c.n_vocab)
                                      : token_embd_;
  output_norm_ = vector_f32(f, "output_norm.weight", c.n_embd, true);
  if (f.tensor("rope_freqs.weight")) rope_freqs_ = vector_f32(f, "rope_freqs.weight", c.n_rot / 2, true);

  const int64_t q_dim = c.n_head * c.head_dim, kv_dim = c.n_kv_head * c.head_dim;
  layers_.resize(c.n_layer);
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    LayerWeights& l = layers_[i];
    l.attn_norm = vector_f32(f, p + "attn_norm.weight", c.n_embd, true);
    l.wq = matrix(f, p + "attn_q.weight", c.n_embd, q_dim);
    l.wk = matrix(f, p + "attn_k.weight", c.n_embd, kv_dim);
    l.wv = matrix(f, p + "attn_v.weight", c.n_embd, kv_dim);
    l.wo = matrix(f, p + "attn_output.weight", q_dim, c.n_embd);
    const bool qwen2 = c.arch == Arch::Qwen2;
    l.bq = vector_f32(f, p + "attn_q.bias", q_dim, qwen2);
    l.bk = vector_f32(f, p + "attn_k.bias", kv_dim, qwen2);
    l.bv = vector_f32(f, p + "attn_v.bias", kv_dim, qwen2);
    const bool qwen3 = c.arch == Arch::Qwen3;
    l.q_norm = vector_f32(f, p + "attn_q_norm.weight", c.head_dim, qwen3);
    l.k_norm = vector_f32(f, p + "attn_k_norm.weight", c.head_dim, qwen3);
    l.ffn_norm = vector_f32(f, p + "ffn_norm.weight", c.n_embd, true);
    l.w_gate = matrix(f, p + "ffn_gate.weight", c.n_embd, c.n_ff);
    l.w_up = matrix(f, p + "ffn_up.weight", c.n_embd, c.n_ff);
    l.w_down = matrix(f, p + "ffn_down.weight", c.n_ff, c.n_embd);
  }
}

RopeParams Model::rope_params() const {
  RopeParams p;
  p.n_rot = config_.n_rot;
  p.base = config_.rope_base;
  p.freq_scale = config_.rope_freq_scale;
  p.neox = config_.rope_neox;
  p.factors = rope_freqs_.empty() ? nullptr : rope_freqs_.data();
  return p;
}

void Model::compute_fingerprint() {
  // FNV-1a over the config and a sample of every tensor's bytes: cheap even for
  // multi-GB files, and any two files that differ in shape or in sampled weights
  // get different cache namespaces.
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](const void* p, size_t n) {
    const uint8_t* b = static_cast<const uint8_t*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  };
  mix(config_.arch_name.data(), config_.arch_name.size());
  for (const GgufTensorInfo& t : file_->tensors()) {
    mix(t.name.data(), t.name.size());
    mix(t.ne.data(), t.ne.size() * sizeof(int64_t));
    const uint64_t stride = std::max<uint64_t>(64, t.nbytes / 64);
    for (uint64_t off = 0; off < t.nbytes; off += stride) mix(t.data + off, std::min<uint64_t>(64, t.nbytes - off));
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  fingerprint_ = buf;
}

}  // namespace pc
