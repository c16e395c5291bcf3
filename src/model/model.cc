#include "model/model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstdio>
#include <cstring>

#include "gguf/gguf.h"
#include "gguf/quants.h"
#include "kernels/cpu_count.h"
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
                ggml_type_name(t.type) + " (supported: " + ggml_supported_type_names() + ")");
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

bool Model::weight_layout_from_name(const std::string& name, WeightLayout* layout) {
  if (name == "all") *layout = WeightLayout::kForKernels;
  else if (name == "auto") *layout = WeightLayout::kFastest;
  else if (name == "none") *layout = WeightLayout::kAsStored;
  else return false;
  return true;
}

const char* Model::weight_layout_name(WeightLayout layout) {
  switch (layout) {
    case WeightLayout::kForKernels: return "all";
    case WeightLayout::kFastest: return "auto";
    case WeightLayout::kAsStored: return "none";
  }
  return "?";
}

Model::~Model() = default;

std::unique_ptr<Model> Model::load(const std::string& path, Residency residency, int64_t context_length,
                                   WeightLayout layout) {
  std::unique_ptr<Model> m(new Model());
  m->file_ = GgufFile::open(path, residency, default_thread_count());  // (the copy on every core)
  m->config_ = ModelConfig::from_gguf(*m->file_, context_length);
  m->tokenizer_ = Tokenizer::from_gguf(*m->file_);
  m->load_weights();
  m->compute_fingerprint();  // from the stored bytes, whatever the layout
  m->repack_weights(layout);
  return m;
}

namespace {

// Rows [first, first + n) of a matrix view: a matrix of its own (row r of a
// GGUF matrix is output feature r, stored contiguously).
WeightView row_range(const WeightView& w, int64_t first, int64_t n) {
  return WeightView{w.type, w.k, n, w.data + first * w.row_bytes, w.row_bytes};
}

// A stored [in, out, n_expert] tensor as one view per expert (slice e: rows
// [e * out, (e + 1) * out) of the whole).
std::vector<WeightView> experts(const GgufFile& f, const std::string& name, int64_t in, int64_t out, int64_t n) {
  const WeightView all = matrix(f, name, in, out * n);
  if (const GgufTensorInfo& t = require_tensor(f, name); t.ne.size() != 3 || t.ne[2] != n)
    throw Error(f.path() + ": tensor '" + name + "' has shape " + shape_str(t.ne) + ", expected [" +
                std::to_string(in) + ", " + std::to_string(out) + ", " + std::to_string(n) + "]");
  std::vector<WeightView> v;
  for (int64_t e = 0; e < n; ++e) v.push_back(row_range(all, e * out, out));
  return v;
}

MoeWeights load_moe(const GgufFile& f, const ModelConfig& c, const std::string& p) {
  const MoeConfig& mc = c.moe;
  const int64_t E = c.n_embd, F = mc.n_ff, N = mc.n_expert;
  MoeWeights w;
  w.router = matrix(f, p + "ffn_gate_inp.weight", E, N);
  if (mc.router_bias) w.router_bias = vector_f32(f, p + "ffn_gate_inp.bias", N, true);
  w.gate = experts(f, p + "ffn_gate_exps.weight", E, F, N);
  w.up = experts(f, p + "ffn_up_exps.weight", E, F, N);
  w.down = experts(f, p + "ffn_down_exps.weight", F, E, N);
  if (mc.expert_bias) {
    w.gate_bias = vector_f32(f, p + "ffn_gate_exps.bias", F * N, true);
    w.up_bias = vector_f32(f, p + "ffn_up_exps.bias", F * N, true);
    w.down_bias = vector_f32(f, p + "ffn_down_exps.bias", E * N, true);
  }
  if (mc.n_ff_shared > 0) {
    w.shared_gate = vector_f32(f, p + "ffn_gate_inp_shexp.weight", E, true);
    w.sh_gate = matrix(f, p + "ffn_gate_shexp.weight", E, mc.n_ff_shared);
    w.sh_up = matrix(f, p + "ffn_up_shexp.weight", E, mc.n_ff_shared);
    w.sh_down = matrix(f, p + "ffn_down_shexp.weight", mc.n_ff_shared, E);
  }
  return w;
}

DeltaNetWeights load_delta_net(const GgufFile& f, const ModelConfig& c, const std::string& p) {
  const DeltaNetConfig& d = c.delta_net;
  const int64_t E = c.n_embd;
  DeltaNetWeights w;
  w.qkv = matrix(f, p + "attn_qkv.weight", E, d.channels());
  w.z = matrix(f, p + "attn_gate.weight", E, d.d_inner());
  w.beta = matrix(f, p + "ssm_beta.weight", E, d.n_v_head);
  w.alpha = matrix(f, p + "ssm_alpha.weight", E, d.n_v_head);
  w.conv = vector_f32(f, p + "ssm_conv1d.weight", d.channels() * d.d_conv, true);
  w.dt_bias = vector_f32(f, p + "ssm_dt.bias", d.n_v_head, true);
  w.a = vector_f32(f, p + "ssm_a", d.n_v_head, true);
  w.norm = vector_f32(f, p + "ssm_norm.weight", d.d_head, true);
  w.out = matrix(f, p + "ssm_out.weight", d.d_inner(), E);
  return w;
}

// YaRN's per-pair divisors of the angle (RopeFactors::kYarn), llama.cpp's
// defaults beta_fast 32, beta_slow 1, ext_factor 1: the ramp runs over the pairs
// between the correction dims c(32) and c(1),
//   c(β) = n_rot ln(n_ctx_orig / (2π β)) / (2 ln base),
//   ramp_i = 1 - clamp((i - low) / max(0.001, high - low), 0, 1),
//   θ_i = θ_extrap,i (ramp_i + (1 - ramp_i) / factor)
// so the divisor is 1 / (ramp_i + (1 - ramp_i) / factor).
std::vector<float> yarn_factors(const ModelConfig& c, double base) {
  const double n = double(c.n_rot);
  auto corr = [&](double beta) {
    return n * std::log(double(c.n_ctx_orig) / (beta * 2 * M_PI)) / (2 * std::log(base));
  };
  const double low = std::max(0.0, std::floor(corr(32.0))), high = std::min(n - 1, std::ceil(corr(1.0)));
  std::vector<float> v(size_t(c.n_rot / 2));
  for (size_t i = 0; i < v.size(); ++i) {
    const double y = (double(i) - low) / std::max(0.001, high - low);
    const double ramp = 1.0 - std::clamp(y, 0.0, 1.0);
    v[i] = float(1.0 / (ramp + (1.0 - ramp) / c.yarn_factor));
  }
  return v;
}

// M-RoPE for text (RopeFactors::kSections; llama.cpp's interleaved IMROPE):
// pair i, sector i mod Σsections, takes section t when sector % 3 == 0 and
// sector < 3 t, h when % 3 == 1 and < 3 h, w when % 3 == 2 and < 3 w, else e.
// A text token's t, h and w positions are its position and its e position is
// 0: pairs of section e never rotate (divisor +inf).
std::vector<float> section_factors(const ModelConfig& c) {
  const std::vector<int32_t>& s = c.rope_sections;
  const int64_t dims = int64_t(s[0]) + s[1] + s[2] + s[3];
  std::vector<float> v(size_t(c.n_rot / 2), 1.f);
  for (size_t i = 0; i < v.size(); ++i) {
    const int64_t sec = int64_t(i) % dims;
    const bool rotates = (sec % 3 == 0 && sec < 3 * s[0]) || (sec % 3 == 1 && sec < 3 * s[1]) ||
                         (sec % 3 == 2 && sec < 3 * s[2]);
    if (!rotates) v[i] = std::numeric_limits<float>::infinity();
  }
  return v;
}

}  // namespace

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
  // Every architecture: the output projection is tied to the embedding when the
  // file has no output.weight (llama.cpp's rule; gemma files never have one).
  output_ = f.tensor("output.weight") ? matrix(f, "output.weight", c.n_embd, c.n_vocab)
                                      : token_embd_;
  output_norm_ = vector_f32(f, "output_norm.weight", c.n_embd, true);
  const int64_t n_pairs = c.n_rot / 2;
  switch (c.layers.empty() ? RopeFactors::kNone : c.layers[0].rope_factors) {
    case RopeFactors::kRopeFreqs:  // optional in Llama files (Llama 3.1+ have it)
      if (f.tensor("rope_freqs.weight")) rope_freqs_ = vector_f32(f, "rope_freqs.weight", n_pairs, true);
      break;
    case RopeFactors::kLongRope:
      rope_freqs_ = vector_f32(f, c.longrope_long ? "rope_factors_long.weight" : "rope_factors_short.weight",
                               n_pairs, true);
      for (float v : rope_freqs_)
        if (!(v > 0)) throw Error(f.path() + ": LongRoPE factors must be positive");
      break;
    case RopeFactors::kYarn: rope_freqs_ = yarn_factors(c, c.layers[0].rope_base); break;
    case RopeFactors::kSections: rope_freqs_ = section_factors(c); break;
    case RopeFactors::kNone: break;
  }

  layers_.resize(c.n_layer);
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    LayerWeights& l = layers_[i];
    l.attn_norm = vector_f32(f, p + "attn_norm.weight", c.n_embd, true);
    if (c.layers[i].mixer == Mixer::kDeltaNet)
      l.delta_net = load_delta_net(f, c, p);
    else
      load_attention(i);
    load_ffn(i);
  }
}

void Model::load_attention(int64_t i) {
  const GgufFile& f = *file_;
  const ModelConfig& c = config_;
  const std::string p = "blk." + std::to_string(i) + ".";
  const LayerConfig& lc = c.layers[i];
  LayerWeights& l = layers_[i];
  const int64_t q_dim = c.n_head * c.head_dim, kv_dim = c.n_kv_head * c.head_dim;
  if (lc.projections == Projections::kFused) {
    const WeightView qkv = matrix(f, p + "attn_qkv.weight", c.n_embd, q_dim + 2 * kv_dim);
    l.wq = row_range(qkv, 0, q_dim);
    l.wk = row_range(qkv, q_dim, kv_dim);
    l.wv = row_range(qkv, q_dim + kv_dim, kv_dim);
  } else {
    l.wq = matrix(f, p + "attn_q.weight", c.n_embd, lc.attn_gate ? 2 * q_dim : q_dim);
    l.wk = matrix(f, p + "attn_k.weight", c.n_embd, kv_dim);
    l.wv = matrix(f, p + "attn_v.weight", c.n_embd, kv_dim);
  }
  l.wo = matrix(f, p + "attn_output.weight", q_dim, c.n_embd);
  if (lc.qkv_bias) {
    l.bq = vector_f32(f, p + "attn_q.bias", q_dim, true);
    l.bk = vector_f32(f, p + "attn_k.bias", kv_dim, true);
    l.bv = vector_f32(f, p + "attn_v.bias", kv_dim, true);
  }
  if (lc.out_bias) l.bo = vector_f32(f, p + "attn_output.bias", c.n_embd, true);
  if (lc.attn_sinks) l.sinks = vector_f32(f, p + "attn_sinks.weight", c.n_head, true);
  if (lc.qk_norm) {
    l.q_norm = vector_f32(f, p + "attn_q_norm.weight", c.head_dim, true);
    l.k_norm = vector_f32(f, p + "attn_k_norm.weight", c.head_dim, true);
  }
  if (lc.post_attn_norm) l.post_attn_norm = vector_f32(f, p + "post_attention_norm.weight", c.n_embd, true);
}

void Model::load_ffn(int64_t i) {
  const GgufFile& f = *file_;
  const ModelConfig& c = config_;
  const std::string p = "blk." + std::to_string(i) + ".";
  const LayerConfig& lc = c.layers[i];
  LayerWeights& l = layers_[i];
  l.ffn_norm = vector_f32(f, p + c.ffn_norm_tensor + ".weight", c.n_embd, true);
  if (lc.ffn == Ffn::kMoe) {
    l.moe = load_moe(f, c, p);
  } else if (lc.projections == Projections::kFused) {
    const WeightView gate_up = matrix(f, p + "ffn_up.weight", c.n_embd, 2 * c.n_ff);
    l.w_gate = row_range(gate_up, 0, c.n_ff);
    l.w_up = row_range(gate_up, c.n_ff, c.n_ff);
  } else {
    l.w_gate = matrix(f, p + "ffn_gate.weight", c.n_embd, c.n_ff);
    l.w_up = matrix(f, p + "ffn_up.weight", c.n_embd, c.n_ff);
  }
  if (lc.ffn == Ffn::kDense) l.w_down = matrix(f, p + "ffn_down.weight", c.n_ff, c.n_embd);
  if (lc.post_ffn_norm) l.post_ffn_norm = vector_f32(f, p + "post_ffw_norm.weight", c.n_embd, true);
}

const std::vector<float>& Model::rope_freq_factors(int layer) const {
  return config_.layers[layer].rope_factors == RopeFactors::kNone ? no_factors_ : rope_freqs_;
}

RopeParams Model::rope_params(int layer, bool with_attn_factor) const {
  const LayerConfig& l = config_.layers[layer];
  RopeParams p;
  p.n_rot = config_.n_rot;
  p.base = l.rope_base;
  p.freq_scale = l.rope_freq_scale;
  p.neox = config_.rope_neox;
  const std::vector<float>& factors = rope_freq_factors(layer);
  p.factors = factors.empty() ? nullptr : factors.data();
  if (with_attn_factor && (l.rope_factors == RopeFactors::kLongRope || l.rope_factors == RopeFactors::kYarn))
    p.attn_factor = config_.rope_attn_factor;
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
  // The RoPE factor set in use changes every stored K: KV of the long and of the
  // short LongRoPE set live in different namespaces.
  const bool longrope = !config_.layers.empty() && config_.layers[0].rope_factors == RopeFactors::kLongRope;
  if (longrope) {
    const char* set = config_.longrope_long ? "longrope:long" : "longrope:short";
    mix(set, std::strlen(set));
  }
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
