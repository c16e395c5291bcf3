// Random-weight model generator (see make_model.h).
#include "model/make_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <unordered_set>

#include "common/error.h"
#include "gguf/gguf.h"
#include "gguf/quants.h"

namespace pc {

namespace {

struct Shape {
  const char* name;
  int64_t n_embd, n_layer, n_head, n_kv_head, n_ff;
  int64_t head_dim;  // 0: n_embd / n_head
  int32_t window;    // sliding window of the architectures that have one
  int64_t n_vocab = 0;  // the model's token count (tokenizer padded to it); 0: the tokenizer's
  // MoE architectures: experts, experts per token, an expert's width (0: n_ff / 2)
  // and the shared expert's (0: n_ff).
  int64_t n_expert = 8, n_used = 2, n_ff_exp = 0, n_ff_shexp = 0;
  // Hybrid (qwen35) architectures: DeltaNet head size (0: the head size), q/k and v
  // heads (0: n_kv_head, n_head), a full-attention layer every `interval` (0:
  // min(4, n_layer)), rotary dimensions of full attention (0: a quarter of the head).
  int64_t dn_head = 0, dn_k_heads = 0, dn_v_heads = 0, interval = 0, n_rot = 0;
};

constexpr Shape kShapes[] = {
    {"smollm-135m", 576, 30, 9, 3, 1536, 0, 4096},
    {"tinyllama-1.1b", 2048, 22, 32, 4, 5632, 0, 4096},
    // A window of 32 positions: prompts of a test cross it.
    {"tiny", 64, 2, 4, 2, 128, 0, 32},
    {"micro", 32, 1, 2, 1, 64, 0, 32},
    // Row lengths that are multiples of 256, so K-quant weights stay K-quants.
    {"small", 256, 2, 4, 2, 512, 0, 32},
    // Gemma 2 2B's widths (head size 256 > n_embd / n_head) and window.
    {"gemma2-2b", 2304, 26, 8, 4, 9216, 256, 4096},
    // Llama 3.2 3B, Llama 3 8B and Qwen2.5 7B: the sizes users run, for benchmarks
    // (3.2 3B's output matrix is written apart from the token embedding, which the
    // real model ties to it: the same bytes a token reads).
    {"llama3.2-3b", 3072, 28, 24, 8, 8192, 0, 4096, 128256},
    {"llama3-8b", 4096, 32, 32, 8, 14336, 0, 4096, 128256},
    {"qwen2.5-7b", 3584, 28, 28, 4, 18944, 0, 4096, 152064},
    // Realistic shapes of the 2026 architectures (with fewer blocks where the
    // experts would not fit in memory), for `bench`: Qwen3-30B-A3B's widths
    // (128 experts of 768, 8 per token) in 4 of its 48 blocks; gpt-oss-20b's (32
    // experts of 2880, 4 per token, window 128) in 4 of its 24; a Qwen3.5-2B-like
    // hybrid (DeltaNet heads 16 x 128, full attention every 4th block, head 256
    // with 64 rotary dimensions).
    {"qwen3-30b-a3b-4l", 2048, 4, 32, 4, 6144, 128, 4096, 0, 128, 8, 768, 0},
    {"gpt-oss-20b-4l", 2880, 4, 64, 8, 2880, 64, 128, 0, 32, 4, 2880, 0},
    {"qwen35-2b", 2048, 24, 8, 2, 6144, 256, 4096, 0, 8, 2, 0, 0, 128, 16, 16, 4, 64},
};

// What a file of the architecture holds, as llama.cpp's converter writes it
// (model/config.cc reads it back).
struct Arch {
  const char* name;
  float rms_eps;
  float rope_base;
  bool qkv_bias;        // qwen2: attn_{q,k,v}.bias
  bool qk_norm;         // qwen3, gemma3: per-head attn_{q,k}_norm.weight
  bool sandwich_norms;  // gemma: post_attention_norm, post_ffw_norm
  bool fused;           // phi3: attn_qkv, ffn_up holding gate and up
  bool gemma2_keys;     // sliding_window and the two soft-caps
  bool gemma3_keys;     // sliding_window, rope.freq_base_swa, linear scaling 8
  bool tied;            // no output.weight (gemma)
  // The 2026 architectures (make-model writes them as llama.cpp's converter does).
  bool moe = false;          // routed experts instead of the dense FFN
  bool shared_expert = false;  // qwen35moe: a gated shared expert
  bool gpt_oss = false;      // attention sinks and biases, YaRN, alternating window layers, expert biases
  bool hybrid = false;       // Gated DeltaNet layers and gated full attention (qwen35)
};

constexpr Arch kArchs[] = {
    {"llama", 1e-5f, 10000.0f, false, false, false, false, false, false, false},
    {"qwen2", 1e-6f, 1000000.0f, true, false, false, false, false, false, false},
    {"qwen3", 1e-6f, 1000000.0f, false, true, false, false, false, false, false},
    {"gemma2", 1e-6f, 10000.0f, false, false, true, false, true, false, true},
    {"gemma3", 1e-6f, 1000000.0f, false, true, true, false, false, true, true},
    {"phi3", 1e-5f, 10000.0f, false, false, false, true, false, false, false},
    {"qwen3moe", 1e-6f, 1000000.0f, false, true, false, false, false, false, false, true},
    {"gpt-oss", 1e-5f, 150000.0f, true, false, false, false, false, false, false, true, false, true},
    {"qwen35", 1e-6f, 10000000.0f, false, true, false, false, false, false, true, false, false, false, true},
    {"qwen35moe", 1e-6f, 10000000.0f, false, true, false, false, false, false, true, true, true, false, true},
};

int64_t head_dim_of(const Shape& s) { return s.head_dim > 0 ? s.head_dim : s.n_embd / s.n_head; }
int64_t expert_ff(const Shape& s) { return s.n_ff_exp > 0 ? s.n_ff_exp : s.n_ff / 2; }

struct DeltaNetShape {
  int64_t head, k_heads, v_heads, interval;
};
DeltaNetShape delta_net_shape(const Shape& s) {
  return {s.dn_head > 0 ? s.dn_head : head_dim_of(s), s.dn_k_heads > 0 ? s.dn_k_heads : s.n_kv_head,
          s.dn_v_heads > 0 ? s.dn_v_heads : s.n_head, s.interval > 0 ? s.interval : std::min<int64_t>(4, s.n_layer)};
}

// llama.cpp's general.file_type ("mostly X") for a weight type or mix.
uint32_t file_type_of(GgmlType t, TypeMix mix) {
  switch (mix) {
    case TypeMix::kQ4_K_M: return 15;
    case TypeMix::kQ5_K_M: return 17;
    case TypeMix::kQ6_K: return 18;
    case TypeMix::kIQ4_XS: return 30;
    case TypeMix::kNone: break;
  }
  switch (t) {
    case GgmlType::F32: return 0;
    case GgmlType::F16: return 1;
    case GgmlType::Q4_0: return 2;
    case GgmlType::Q4_1: return 3;
    case GgmlType::Q8_0: return 7;
    case GgmlType::Q5_0: return 8;
    case GgmlType::Q5_1: return 9;
    case GgmlType::Q4_K: return 14;  // Q4_K_S: every matrix Q4_K
    case GgmlType::Q5_K: return 16;  // Q5_K_S
    case GgmlType::Q6_K: return 18;
    case GgmlType::IQ4_NL: return 25;
    case GgmlType::IQ4_XS: return 30;
    case GgmlType::BF16: return 32;
    case GgmlType::MXFP4: return 38;  // MXFP4_MOE
    default: throw Error("make-model: unsupported weight type " + ggml_type_name(t) + " (use " +
                         ggml_supported_type_names() + ")");
  }
}

// What a matrix is to the mix rules.
enum class Role { kOther, kTokenEmbd, kOutput, kAttnV, kFfnDown };

// llama.cpp's use_more_bits: the first and last eighth of the layers, and every
// third layer between.
bool use_more_bits(int64_t i, int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// The mix's type for a matrix of the role in `layer` (of n_layer), before the
// shape fallback.
GgmlType mix_type(TypeMix mix, Role role, int64_t layer, const Shape& s, bool tied) {
  const GgmlType base = mix == TypeMix::kQ4_K_M   ? GgmlType::Q4_K
                        : mix == TypeMix::kQ5_K_M ? GgmlType::Q5_K
                        : mix == TypeMix::kQ6_K   ? GgmlType::Q6_K
                                                  : GgmlType::IQ4_XS;
  if (role == Role::kOutput || (tied && role == Role::kTokenEmbd)) return GgmlType::Q6_K;
  const bool more_bits = use_more_bits(layer, s.n_layer);
  switch (role) {
    case Role::kAttnV:
      if (mix == TypeMix::kIQ4_XS && s.n_head / s.n_kv_head >= 4) return GgmlType::Q5_K;
      if ((mix == TypeMix::kQ4_K_M || mix == TypeMix::kQ5_K_M) && more_bits) return GgmlType::Q6_K;
      return base;
    case Role::kFfnDown:
      if ((mix == TypeMix::kQ4_K_M || mix == TypeMix::kQ5_K_M) && more_bits) return GgmlType::Q6_K;
      if (mix == TypeMix::kIQ4_XS && layer < s.n_layer / 8) return GgmlType::Q5_K;
      return base;
    default: return base;
  }
}

// llama.cpp's fallback for rows that are not whole super-blocks.
GgmlType mix_fallback(GgmlType t, Role role, int64_t row_len) {
  if (row_len % ggml_block_elems(t) == 0) return t;
  GgmlType f = GgmlType::F16;
  if (role == Role::kOutput) {
    f = GgmlType::Q8_0;
  } else {
    switch (t) {
      case GgmlType::Q4_K: f = GgmlType::Q5_0; break;
      case GgmlType::Q5_K: f = GgmlType::Q5_1; break;
      case GgmlType::Q6_K: f = GgmlType::Q8_0; break;
      case GgmlType::IQ4_XS: f = GgmlType::IQ4_NL; break;
      default: break;
    }
  }
  return row_len % ggml_block_elems(f) == 0 ? f : GgmlType::F16;
}

// Seeded source of approximately standard-normal samples. Each sample is the sum of
// four 16-bit uniforms from one mt19937_64 draw (Irwin–Hall, n = 4), rescaled to mean
// 0, variance 1 (so |x| < 3.47): close enough to Gaussian for random weights, and
// cheaper than std::normal_distribution (no log/sqrt), which matters for 1B shapes.
class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  float normal() {
    uint64_t r = gen_();
    uint32_t s = static_cast<uint32_t>(r & 0xffff) + static_cast<uint32_t>((r >> 16) & 0xffff) +
                 static_cast<uint32_t>((r >> 32) & 0xffff) + static_cast<uint32_t>(r >> 48);
    // mean 4 * 65535/2; standard deviation sqrt(4 * (65536^2 - 1) / 12).
    return (static_cast<float>(s) - 131070.0f) * (1.0f / 37837.23f);
  }

 private:
  std::mt19937_64 gen_;
};

// A [ne0, ne1] matrix (ne1 rows of ne0 elements) of N(0, stddev^2) values in `type`.
std::vector<uint8_t> random_matrix(Rng& rng, GgmlType type, int64_t ne0, int64_t ne1, float stddev) {
  const int64_t row_bytes = ggml_row_bytes(type, ne0);
  std::vector<uint8_t> out(static_cast<size_t>(row_bytes * ne1));
  std::vector<float> row(ne0);
  for (int64_t r = 0; r < ne1; ++r) {
    for (float& v : row) v = rng.normal() * stddev;
    quantize_row(type, row.data(), out.data() + r * row_bytes, ne0);
  }
  return out;
}

// n F32 values mean + stddev * N(0, 1), as raw bytes.
std::vector<uint8_t> random_f32(Rng& rng, int64_t n, float mean, float stddev) {
  std::vector<float> v(n);
  for (float& x : v) x = mean + stddev * rng.normal();
  std::vector<uint8_t> out(n * sizeof(float));
  quantize_row(GgmlType::F32, v.data(), out.data(), n);
  return out;
}

const Shape& find_shape(const std::string& name) {
  for (const Shape& s : kShapes)
    if (name == s.name) return s;
  std::string known;
  for (const Shape& s : kShapes) known += (known.empty() ? "" : ", ") + std::string(s.name);
  throw Error("make-model: unknown shape '" + name + "' (known: " + known + ")");
}

const Arch& find_arch(const std::string& name) {
  for (const Arch& a : kArchs)
    if (name == a.name) return a;
  std::string known;
  for (const Arch& a : kArchs) known += (known.empty() ? "" : ", ") + std::string(a.name);
  throw Error("make-model: unknown architecture '" + name + "' (known: " + known + ")");
}

// Keeps the first n entries of an array value (no-op if shorter or not an array).
void truncate_array(GgufValue& v, size_t n) {
  if (v.type == GgufType::ARRAY && v.arr.size() > n) v.arr.resize(n);
}

// Applies MakeModelOptions::n_vocab_limit to copied tokenizer keys: shortens the
// per-token arrays, drops merges that make a token no longer present, and drops
// special-token ids that fall outside the kept range.
void limit_vocab(std::vector<std::pair<std::string, GgufValue>>& kv, size_t n) {
  std::unordered_set<std::string> kept;
  for (auto& [k, v] : kv)
    if (k == "tokenizer.ggml.tokens") {
      truncate_array(v, n);
      for (const GgufValue& t : v.arr) kept.insert(t.s);
    }
  std::vector<std::pair<std::string, GgufValue>> out;
  for (auto& [k, v] : kv) {
    if (k == "tokenizer.ggml.scores" || k == "tokenizer.ggml.token_type") truncate_array(v, n);
    if (k == "tokenizer.ggml.merges" && v.type == GgufType::ARRAY) {
      std::vector<GgufValue> merges;
      for (GgufValue& m : v.arr) {
        size_t sp = m.s.find(' ');
        if (sp == std::string::npos) continue;
        std::string a = m.s.substr(0, sp), b = m.s.substr(sp + 1);
        if (kept.count(a) && kept.count(b) && kept.count(a + b)) merges.push_back(std::move(m));
      }
      v.arr = std::move(merges);
    }
    if (k.ends_with("_token_id") && v.is_integer() && v.i >= static_cast<int64_t>(n)) continue;
    out.emplace_back(k, std::move(v));
  }
  kv = std::move(out);
}

// A small SentencePiece-style vocabulary the project provides itself, for when
// no vocabulary file is given: <unk>, <s>, </s>, the 256 byte tokens, "▁" and
// every printable ASCII character with and without a leading "▁". Returns n_vocab.
int64_t builtin_tokenizer(GgufWriter& w) {
  std::vector<GgufValue> tokens, scores, types;
  auto add = [&](const std::string& text, float score, int32_t type) {
    tokens.push_back(GgufValue::make_string(text));
    scores.push_back(GgufValue::make_float(GgufType::FLOAT32, score));
    types.push_back(GgufValue::make_int(GgufType::INT32, type));
  };
  add("<unk>", 0, 2);
  add("<s>", 0, 3);
  add("</s>", 0, 3);
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    add(buf, 0, 6);
  }
  float score = -1;
  add("\xe2\x96\x81", score--, 1);
  for (char c = 33; c < 127; ++c) add(std::string(1, c), score--, 1);
  for (char c = 33; c < 127; ++c) add("\xe2\x96\x81" + std::string(1, c), score--, 1);
  const int64_t n = int64_t(tokens.size());
  w.set_string("tokenizer.ggml.model", "llama");
  w.set("tokenizer.ggml.tokens", GgufValue::make_array(GgufType::STRING, std::move(tokens)));
  w.set("tokenizer.ggml.scores", GgufValue::make_array(GgufType::FLOAT32, std::move(scores)));
  w.set("tokenizer.ggml.token_type", GgufValue::make_array(GgufType::INT32, std::move(types)));
  w.set_u32("tokenizer.ggml.unknown_token_id", 0);
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  return n;
}

// Copies every tokenizer.* key of the vocabulary file into w; returns n_vocab.
int64_t copy_tokenizer(const MakeModelOptions& opt, GgufWriter& w) {
  if (opt.vocab_path.empty()) return builtin_tokenizer(w);
  std::unique_ptr<GgufFile> vocab = GgufFile::open(opt.vocab_path);
  std::vector<std::pair<std::string, GgufValue>> kv;
  for (const auto& [k, v] : vocab->metadata())
    if (k.starts_with("tokenizer.")) kv.emplace_back(k, v);
  if (opt.n_vocab_limit > 0) limit_vocab(kv, static_cast<size_t>(opt.n_vocab_limit));
  int64_t n_vocab = 0;
  for (auto& [k, v] : kv) {
    if (k == "tokenizer.ggml.tokens" && v.type == GgufType::ARRAY) n_vocab = static_cast<int64_t>(v.arr.size());
    w.set(k, std::move(v));
  }
  if (n_vocab == 0)
    throw Error(opt.vocab_path + ": no tokenizer.ggml.tokens array (not a vocabulary file?)");
  return n_vocab;
}

// Pads the token list (and its scores / types) to n tokens with unused "[PADi]"
// tokens, as llama.cpp's converter pads a vocabulary to the embedding's rows.
// Returns n.
int64_t pad_tokenizer(GgufWriter& w, int64_t n) {
  auto pad = [&](const char* key, auto make) {
    const GgufValue* v = w.find(key);
    if (!v || v->type != GgufType::ARRAY) return;
    GgufValue grown = *v;
    for (int64_t i = int64_t(grown.arr.size()); i < n; ++i) grown.arr.push_back(make(i));
    w.set(key, std::move(grown));
  };
  pad("tokenizer.ggml.tokens", [](int64_t i) { return GgufValue::make_string("[PAD" + std::to_string(i) + "]"); });
  pad("tokenizer.ggml.scores", [](int64_t) { return GgufValue::make_float(GgufType::FLOAT32, 0.0); });
  pad("tokenizer.ggml.token_type", [](int64_t) { return GgufValue::make_int(GgufType::INT32, 5); });  // UNUSED
  return n;
}

void set_hparams(GgufWriter& w, const MakeModelOptions& opt, const Shape& s, const Arch& a) {
  const std::string p = std::string(a.name) + ".";
  const uint32_t head_dim = static_cast<uint32_t>(head_dim_of(s));
  w.set_string("general.architecture", a.name);
  w.set_string("general.name", "random " + opt.shape + " " + opt.arch + " " +
                                   (opt.mix == TypeMix::kNone ? ggml_type_name(opt.type) : type_mix_name(opt.mix)));
  w.set_u32("general.file_type", file_type_of(opt.type, opt.mix));
  w.set_u32(p + "context_length", static_cast<uint32_t>(opt.context_length));
  w.set_u32(p + "embedding_length", static_cast<uint32_t>(s.n_embd));
  w.set_u32(p + "block_count", static_cast<uint32_t>(s.n_layer));
  w.set_u32(p + "feed_forward_length", static_cast<uint32_t>(s.n_ff));
  w.set_u32(p + "attention.head_count", static_cast<uint32_t>(s.n_head));
  w.set_u32(p + "attention.head_count_kv", static_cast<uint32_t>(s.n_kv_head));
  w.set_f32(p + "attention.layer_norm_rms_epsilon", a.rms_eps);
  w.set_f32(p + "rope.freq_base", a.rope_base);
  w.set_u32(p + "rope.dimension_count", head_dim);
  if (a.qk_norm || s.head_dim > 0 || a.sandwich_norms) {
    w.set_u32(p + "attention.key_length", head_dim);
    w.set_u32(p + "attention.value_length", head_dim);
  }
  if (a.gemma2_keys || a.gemma3_keys) w.set_u32(p + "attention.sliding_window", uint32_t(s.window));
  if (a.gemma2_keys) {
    w.set_f32(p + "attn_logit_softcapping", 50.0f);
    w.set_f32(p + "final_logit_softcapping", 30.0f);
  }
  if (a.gemma3_keys) {
    w.set_f32(p + "rope.freq_base_swa", 10000.0f);
    w.set_string(p + "rope.scaling.type", "linear");
    w.set_f32(p + "rope.scaling.factor", 8.0f);
  }
  if (a.moe) {
    w.set_u32(p + "expert_count", uint32_t(s.n_expert));
    w.set_u32(p + "expert_used_count", uint32_t(s.n_used));
    w.set_u32(p + "expert_feed_forward_length", uint32_t(expert_ff(s)));
    if (a.shared_expert) w.set_u32(p + "expert_shared_feed_forward_length", uint32_t(s.n_ff_shexp > 0 ? s.n_ff_shexp : s.n_ff));
  }
  if (a.gpt_oss) {
    w.set_u32(p + "attention.sliding_window", uint32_t(s.window));
    w.set_string(p + "rope.scaling.type", "yarn");
    w.set_f32(p + "rope.scaling.factor", 32.0f);
    w.set_u32(p + "rope.scaling.original_context_length", 4096);
  }
  if (a.hybrid) {
    const int64_t rot = s.n_rot > 0 ? s.n_rot : head_dim / 4;
    w.set_u32(p + "attention.key_length", head_dim);
    w.set_u32(p + "attention.value_length", head_dim);
    w.set_u32(p + "rope.dimension_count", uint32_t(rot));
    // M-RoPE sections in rotary pairs [t, h, w, e], interleaved so that every pair
    // rotates (Qwen3.5: 11, 11, 10 of 32 pairs).
    const int32_t pairs = int32_t(rot / 2);
    std::vector<GgufValue> sec;
    for (int32_t v : {(pairs + 2) / 3, (pairs + 1) / 3, pairs / 3, 0})
      sec.push_back(GgufValue::make_int(GgufType::INT32, v));
    w.set(p + "rope.dimension_sections", GgufValue::make_array(GgufType::INT32, std::move(sec)));
    const DeltaNetShape d = delta_net_shape(s);
    w.set_u32(p + "ssm.conv_kernel", 4);
    w.set_u32(p + "ssm.state_size", uint32_t(d.head));
    w.set_u32(p + "ssm.group_count", uint32_t(d.k_heads));
    w.set_u32(p + "ssm.time_step_rank", uint32_t(d.v_heads));
    w.set_u32(p + "ssm.inner_size", uint32_t(d.v_heads * d.head));
    w.set_u32(p + "full_attention_interval", uint32_t(d.interval));
  }
}

// Adds a random [ne0, ne1] weight matrix with stddev 1/sqrt(ne0) (ne0 is the fan-in:
// each output is a dot product over a row), so activations keep unit scale. Its
// type: opt.type (with the uniform fallback), or the mix's for the role and layer.
void add_matrix_as(GgufWriter& w, Rng& rng, GgmlType t, const std::string& name, int64_t ne0, int64_t ne1) {
  w.add_tensor(name, t, {ne0, ne1}, random_matrix(rng, t, ne0, ne1, 1.0f / std::sqrt(static_cast<float>(ne0))));
}
void add_matrix(GgufWriter& w, Rng& rng, const MakeModelOptions& opt, const Shape& s, bool tied, Role role,
                int64_t layer, const std::string& name, int64_t ne0, int64_t ne1) {
  add_matrix_as(w, rng,
                opt.mix == TypeMix::kNone ? make_model_matrix_type(opt.type, ne0)
                                          : mix_fallback(mix_type(opt.mix, role, layer, s, tied), role, ne0),
                name, ne0, ne1);
}
// The mixes' per-tensor rules name the dense layers' matrices only: DeltaNet, router
// and expert matrices take opt.type (with the uniform fallback) in every file.
void add_matrix(GgufWriter& w, Rng& rng, GgmlType type, const std::string& name, int64_t ne0, int64_t ne1) {
  add_matrix_as(w, rng, make_model_matrix_type(type, ne0), name, ne0, ne1);
}

void add_f32(GgufWriter& w, Rng& rng, const std::string& name, int64_t n, float mean, float stddev) {
  w.add_tensor(name, GgmlType::F32, {n}, random_f32(rng, n, mean, stddev));
}

// A Gated DeltaNet mixer's tensors (qwen35), values in the ranges of real files.
void add_delta_net(GgufWriter& w, Rng& rng, const MakeModelOptions& opt, const Shape& s, const std::string& p) {
  const DeltaNetShape d = delta_net_shape(s);
  const int64_t channels = (2 * d.k_heads + d.v_heads) * d.head, inner = d.v_heads * d.head;
  add_matrix(w, rng, opt.type, p + "attn_qkv.weight", s.n_embd, channels);
  add_matrix(w, rng, opt.type, p + "attn_gate.weight", s.n_embd, inner);
  w.add_tensor(p + "ssm_conv1d.weight", GgmlType::F32, {4, channels}, random_f32(rng, 4 * channels, 0.f, 0.5f));
  add_f32(w, rng, p + "ssm_dt.bias", d.v_heads, 0.f, 0.5f);
  std::vector<float> a(size_t(d.v_heads));
  for (float& x : a) x = -std::exp(-2.f + 0.8f * rng.normal());  // -exp(A_log), in (-0.8, -0.01) mostly
  std::vector<uint8_t> ab(a.size() * sizeof(float));
  quantize_row(GgmlType::F32, a.data(), ab.data(), int64_t(a.size()));
  w.add_tensor(p + "ssm_a", GgmlType::F32, {d.v_heads}, std::move(ab));
  add_matrix(w, rng, opt.type, p + "ssm_beta.weight", s.n_embd, d.v_heads);
  add_matrix(w, rng, opt.type, p + "ssm_alpha.weight", s.n_embd, d.v_heads);
  add_f32(w, rng, p + "ssm_norm.weight", d.head, 1.0f, 0.02f);
  add_matrix(w, rng, opt.type, p + "ssm_out.weight", inner, s.n_embd);
}

// Routed experts ([in, out, n_expert] tensors), gpt-oss's biases, qwen35moe's shared expert.
void add_experts(GgufWriter& w, Rng& rng, const MakeModelOptions& opt, const Shape& s, const Arch& a,
                 const std::string& p) {
  const int64_t F = expert_ff(s), N = s.n_expert, E = s.n_embd;
  add_matrix(w, rng, GgmlType::F32, p + "ffn_gate_inp.weight", E, N);
  auto experts = [&](const std::string& name, int64_t in, int64_t out) {
    const GgmlType t = make_model_matrix_type(opt.type, in);
    w.add_tensor(name, t, {in, out, N}, random_matrix(rng, t, in, out * N, 1.0f / std::sqrt(float(in))));
  };
  experts(p + "ffn_gate_exps.weight", E, F);
  experts(p + "ffn_up_exps.weight", E, F);
  experts(p + "ffn_down_exps.weight", F, E);
  if (a.gpt_oss) {
    add_f32(w, rng, p + "ffn_gate_inp.bias", N, 0.f, 0.1f);
    w.add_tensor(p + "ffn_gate_exps.bias", GgmlType::F32, {F, N}, random_f32(rng, F * N, 0.f, 0.1f));
    w.add_tensor(p + "ffn_up_exps.bias", GgmlType::F32, {F, N}, random_f32(rng, F * N, 0.f, 0.1f));
    w.add_tensor(p + "ffn_down_exps.bias", GgmlType::F32, {E, N}, random_f32(rng, E * N, 0.f, 0.1f));
  }
  if (a.shared_expert) {
    const int64_t S = s.n_ff_shexp > 0 ? s.n_ff_shexp : s.n_ff;
    add_f32(w, rng, p + "ffn_gate_inp_shexp.weight", E, 0.f, 1.0f / std::sqrt(float(E)));
    add_matrix(w, rng, opt.type, p + "ffn_gate_shexp.weight", E, S);
    add_matrix(w, rng, opt.type, p + "ffn_up_shexp.weight", E, S);
    add_matrix(w, rng, opt.type, p + "ffn_down_shexp.weight", S, E);
  }
}

void add_block(GgufWriter& w, Rng& rng, const MakeModelOptions& opt, const Shape& s,
               const Arch& a, int64_t i) {
  const std::string p = "blk." + std::to_string(i) + ".";
  const int64_t hd = head_dim_of(s);
  const int64_t q_dim = s.n_head * hd, kv_dim = s.n_kv_head * hd;
  add_f32(w, rng, p + "attn_norm.weight", s.n_embd, 1.0f, 0.02f);
  const bool tied = false;  // only token_embd / output depend on it
  const bool delta_net = a.hybrid && (i + 1) % delta_net_shape(s).interval != 0;
  if (delta_net) {
    add_delta_net(w, rng, opt, s, p);
  } else {
    if (a.fused) {
      add_matrix(w, rng, opt, s, tied, Role::kAttnV, i, p + "attn_qkv.weight", s.n_embd, q_dim + 2 * kv_dim);
    } else {
      // qwen35's gated attention: each head's query, then its output gate.
      add_matrix(w, rng, opt, s, tied, Role::kOther, i, p + "attn_q.weight", s.n_embd, a.hybrid ? 2 * q_dim : q_dim);
      add_matrix(w, rng, opt, s, tied, Role::kOther, i, p + "attn_k.weight", s.n_embd, kv_dim);
      add_matrix(w, rng, opt, s, tied, Role::kAttnV, i, p + "attn_v.weight", s.n_embd, kv_dim);
    }
    if (a.qkv_bias) {
      add_f32(w, rng, p + "attn_q.bias", q_dim, 0.0f, 0.02f);
      add_f32(w, rng, p + "attn_k.bias", kv_dim, 0.0f, 0.02f);
      add_f32(w, rng, p + "attn_v.bias", kv_dim, 0.0f, 0.02f);
    }
    if (a.qk_norm) {
      add_f32(w, rng, p + "attn_q_norm.weight", hd, 1.0f, 0.02f);
      add_f32(w, rng, p + "attn_k_norm.weight", hd, 1.0f, 0.02f);
    }
    add_matrix(w, rng, opt, s, tied, Role::kOther, i, p + "attn_output.weight", q_dim, s.n_embd);
    if (a.gpt_oss) {
      add_f32(w, rng, p + "attn_output.bias", s.n_embd, 0.0f, 0.02f);
      add_f32(w, rng, p + "attn_sinks.weight", s.n_head, 1.0f, 1.0f);
    }
  }
  if (a.sandwich_norms) add_f32(w, rng, p + "post_attention_norm.weight", s.n_embd, 1.0f, 0.02f);
  // qwen35 and gpt-oss name the FFN's input norm post_attention_norm.
  add_f32(w, rng, p + (a.hybrid || a.gpt_oss ? "post_attention_norm.weight" : "ffn_norm.weight"), s.n_embd, 1.0f, 0.02f);
  if (a.moe) {
    add_experts(w, rng, opt, s, a, p);
  } else {
    if (a.fused) {
      add_matrix(w, rng, opt, s, tied, Role::kOther, i, p + "ffn_up.weight", s.n_embd, 2 * s.n_ff);  // rows: gate, then up
    } else {
      add_matrix(w, rng, opt, s, tied, Role::kOther, i, p + "ffn_gate.weight", s.n_embd, s.n_ff);
      add_matrix(w, rng, opt, s, tied, Role::kOther, i, p + "ffn_up.weight", s.n_embd, s.n_ff);
    }
    add_matrix(w, rng, opt, s, tied, Role::kFfnDown, i, p + "ffn_down.weight", s.n_ff, s.n_embd);
  }
  if (a.sandwich_norms) add_f32(w, rng, p + "post_ffw_norm.weight", s.n_embd, 1.0f, 0.02f);
}

}  // namespace

TypeMix parse_type_mix(const std::string& name) {
  for (TypeMix m : {TypeMix::kQ4_K_M, TypeMix::kQ5_K_M, TypeMix::kQ6_K, TypeMix::kIQ4_XS})
    if (name == type_mix_name(m)) return m;
  return TypeMix::kNone;
}

std::string type_mix_name(TypeMix mix) {
  switch (mix) {
    case TypeMix::kQ4_K_M: return "Q4_K_M";
    case TypeMix::kQ5_K_M: return "Q5_K_M";
    case TypeMix::kQ6_K: return "Q6_K";
    case TypeMix::kIQ4_XS: return "IQ4_XS";
    case TypeMix::kNone: break;
  }
  return "";
}

std::vector<std::string> make_model_shapes() {
  std::vector<std::string> r;
  for (const Shape& s : kShapes) r.emplace_back(s.name);
  return r;
}

GgmlType make_model_matrix_type(GgmlType want, int64_t row_len) {
  const int64_t be = ggml_block_elems(want);
  if (be == 0) throw Error("make-model: unknown weight type " + ggml_type_name(want));
  if (row_len % be == 0) return want;
  // 256-element types need rows of whole super-blocks (n_embd 576, 64 and 32 are
  // not); we fall back to a 32-block type, then to F16.
  if (row_len % 32 == 0) return GgmlType::Q8_0;
  return GgmlType::F16;
}

void make_random_model(const MakeModelOptions& opt, const std::string& out_path) {
  const Shape& s = find_shape(opt.shape);
  const Arch& a = find_arch(opt.arch);
  file_type_of(opt.type, opt.mix);  // validates the type
  if (opt.context_length <= 0 || opt.context_length > UINT32_MAX)
    throw Error("make-model: context_length out of range");

  GgufWriter w;
  set_hparams(w, opt, s, a);
  int64_t n_vocab = copy_tokenizer(opt, w);
  if (s.n_vocab > n_vocab && opt.n_vocab_limit == 0) n_vocab = pad_tokenizer(w, s.n_vocab);

  Rng rng(opt.seed);
  const bool tied = opt.tied_output || a.tied;
  add_matrix(w, rng, opt, s, tied, Role::kTokenEmbd, 0, "token_embd.weight", s.n_embd, n_vocab);
  add_f32(w, rng, "output_norm.weight", s.n_embd, 1.0f, 0.02f);
  if (!tied && !a.hybrid) add_matrix(w, rng, opt, s, tied, Role::kOutput, 0, "output.weight", s.n_embd, n_vocab);
  const int64_t steps = s.n_layer + 2;
  auto progress = [&](int64_t done) {
    if (opt.on_progress) opt.on_progress(done, steps);
  };
  progress(1);
  for (int64_t i = 0; i < s.n_layer; ++i) {
    add_block(w, rng, opt, s, a, i);
    progress(2 + i);
  }
  w.write(out_path);
  progress(steps);
}

}  // namespace pc
