// Models whose matrices mix weight types per tensor, as llama.cpp's Q4_K_M,
// Q5_K_M, Q6_K and IQ4_XS presets write them (make-model --type <preset>), and
// models of each newer weight type: the files hold the preset's types tensor by
// tensor (including the fallbacks for rows that are not whole super-blocks),
// load, generate, and give bitwise the same logits with a cached prefix as
// without. A tensor of a type still unsupported is an error naming it.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>

#include "engine/engine.h"
#include "common/error.h"
#include "gguf/gguf.h"
#include "model/make_model.h"
#include "model/model.h"
#include "model_test_util.h"
#include "test_util.h"
#include "probe/engine_logits.h"

namespace pc {
namespace {

std::string mixed_model(const std::string& shape, const std::string& arch, TypeMix mix, GgmlType type) {
  static std::map<std::string, std::string> cache;
  static const std::string dir = test::temp_dir();
  const std::string key = shape + "-" + arch + "-" + (mix == TypeMix::kNone ? ggml_type_name(type) : type_mix_name(mix));
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  MakeModelOptions o;
  o.shape = shape;
  o.arch = arch;
  o.mix = mix;
  o.type = type;
  o.vocab_path = test::shared_dir() + "/vocab/ggml-vocab-llama-spm.gguf";
  o.n_vocab_limit = 2000;
  o.seed = 11;
  const std::string path = dir + "/" + key + ".gguf";
  make_random_model(o, path);
  return cache[key] = path;
}

std::map<std::string, GgmlType> tensor_types(const std::string& path) {
  std::map<std::string, GgmlType> r;
  const auto f = GgufFile::open(path);
  for (const GgufTensorInfo& t : f->tensors()) r[t.name] = t.type;
  return r;
}

using T = GgmlType;

// "small" (n_embd 256, ff 512, 2 layers, 4 heads / 2 KV heads): every row is whole
// super-blocks. use_more_bits(layer, 2) holds for layer 1 only.
TEST(MixedTypes, PresetTensorTypesSmallShape) {
  struct Want { TypeMix mix; T base, v0, v1, down0, down1, output; uint32_t file_type; };
  const Want wants[] = {
      {TypeMix::kQ4_K_M, T::Q4_K, T::Q4_K, T::Q6_K, T::Q4_K, T::Q6_K, T::Q6_K, 15},
      {TypeMix::kQ5_K_M, T::Q5_K, T::Q5_K, T::Q6_K, T::Q5_K, T::Q6_K, T::Q6_K, 17},
      {TypeMix::kQ6_K, T::Q6_K, T::Q6_K, T::Q6_K, T::Q6_K, T::Q6_K, T::Q6_K, 18},
      // 2 query heads per KV head: attn_v stays IQ4_XS; 2 / 8 = 0 layers of Q5_K ffn_down.
      {TypeMix::kIQ4_XS, T::IQ4_XS, T::IQ4_XS, T::IQ4_XS, T::IQ4_XS, T::IQ4_XS, T::Q6_K, 30},
  };
  for (const Want& w : wants) {
    const std::string path = mixed_model("small", "llama", w.mix, T::Q8_0);
    const auto types = tensor_types(path);
    const std::string m = type_mix_name(w.mix);
    EXPECT_EQ(types.at("token_embd.weight"), w.base) << m;
    EXPECT_EQ(types.at("output.weight"), w.output) << m;
    EXPECT_EQ(types.at("output_norm.weight"), T::F32) << m;
    EXPECT_EQ(types.at("blk.0.attn_v.weight"), w.v0) << m;
    EXPECT_EQ(types.at("blk.1.attn_v.weight"), w.v1) << m;
    EXPECT_EQ(types.at("blk.0.ffn_down.weight"), w.down0) << m;
    EXPECT_EQ(types.at("blk.1.ffn_down.weight"), w.down1) << m;
    for (const char* name : {"attn_q", "attn_k", "attn_output", "ffn_gate", "ffn_up"})
      for (int l = 0; l < 2; ++l)
        EXPECT_EQ(types.at("blk." + std::to_string(l) + "." + name + ".weight"), w.base) << m << " " << name;
    EXPECT_EQ(GgufFile::open(path)->get_int("general.file_type", -1), w.file_type) << m;
  }
}

// "tiny" (n_embd 64, ff 128): no row is a whole super-block, so every K-quant
// and IQ4_XS matrix takes llama.cpp's 32-element fallback.
TEST(MixedTypes, PresetFallbacksTinyShape) {
  struct Want { TypeMix mix; T base, v1, output; };
  const Want wants[] = {
      {TypeMix::kQ4_K_M, T::Q5_0, T::Q8_0, T::Q8_0},
      {TypeMix::kQ5_K_M, T::Q5_1, T::Q8_0, T::Q8_0},
      {TypeMix::kIQ4_XS, T::IQ4_NL, T::IQ4_NL, T::Q8_0},
  };
  for (const Want& w : wants) {
    const auto types = tensor_types(mixed_model("tiny", "llama", w.mix, T::Q8_0));
    const std::string m = type_mix_name(w.mix);
    EXPECT_EQ(types.at("blk.0.attn_q.weight"), w.base) << m;
    EXPECT_EQ(types.at("blk.0.attn_v.weight"), w.base) << m;
    EXPECT_EQ(types.at("blk.1.attn_v.weight"), w.v1) << m;
    EXPECT_EQ(types.at("output.weight"), w.output) << m;
  }
}

// A fused-QKV model (phi3) treats attn_qkv as attn_v; a tied one (gemma2)
// gives token_embd output's Q6_K.
TEST(MixedTypes, PresetFusedAndTied) {
  const auto phi = tensor_types(mixed_model("small", "phi3", TypeMix::kQ4_K_M, T::Q8_0));
  EXPECT_EQ(phi.at("blk.0.attn_qkv.weight"), T::Q4_K);
  EXPECT_EQ(phi.at("blk.1.attn_qkv.weight"), T::Q6_K);
  const auto gemma = tensor_types(mixed_model("small", "gemma2", TypeMix::kQ5_K_M, T::Q8_0));
  EXPECT_EQ(gemma.at("token_embd.weight"), T::Q6_K);
  EXPECT_EQ(gemma.count("output.weight"), 0u);
}

std::vector<int32_t> random_tokens(std::mt19937& rng, int64_t n_vocab, int n) {
  std::uniform_int_distribution<int32_t> d(3, int32_t(n_vocab) - 1);
  std::vector<int32_t> v(n);
  for (int32_t& t : v) t = d(rng);
  return v;
}

// Prompts sharing prefixes of random lengths: every position computed with a
// cached prefix is bitwise the uncached logits. Then a greedy generation, and
// the same request again (its prompt now cached) gives the same tokens.
void check_model(const std::string& path) {
  SCOPED_TRACE(path);
  auto model = Model::load(path);
  const int64_t V = model->config().n_vocab;
  EngineOptions eo;
  eo.threads = 2;
  eo.kv_memory_bytes = 32 << 20;
  Engine cached(*model, eo);
  eo.prefix_cache = false;
  Engine plain(*model, eo);
  std::mt19937 rng(5);
  std::vector<int32_t> base{1};
  const auto more = random_tokens(rng, V, 40);
  base.insert(base.end(), more.begin(), more.end());
  prompt_logits(cached, base, 64, true);
  int64_t total_cached = 0;
  for (int r = 0; r < 4; ++r) {
    const int shared = 1 + int(rng() % base.size());
    std::vector<int32_t> p(base.begin(), base.begin() + shared);
    const auto tail = random_tokens(rng, V, 1 + int(rng() % 20));
    p.insert(p.end(), tail.begin(), tail.end());
    int64_t n_cached = 0;
    const std::vector<float> got = prompt_logits(cached, p, 1 + int(rng() % 16), true, &n_cached);
    const std::vector<float> ref = prompt_logits(plain, p, int(p.size()));
    // At least the shared prefix (an earlier round's prompt may share more).
    EXPECT_GE(n_cached, std::min<int64_t>(shared, int64_t(p.size()) - 1)) << "round " << r;
    for (size_t i = n_cached; i < p.size(); ++i)
      ASSERT_EQ(0, std::memcmp(&got[(i - n_cached) * V], &ref[i * V], V * sizeof(float)))
          << "round " << r << " position " << i << " cached " << n_cached;
    total_cached += n_cached;
  }
  EXPECT_GT(total_cached, 0);
  GenerateRequest req;
  req.prompt = base;
  req.max_tokens = 8;
  req.stop_at_eog = false;
  const GenerateResult first = cached.generate(req);
  const GenerateResult again = cached.generate(req);
  EXPECT_EQ(first.tokens.size(), 8u);
  EXPECT_EQ(again.tokens, first.tokens);
  EXPECT_GT(again.n_cached, 0);
}

TEST(MixedTypes, PresetModelsLoadGenerateAndHitExactly) {
  for (TypeMix mix : {TypeMix::kQ4_K_M, TypeMix::kQ5_K_M, TypeMix::kIQ4_XS}) {
    check_model(mixed_model("small", "llama", mix, T::Q8_0));
    check_model(mixed_model("tiny", "llama", mix, T::Q8_0));  // the 32-element fallbacks
  }
}

TEST(MixedTypes, UniformNewTypesLoadGenerateAndHitExactly) {
  for (T t : {T::Q4_1, T::Q5_0, T::Q5_1, T::IQ4_NL, T::MXFP4}) check_model(mixed_model("tiny", "qwen2", TypeMix::kNone, t));
  for (T t : {T::Q5_K, T::IQ4_XS}) check_model(mixed_model("small", "qwen2", TypeMix::kNone, t));
}

// A matrix of a type the engine does not compute with: the load error names
// the tensor and the type.
TEST(MixedTypes, UnsupportedTensorTypeNamesTensorAndType) {
  const auto src = GgufFile::open(mixed_model("small", "llama", TypeMix::kNone, T::Q4_K));
  GgufWriter w;
  for (const auto& [k, v] : src->metadata()) w.set(k, v);
  for (const GgufTensorInfo& t : src->tensors()) {
    if (t.name == "blk.1.ffn_up.weight") {  // as Q3_K: 110 bytes per 256 elements
      std::vector<uint8_t> bytes(size_t(ggml_row_bytes(T::Q3_K, t.ne[0]) * t.ne[1]));
      w.add_tensor(t.name, T::Q3_K, t.ne, std::move(bytes));
    } else {
      w.add_tensor(t.name, t.type, t.ne, std::vector<uint8_t>(t.data, t.data + t.nbytes));
    }
  }
  const std::string path = test::temp_dir() + "/q3k-tensor.gguf";
  w.write(path);
  try {
    Model::load(path);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("blk.1.ffn_up.weight"), std::string::npos) << what;
    EXPECT_NE(what.find("Q3_K"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace pc
