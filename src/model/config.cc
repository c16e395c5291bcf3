#include "model/config.h"

#include <cmath>
#include <sstream>

#include "gguf/gguf.h"
#include "model/config_check.h"

namespace pc {

namespace {

// What an architecture fixes, as llama.cpp runs it. Everything else comes from
// the file's metadata (read_shape, read_rope, describe_layers).
struct ArchTraits {
  const char* name;
  Arch arch;
  bool rope_neox;          // NeoX RoPE (halves) instead of adjacent pairs
  bool qkv_bias;           // attn_{q,k,v}.bias
  bool qk_norm;            // per-head attn_{q,k}_norm
  bool sandwich_norms;     // post_attention_norm and post_ffw_norm
  Projections projections;
  Activation activation;
  bool embd_scale;         // embeddings times sqrt(n_embd)
  // Sliding-window layers when the file has no attention.sliding_window_pattern:
  // layer il is local when il % period < period - 1 (0: none). gemma2: 2 (even
  // layers local), gemma3: 6 (five local to one global).
  int swa_period;
  int32_t default_window;  // when attention.sliding_window is absent (0: required)
  // Soft-caps read from <arch>.attn_logit_softcapping / final_logit_softcapping,
  // with these defaults (llama.cpp's for gemma2); only where `softcaps`.
  bool softcaps;
  float default_attn_softcap, default_final_softcap;
  // The layer count at which llama.cpp scales queries by 1/sqrt(n_embd / n_head)
  // instead of 1/sqrt(head_dim) (the 27B models' query_pre_attn_scalar); 0: never.
  int64_t wide_query_scale_layers;
  // Local layers' RoPE: rope.freq_base_swa, else this base (0: the global
  // base), and no linear scaling when `swa_unscaled` (gemma3).
  float swa_rope_base;
  bool swa_unscaled;
  bool longrope;           // phi3: LongRoPE factors when original_context_length < context_length
  bool rope_freqs;         // llama: the rope_freqs tensor's factors when the file has one
  // The 2026 architectures' parts (defaults: none of them).
  const char* ffn_norm = "ffn_norm";  // the norm before the FFN (qwen35, gpt-oss: post_attention_norm)
  bool moe = false;                   // every FFN is routed experts (MoeConfig from the file)
  MoeGating gating = MoeGating::kSoftmaxTopK;
  bool moe_bias = false;              // router and expert biases (gpt-oss)
  Activation expert_activation = Activation::kSwiGlu;
  bool attn_sinks = false;            // attn_sinks per head (gpt-oss)
  bool out_bias = false;              // attn_output.bias (gpt-oss)
  // Gated DeltaNet layers, with a gated full-attention layer where
  // (il + 1) % full_attention_interval == 0 (qwen35, qwen35moe).
  bool hybrid = false;
};

constexpr ArchTraits kArchTraits[] = {
    // name     arch          neox   bias   qkn    sandw  proj                   act                      embd   swa win   caps   attn   final  wide sbase    sunsc  lrope  rfreq
    {"llama",  Arch::Llama,  false, false, false, false, Projections::kSeparate, Activation::kSwiGlu,    false, 0, 0,    false, 0,     0,     0,  0,       false, false, true},
    {"qwen2",  Arch::Qwen2,  true,  true,  false, false, Projections::kSeparate, Activation::kSwiGlu,    false, 0, 0,    false, 0,     0,     0,  0,       false, false, false},
    {"qwen3",  Arch::Qwen3,  true,  false, true,  false, Projections::kSeparate, Activation::kSwiGlu,    false, 0, 0,    false, 0,     0,     0,  0,       false, false, false},
    {"gemma2", Arch::Gemma2, true,  false, false, true,  Projections::kSeparate, Activation::kGeGluTanh, true,  2, 4096, true,  50.f,  30.f,  46, 0,       false, false, false},
    {"gemma3", Arch::Gemma3, true,  false, true,  true,  Projections::kSeparate, Activation::kGeGluTanh, true,  6, 0,    false, 0,     0,     62, 10000.f, true,  false, false},
    {"phi3",   Arch::Phi3,   true,  false, false, false, Projections::kFused,    Activation::kSwiGlu,    false, 0, 0,    false, 0,     0,     0,  0,       false, true,  false},
    // name       arch             neox  bias   qkn    sandw  proj                   act                  embd   swa win caps   attn final wide sbase sunsc  lrope  rfreq
    {"qwen3moe",  Arch::Qwen3Moe,  true, false, true,  false, Projections::kSeparate, Activation::kSwiGlu, false, 0, 0, false, 0,   0,    0,   0,    false, false, false,
     "ffn_norm", true, MoeGating::kSoftmaxTopK, false, Activation::kSwiGlu, false, false, false},
    {"gpt-oss",   Arch::GptOss,    true, true,  false, false, Projections::kSeparate, Activation::kSwiGlu, false, 2, 0, false, 0,   0,    0,   0,    false, false, false,
     "post_attention_norm", true, MoeGating::kTopKSoftmax, true, Activation::kSwiGluClamped, true, true, false},
    {"qwen35",    Arch::Qwen35,    true, false, true,  false, Projections::kSeparate, Activation::kSwiGlu, false, 0, 0, false, 0,   0,    0,   0,    false, false, false,
     "post_attention_norm", false, MoeGating::kSoftmaxTopK, false, Activation::kSwiGlu, false, false, true},
    {"qwen35moe", Arch::Qwen35Moe, true, false, true,  false, Projections::kSeparate, Activation::kSwiGlu, false, 0, 0, false, 0,   0,    0,   0,    false, false, false,
     "post_attention_norm", true, MoeGating::kSoftmaxTopK, false, Activation::kSwiGlu, false, false, true},
};

const ArchTraits& find_traits(const GgufFile& f, const std::string& name) {
  std::string known;
  for (const ArchTraits& t : kArchTraits) {
    if (name == t.name) return t;
    known += (known.empty() ? "" : ", ") + std::string(t.name);
  }
  throw Error(f.path() + ": unsupported architecture '" + name + "' (supported: " + known + ")");
}

int64_t require_int(const GgufFile& f, const std::string& key) {
  int64_t v = f.get_int(key, -1);
  if (v <= 0) throw Error(f.path() + ": missing or invalid metadata key '" + key + "'");
  return v;
}

float positive_float(const GgufFile& f, const std::string& key, double def) {
  const double v = f.get_float(key, def);
  if (!(v > 0) || !std::isfinite(v))
    throw Error(f.path() + ": metadata key '" + key + "' must be a positive number, got " + std::to_string(v));
  return float(v);
}

// Widths and counts.
void read_shape(const GgufFile& f, const std::string& a, const ArchTraits& t, ModelConfig& c) {
  c.n_embd = require_int(f, a + "embedding_length");
  c.n_layer = require_int(f, a + "block_count");
  c.n_head = require_int(f, a + "attention.head_count");
  c.n_kv_head = f.get_int(a + "attention.head_count_kv", c.n_head);
  // MoE files may carry the dense size too (qwen3moe, gpt-oss); their FFNs are
  // experts, sized by expert_feed_forward_length (read_moe).
  c.n_ff = t.moe ? 0 : require_int(f, a + "feed_forward_length");
  c.n_ctx_train = f.get_int(a + "context_length", 2048);
  c.head_dim = f.get_int(a + "attention.key_length", c.n_embd / c.n_head);
  if (c.head_dim <= 0) throw Error(f.path() + ": invalid metadata key '" + a + "attention.key_length'");
  if (f.get_int(a + "attention.value_length", c.head_dim) != c.head_dim)
    throw Error(f.path() + ": '" + a + "attention.value_length' != '" + a +
                "attention.key_length' is not supported");
  if (c.n_kv_head <= 0 || c.n_head % c.n_kv_head != 0)
    throw Error(f.path() + ": '" + a + "attention.head_count' " + std::to_string(c.n_head) +
                " is not a multiple of '" + a + "attention.head_count_kv' " + std::to_string(c.n_kv_head));
  if (c.head_dim % 2 != 0) throw Error(f.path() + ": head dimension must be even");
  c.rms_eps = positive_float(f, a + "attention.layer_norm_rms_epsilon", 1e-5);
}

// The global RoPE settings; per-layer base and scale come from describe_layers.
void read_rope(const GgufFile& f, const std::string& a, const ArchTraits& t, int64_t context_length,
               ModelConfig& c, float* freq_scale) {
  c.n_rot = f.get_int(a + "rope.dimension_count", c.head_dim);
  if (c.n_rot <= 0 || c.n_rot > c.head_dim || c.n_rot % 2 != 0)
    throw Error(f.path() + ": bad '" + a + "rope.dimension_count' " + std::to_string(c.n_rot));
  c.rope_neox = t.rope_neox;
  const std::string scaling = f.get_string(a + "rope.scaling.type", "none");
  const double factor = f.get_float(a + "rope.scaling.factor", 0.0);
  *freq_scale = 1.f;
  if (scaling == "linear" && factor > 0) {
    *freq_scale = float(1.0 / factor);
  } else if (scaling == "yarn" && factor > 1.0) {
    // The ramp and attention factor are YaRN's (model.cc yarn_factors);
    // llama.cpp's defaults beta_fast 32, beta_slow 1, ext_factor 1.
    c.yarn_factor = float(factor);
    const int64_t orig = f.get_int(a + "rope.scaling.original_context_length", -1);
    if (orig <= 0)
      throw Error(f.path() + ": YaRN needs '" + a + "rope.scaling.original_context_length'");
    c.rope_attn_factor = float((1.0 + 0.1 * std::log(factor)) * f.get_float(a + "rope.scaling.attn_factor", 1.0));
  } else if (scaling != "none" && scaling != "linear" && factor > 0 && factor != 1.0) {
    throw Error(f.path() + ": unsupported '" + a + "rope.scaling.type' '" + scaling + "'");
  }
  c.n_ctx_orig = f.get_int(a + "rope.scaling.original_context_length", c.n_ctx_train);
  if (const GgufValue* v = f.find(a + "rope.dimension_sections")) {
    if (v->type != GgufType::ARRAY || v->arr.size() != 4)
      throw Error(f.path() + ": '" + a + "rope.dimension_sections' must be an array of 4 integers");
    int64_t sum = 0;
    for (const GgufValue& e : v->arr) {
      const int64_t n = e.i != 0 ? e.i : int64_t(e.u);
      if (n < 0 || n > c.n_rot) throw Error(f.path() + ": bad '" + a + "rope.dimension_sections'");
      c.rope_sections.push_back(int32_t(n));
      sum += n;
    }
    if (sum <= 0) throw Error(f.path() + ": '" + a + "rope.dimension_sections' are all 0");
    if (c.yarn_factor != 1.f)
      throw Error(f.path() + ": YaRN together with M-RoPE sections is not supported");
  }
  if (t.longrope && c.n_ctx_orig < c.n_ctx_train) {
    if (c.n_ctx_orig <= 0)
      throw Error(f.path() + ": invalid metadata key '" + a + "rope.scaling.original_context_length'");
    const int64_t n_ctx = context_length > 0 ? context_length : c.n_ctx_train;
    c.longrope_long = n_ctx > c.n_ctx_orig;
    c.rope_attn_factor = positive_float(f, a + "rope.scaling.attn_factor", 1.0);
  }
}

// Which layers attend through the sliding window: <arch>.attention.sliding_window_pattern
// when the file has it (an integer period, or one flag per layer), else the
// architecture's period.
std::vector<bool> local_layers(const GgufFile& f, const std::string& a, const ArchTraits& t, int64_t n_layer) {
  const std::string key = a + "attention.sliding_window_pattern";
  std::vector<bool> local(size_t(n_layer), false);
  int64_t period = t.swa_period;
  if (const GgufValue* v = f.find(key)) {
    if (v->type == GgufType::ARRAY) {
      if (int64_t(v->arr.size()) != n_layer)
        throw Error(f.path() + ": '" + key + "' has " + std::to_string(v->arr.size()) + " entries, expected " +
                    std::to_string(n_layer) + " (one per block)");
      for (int64_t il = 0; il < n_layer; ++il) local[il] = v->arr[il].i != 0 || v->arr[il].u != 0;
      return local;
    }
    period = f.get_int(key, 0);
    if (period <= 0) throw Error(f.path() + ": invalid metadata key '" + key + "'");
  }
  if (period > 0)
    for (int64_t il = 0; il < n_layer; ++il) local[il] = il % period < period - 1;
  return local;
}

// The experts of an MoE architecture (MoeConfig).
void read_moe(const GgufFile& f, const std::string& a, const ArchTraits& t, ModelConfig& c) {
  MoeConfig& m = c.moe;
  m.n_expert = require_int(f, a + "expert_count");
  m.n_used = require_int(f, a + "expert_used_count");
  m.n_ff = require_int(f, a + "expert_feed_forward_length");
  m.n_ff_shared = f.get_int(a + "expert_shared_feed_forward_length", 0);
  if (m.n_used > m.n_expert || m.n_expert > 4096)
    throw Error(f.path() + ": '" + a + "expert_used_count' " + std::to_string(m.n_used) + " with '" + a +
                "expert_count' " + std::to_string(m.n_expert) + " is not supported");
  if (m.n_ff > INT32_MAX || m.n_ff_shared < 0 || m.n_ff_shared > INT32_MAX)
    throw Error(f.path() + ": invalid expert feed-forward length");
  m.gating = t.gating;
  m.router_bias = m.expert_bias = t.moe_bias;
  m.activation = t.expert_activation;
}

// The Gated DeltaNet shape of a hybrid architecture (DeltaNetConfig) and which
// layers are full attention: (il + 1) % full_attention_interval == 0.
int64_t read_delta_net(const GgufFile& f, const std::string& a, ModelConfig& c) {
  DeltaNetConfig& d = c.delta_net;
  d.d_conv = require_int(f, a + "ssm.conv_kernel");
  d.d_head = require_int(f, a + "ssm.state_size");
  d.n_k_head = require_int(f, a + "ssm.group_count");
  d.n_v_head = require_int(f, a + "ssm.time_step_rank");
  const int64_t inner = require_int(f, a + "ssm.inner_size");
  if (d.d_conv > 64 || d.d_head > 1024 || d.n_k_head > 4096 || d.n_v_head > 4096)
    throw Error(f.path() + ": Gated DeltaNet shape beyond the supported limits");
  if (inner != d.n_v_head * d.d_head)
    throw Error(f.path() + ": '" + a + "ssm.inner_size' " + std::to_string(inner) + " is not '" + a +
                "ssm.time_step_rank' x '" + a + "ssm.state_size' (" + std::to_string(d.n_v_head * d.d_head) + ")");
  if (d.n_v_head % d.n_k_head != 0)
    throw Error(f.path() + ": '" + a + "ssm.time_step_rank' must be a multiple of '" + a + "ssm.group_count'");
  if (f.find(a + "attention.recurrent_layers"))
    throw Error(f.path() + ": '" + a + "attention.recurrent_layers' is not supported (only full_attention_interval)");
  return require_int(f, a + "full_attention_interval");
}

void describe_layers(const GgufFile& f, const std::string& a, const ArchTraits& t, float freq_scale,
                     ModelConfig& c) {
  const float base = positive_float(f, a + "rope.freq_base", 10000.0);
  int32_t window = 0;
  if (t.swa_period > 0) {
    const std::string key = a + "attention.sliding_window";
    const int64_t w = t.default_window > 0 ? f.get_int(key, t.default_window) : require_int(f, key);
    if (w <= 0 || w > INT32_MAX) throw Error(f.path() + ": invalid metadata key '" + key + "'");
    window = int32_t(w);
  }
  const std::vector<bool> local = local_layers(f, a, t, c.n_layer);
  float swa_base = base;
  if (t.swa_period > 0) swa_base = positive_float(f, a + "rope.freq_base_swa", t.swa_rope_base > 0 ? t.swa_rope_base : base);
  const int64_t scale_dim =
      t.wide_query_scale_layers > 0 && c.n_layer == t.wide_query_scale_layers ? c.n_embd / c.n_head : c.head_dim;
  float attn_softcap = 0.f;
  if (t.softcaps) {
    attn_softcap = positive_float(f, a + "attn_logit_softcapping", t.default_attn_softcap);
    c.final_softcap = positive_float(f, a + "final_logit_softcapping", t.default_final_softcap);
  }
  c.embd_scale = t.embd_scale ? float(std::sqrt(double(c.n_embd))) : 1.f;
  c.ffn_norm_tensor = t.ffn_norm;
  if (t.moe) read_moe(f, a, t, c);
  const int64_t interval = t.hybrid ? read_delta_net(f, a, c) : 0;
  const RopeFactors scaled = c.yarn_factor != 1.f         ? RopeFactors::kYarn
                             : !c.rope_sections.empty()   ? RopeFactors::kSections
                                                          : RopeFactors::kNone;
  c.layers.assign(size_t(c.n_layer), LayerConfig{});
  c.n_recurrent = 0;
  for (int64_t il = 0; il < c.n_layer; ++il) {
    LayerConfig& l = c.layers[il];
    if (t.hybrid && (il + 1) % interval != 0) {
      l.mixer = Mixer::kDeltaNet;
      l.state_index = int32_t(c.n_recurrent++);
    }
    l.attn_gate = t.hybrid && l.mixer == Mixer::kAttention;
    l.ffn = t.moe ? Ffn::kMoe : Ffn::kDense;
    l.attn_sinks = t.attn_sinks;
    l.out_bias = t.out_bias;
    l.qkv_bias = t.qkv_bias;
    l.qk_norm = t.qk_norm;
    l.post_attn_norm = l.post_ffn_norm = t.sandwich_norms;
    l.projections = t.projections;
    l.activation = t.activation;
    l.window = local[il] ? window : 0;
    l.rope_base = local[il] ? swa_base : base;
    l.rope_freq_scale = local[il] && t.swa_unscaled ? 1.f : freq_scale;
    l.rope_factors = t.longrope && c.n_ctx_orig < c.n_ctx_train ? RopeFactors::kLongRope
                     : t.rope_freqs                            ? RopeFactors::kRopeFreqs
                                                               : scaled;
    l.attn_scale = float(1.0 / std::sqrt(double(scale_dim)));
    l.attn_softcap = attn_softcap;
  }
}

}  // namespace

ModelConfig ModelConfig::from_gguf(const GgufFile& f, int64_t context_length) {
  ModelConfig c;
  c.arch_name = f.get_string("general.architecture");
  const ArchTraits& t = find_traits(f, c.arch_name);
  c.arch = t.arch;
  const std::string a = c.arch_name + ".";
  read_shape(f, a, t, c);
  check_config_against_tensors(f, c);  // before the per-layer description is sized by it
  float freq_scale = 1.f;
  read_rope(f, a, t, context_length, c, &freq_scale);
  describe_layers(f, a, t, freq_scale, c);
  return c;
}

bool ModelConfig::has_window() const {
  for (const LayerConfig& l : layers)
    if (l.window > 0) return true;
  return false;
}

std::string ModelConfig::describe() const {
  std::ostringstream o;
  o << arch_name << ": " << n_layer << " blocks, embedding " << n_embd << ", heads " << n_head
    << "/" << n_kv_head << " (dim " << head_dim << ")";
  if (n_ff > 0) o << ", feed-forward " << n_ff;  // (MoE models: the experts' width, below)
  o << ", vocab " << n_vocab << ", rope " << (rope_neox ? "neox" : "normal");
  int64_t n_local = 0;
  for (const LayerConfig& l : layers) n_local += l.window > 0;
  if (!layers.empty()) o << " base " << layers.back().rope_base;
  if (n_local > 0) {
    for (const LayerConfig& l : layers)
      if (l.window > 0) {
        o << ", sliding window " << l.window << " on " << n_local << " of " << n_layer << " blocks (rope base "
          << l.rope_base << ")";
        break;
      }
  }
  if (!layers.empty() && layers[0].rope_factors == RopeFactors::kLongRope)
    o << ", LongRoPE " << (longrope_long ? "long" : "short") << " factors";
  if (!layers.empty() && layers[0].attn_softcap > 0) o << ", attention soft-cap " << layers[0].attn_softcap;
  if (final_softcap > 0) o << ", final soft-cap " << final_softcap;
  if (moe.n_expert > 0) {
    o << ", " << moe.n_expert << " experts (" << moe.n_used << " per token, feed-forward " << moe.n_ff << ")";
    if (moe.n_ff_shared > 0) o << " + a shared expert (" << moe.n_ff_shared << ")";
  }
  if (n_recurrent > 0)
    o << ", " << n_recurrent << " of " << n_layer << " blocks Gated DeltaNet (" << delta_net.n_k_head << "/"
      << delta_net.n_v_head << " heads of " << delta_net.d_head << ", conv " << delta_net.d_conv << ")";
  if (!layers.empty() && layers[0].rope_factors == RopeFactors::kYarn) o << ", YaRN x" << yarn_factor;
  return o.str();
}

}  // namespace pc
