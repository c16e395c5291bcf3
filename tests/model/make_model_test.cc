// Random-weight model generator: tensors, types, shapes and metadata read back;
// determinism for a seed.
#include "model/make_model.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <iterator>

#include "engine/engine.h"
#include "gguf/gguf.h"
#include "gguf/quants.h"
#include "model/model.h"
#include "test_util.h"
#include "probe/engine_logits.h"

namespace pc {
namespace {

std::string spm_vocab() { return test::shared_dir() + "/vocab/ggml-vocab-llama-spm.gguf"; }

std::vector<uint8_t> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), {});
}

std::string generate(MakeModelOptions o, const std::string& name = "m.gguf") {
  if (o.vocab_path.empty()) o.vocab_path = spm_vocab();
  const std::string path = test::temp_dir() + "/" + name;
  make_random_model(o, path);
  return path;
}

void expect_tensor(const GgufFile& f, const std::string& name, GgmlType type,
                   std::vector<int64_t> ne) {
  const GgufTensorInfo* t = f.tensor(name);
  ASSERT_NE(t, nullptr) << name;
  EXPECT_EQ(t->type, type) << name;
  EXPECT_EQ(t->ne, ne) << name;
}

// Checks the "tiny" shape (n_embd 64, 2 blocks, 4 heads, 2 KV heads, ff 128).
void check_tiny(const GgufFile& f, const std::string& arch, GgmlType want, int64_t n_vocab) {
  const std::string p = arch + ".";
  EXPECT_EQ(f.get_string("general.architecture"), arch);
  EXPECT_EQ(f.get_string("general.name"), "random tiny " + arch + " " + ggml_type_name(want));
  EXPECT_EQ(f.get_int(p + "context_length", 0), 8192);
  EXPECT_EQ(f.get_int(p + "embedding_length", 0), 64);
  EXPECT_EQ(f.get_int(p + "block_count", 0), 2);
  EXPECT_EQ(f.get_int(p + "feed_forward_length", 0), 128);
  EXPECT_EQ(f.get_int(p + "attention.head_count", 0), 4);
  EXPECT_EQ(f.get_int(p + "attention.head_count_kv", 0), 2);
  EXPECT_EQ(f.get_int(p + "rope.dimension_count", 0), 16);
  const bool qwen = arch != "llama";
  EXPECT_FLOAT_EQ(f.get_float(p + "attention.layer_norm_rms_epsilon", 0), qwen ? 1e-6f : 1e-5f);
  EXPECT_FLOAT_EQ(f.get_float(p + "rope.freq_base", 0), qwen ? 1e6f : 1e4f);
  EXPECT_EQ(f.find(p + "attention.key_length") != nullptr, arch == "qwen3");
  if (arch == "qwen3") {
    EXPECT_EQ(f.get_int(p + "attention.value_length", 0), 16);
  }

  // Rows of 64 and 128 elements are not whole 256-blocks: K-quants fall back to Q8_0.
  const GgmlType m = make_model_matrix_type(want, 64);
  EXPECT_EQ(m, (want == GgmlType::Q4_K || want == GgmlType::Q6_K) ? GgmlType::Q8_0 : want);
  expect_tensor(f, "token_embd.weight", m, {64, n_vocab});
  expect_tensor(f, "output.weight", m, {64, n_vocab});
  expect_tensor(f, "output_norm.weight", GgmlType::F32, {64});
  for (int i = 0; i < 2; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    expect_tensor(f, b + "attn_norm.weight", GgmlType::F32, {64});
    expect_tensor(f, b + "attn_q.weight", m, {64, 64});
    expect_tensor(f, b + "attn_k.weight", m, {64, 32});
    expect_tensor(f, b + "attn_v.weight", m, {64, 32});
    expect_tensor(f, b + "attn_output.weight", m, {64, 64});
    expect_tensor(f, b + "ffn_norm.weight", GgmlType::F32, {64});
    expect_tensor(f, b + "ffn_gate.weight", m, {64, 128});
    expect_tensor(f, b + "ffn_up.weight", m, {64, 128});
    expect_tensor(f, b + "ffn_down.weight", make_model_matrix_type(want, 128), {128, 64});
    EXPECT_EQ(f.tensor(b + "attn_q.bias") != nullptr, arch == "qwen2");
    if (arch == "qwen2") {
      expect_tensor(f, b + "attn_q.bias", GgmlType::F32, {64});
      expect_tensor(f, b + "attn_k.bias", GgmlType::F32, {32});
      expect_tensor(f, b + "attn_v.bias", GgmlType::F32, {32});
    }
    EXPECT_EQ(f.tensor(b + "attn_q_norm.weight") != nullptr, arch == "qwen3");
    if (arch == "qwen3") {
      expect_tensor(f, b + "attn_q_norm.weight", GgmlType::F32, {16});
      expect_tensor(f, b + "attn_k_norm.weight", GgmlType::F32, {16});
    }
  }
  const size_t per_block = 9 + (arch == "qwen2" ? 3 : 0) + (arch == "qwen3" ? 2 : 0);
  EXPECT_EQ(f.tensors().size(), 3 + 2 * per_block);
}

TEST(MakeModel, TinyEveryArchAndType) {
  auto vocab = GgufFile::open(spm_vocab());
  const auto tokens = vocab->get_string_array("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), 32000u);
  for (const char* arch : {"llama", "qwen2", "qwen3"})
    for (GgmlType t : {GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q6_K}) {
      SCOPED_TRACE(std::string(arch) + " " + ggml_type_name(t));
      MakeModelOptions o;
      o.shape = "tiny";
      o.arch = arch;
      o.type = t;
      auto f = GgufFile::open(generate(o));
      check_tiny(*f, arch, t, 32000);
      // Every tokenizer key is copied unchanged.
      for (const auto& [k, v] : vocab->metadata()) {
        if (!k.starts_with("tokenizer.")) continue;
        const GgufValue* c = f->find(k);
        ASSERT_NE(c, nullptr) << k;
        EXPECT_EQ(c->to_string(1u << 30), v.to_string(1u << 30)) << k;
      }
    }
}

// The newer architectures: the files load (every tensor the layer description
// asks for, in the right shape), describe what the architecture is, and run.
TEST(MakeModel, GemmaAndPhi3Load) {
  for (const char* arch : {"gemma2", "gemma3", "phi3"})
    for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_K}) {
      SCOPED_TRACE(std::string(arch) + " " + ggml_type_name(t));
      MakeModelOptions o;
      o.shape = t == GgmlType::Q4_K ? "small" : "tiny";
      o.arch = arch;
      o.type = t;
      const std::string path = generate(o);
      auto f = GgufFile::open(path);
      EXPECT_EQ(f->tensor("output.weight") != nullptr, std::string(arch) == "phi3");
      EXPECT_EQ(f->tensor("blk.0.attn_qkv.weight") != nullptr, std::string(arch) == "phi3");
      EXPECT_EQ(f->tensor("blk.1.post_ffw_norm.weight") != nullptr, std::string(arch) != "phi3");
      auto m = Model::load(path);
      const ModelConfig& c = m->config();
      EXPECT_EQ(c.arch_name, arch);
      EXPECT_EQ(c.layers[0].window, std::string(arch) == "phi3" ? 0 : 32);
      EXPECT_EQ(c.layers[1].window, std::string(arch) == "gemma3" ? 32 : 0);  // (gemma3: 5 local : 1 global)
      EXPECT_EQ(c.layers[0].activation,
                std::string(arch) == "phi3" ? Activation::kSwiGlu : Activation::kGeGluTanh);
      EXPECT_EQ(c.final_softcap, std::string(arch) == "gemma2" ? 30.f : 0.f);
      EngineOptions eo;
      eo.threads = 1;
      eo.kv_memory_bytes = 8 << 20;
      Engine e(*m, eo);
      for (float v : prompt_logits(e, {1, 450, 4996, 17354, 1701, 29916}, 6)) ASSERT_TRUE(std::isfinite(v));
    }
}

// The 2026 architectures: the files load with the layer description the
// architecture has, and run.
TEST(MakeModel, MoeAndHybridLoad) {
  for (const char* arch : {"qwen3moe", "gpt-oss", "qwen35", "qwen35moe"})
    for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_K}) {
      SCOPED_TRACE(std::string(arch) + " " + ggml_type_name(t));
      const std::string name = arch;
      MakeModelOptions o;
      o.shape = t == GgmlType::Q4_K ? "small" : "tiny";
      o.arch = arch;
      o.type = t;
      const std::string path = generate(o);
      auto m = Model::load(path);
      const ModelConfig& c = m->config();
      EXPECT_EQ(c.arch_name, arch);
      const bool moe = name != "qwen35", hybrid = name.starts_with("qwen35");
      EXPECT_EQ(c.moe.n_expert, moe ? 8 : 0);
      EXPECT_EQ(c.moe.n_ff_shared > 0, name == "qwen35moe");
      // 2 blocks: a DeltaNet layer, then full attention (every min(4, n_layer)).
      EXPECT_EQ(c.n_recurrent, hybrid ? 1 : 0);
      EXPECT_EQ(c.layers[0].mixer, hybrid ? Mixer::kDeltaNet : Mixer::kAttention);
      EXPECT_EQ(c.layers[1].attn_gate, hybrid);
      EXPECT_EQ(c.layers[0].window, name == "gpt-oss" ? 32 : 0);
      EXPECT_EQ(c.layers[0].attn_sinks, name == "gpt-oss");
      EngineOptions eo;
      eo.threads = 1;
      eo.kv_memory_bytes = 8 << 20;
      Engine e(*m, eo);
      for (float v : prompt_logits(e, {1, 450, 4996, 17354, 1701, 29916}, 6)) ASSERT_TRUE(std::isfinite(v));
    }
}

TEST(MakeModel, WeightsHaveSaneScale) {
  MakeModelOptions o;
  o.shape = "tiny";
  o.type = GgmlType::Q8_0;
  auto f = GgufFile::open(generate(o));
  // attn_q: [64, 64], entries ~ N(0, 1/64).
  const GgufTensorInfo* q = f->tensor("blk.0.attn_q.weight");
  std::vector<float> all(64 * 64);
  for (int r = 0; r < 64; ++r)
    dequantize_row(q->type, q->data + r * ggml_row_bytes(q->type, 64), all.data() + 64 * r, 64);
  double s = 0, s2 = 0;
  for (float v : all) {
    s += v;
    s2 += double(v) * v;
  }
  const double mean = s / all.size(), sd = std::sqrt(s2 / all.size() - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(sd, 1.0 / 8, 0.01);
  // Norm weights near 1.
  const GgufTensorInfo* n = f->tensor("blk.1.ffn_norm.weight");
  std::vector<float> nv(64);
  dequantize_row(GgmlType::F32, n->data, nv.data(), 64);
  for (float v : nv) EXPECT_NEAR(v, 1.0f, 0.2f);
}

TEST(MakeModel, DeterministicForASeed) {
  MakeModelOptions o;
  o.shape = "micro";
  o.arch = "qwen2";
  o.type = GgmlType::Q4_0;
  const auto a = file_bytes(generate(o, "a.gguf"));
  const auto b = file_bytes(generate(o, "b.gguf"));
  EXPECT_GT(a.size(), 1000u);
  EXPECT_EQ(a, b);
  o.seed = 2;
  EXPECT_NE(file_bytes(generate(o, "c.gguf")), a);
}

TEST(MakeModel, TiedOutputAndOtherTypes) {
  for (GgmlType t : {GgmlType::F32, GgmlType::BF16}) {
    MakeModelOptions o;
    o.shape = "micro";
    o.type = t;
    o.tied_output = true;
    o.context_length = 1024;
    auto f = GgufFile::open(generate(o));
    EXPECT_EQ(f->tensor("output.weight"), nullptr);
    EXPECT_EQ(f->tensor("token_embd.weight")->type, t);
    EXPECT_EQ(f->tensor("blk.0.ffn_down.weight")->ne, (std::vector<int64_t>{64, 32}));
    EXPECT_EQ(f->get_int("llama.context_length", 0), 1024);
    EXPECT_EQ(f->get_int("llama.attention.head_count_kv", 0), 1);
  }
}

TEST(MakeModel, VocabLimitAndBpeVocab) {
  MakeModelOptions o;
  o.shape = "micro";
  o.vocab_path = test::shared_dir() + "/vocab/ggml-vocab-qwen2.gguf";
  o.n_vocab_limit = 1000;
  auto f = GgufFile::open(generate(o));
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens").size(), 1000u);
  EXPECT_EQ(f->get_int_array("tokenizer.ggml.token_type").size(), 1000u);
  EXPECT_EQ(f->tensor("token_embd.weight")->ne, (std::vector<int64_t>{32, 1000}));
  EXPECT_EQ(f->get_string("tokenizer.ggml.pre"), "qwen2");
  const auto merges = f->get_string_array("tokenizer.ggml.merges");
  EXPECT_GT(merges.size(), 100u);
  EXPECT_LT(merges.size(), 1000u);
}

TEST(MakeModel, Errors) {
  MakeModelOptions o;
  o.shape = "tiny";
  const std::string out = test::temp_dir() + "/x.gguf";
  auto expect_error = [&](MakeModelOptions bad, const char* needle) {
    try {
      make_random_model(bad, out);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  o.vocab_path = spm_vocab();
  MakeModelOptions bad = o;
  bad.shape = "huge";
  expect_error(bad, "unknown shape 'huge'");
  bad = o;
  bad.arch = "gpt2";
  expect_error(bad, "unknown architecture 'gpt2'");
  bad = o;
  bad.type = GgmlType::Q3_K;
  expect_error(bad, "unsupported weight type Q3_K");
  bad = o;
  bad.vocab_path = "/nonexistent/vocab.gguf";
  expect_error(bad, "/nonexistent/vocab.gguf");
  bad = o;
  bad.vocab_path = test::shared_dir() + "/vocab/README.md";
  expect_error(bad, "README.md");
  EXPECT_EQ(make_model_shapes(), (std::vector<std::string>{"smollm-135m", "tinyllama-1.1b", "tiny", "micro", "small",
                                                           "gemma2-2b", "llama3.2-3b", "llama3-8b", "qwen2.5-7b", "qwen3-30b-a3b-4l",
                                                           "gpt-oss-20b-4l", "qwen35-2b"}));
}

TEST(MakeModel, BuiltinVocabulary) {
  MakeModelOptions o;
  o.shape = "micro";
  const std::string out = test::temp_dir() + "/builtin.gguf";
  make_random_model(o, out);
  auto f = GgufFile::open(out);
  EXPECT_EQ(f->get_string("tokenizer.ggml.model"), "llama");
  const auto tokens = f->get_string_array("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), 3u + 256u + 1u + 2u * 94u);
  EXPECT_EQ(tokens[1], "<s>");
  EXPECT_EQ(tokens[3 + 0x41], "<0x41>");
  EXPECT_EQ(f->tensor("token_embd.weight")->ne[1], int64_t(tokens.size()));
}

TEST(MakeModel, Smollm135mIsFast) {
  MakeModelOptions o;
  o.shape = "smollm-135m";
  o.type = GgmlType::Q8_0;
  const auto t0 = std::chrono::steady_clock::now();
  const std::string path = generate(o);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  auto f = GgufFile::open(path);
  EXPECT_EQ(f->get_int("llama.block_count", 0), 30);
  EXPECT_EQ(f->tensors().size(), 3u + 30 * 9);
  expect_tensor(*f, "blk.29.attn_k.weight", GgmlType::Q8_0, {576, 192});
  expect_tensor(*f, "token_embd.weight", GgmlType::Q8_0, {576, 32000});
  EXPECT_LT(s, 60.0);  // a few seconds on an idle machine; generous for shared CI
  std::remove(path.c_str());
}

}  // namespace
}  // namespace pc
