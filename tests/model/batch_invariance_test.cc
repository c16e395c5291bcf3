// A token's logits are bitwise identical however its prompt is chunked and
// however many threads run — the property every cache hit relies on.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "engine/engine.h"
#include "kernels/cpu.h"
#include "kernels/matmul_internal.h"
#include "kernels/paged_attention_internal.h"
#include "model/model.h"
#include "model_test_util.h"
#include "probe/engine_logits.h"

namespace pc {
namespace {

using test::random_prompt;

// Compares all positions' logits for chunkings {whole, 1, 7, 64} (0: whole)
// and threads {1, 2}.
void check_invariance(const std::string& path, int n_tokens, std::vector<int> threads_list = {1, 2},
                      std::vector<int> chunks = {0, 1, 7, 64}, KvType kv_type = KvType::kF16) {
  auto model = Model::load(path);
  const auto prompt = random_prompt(model->config().n_vocab, n_tokens, 123);
  std::vector<float> ref;
  for (int threads : threads_list) {
    EngineOptions eo;
    eo.threads = threads;
    eo.kv_memory_bytes = 64 << 20;
    eo.kv_type = kv_type;
    Engine engine(*model, eo);
    for (int chunk : chunks) {
      if (chunk == 0) chunk = n_tokens;
      std::vector<float> got = prompt_logits(engine, prompt, chunk);
      if (ref.empty()) {
        ref = std::move(got);
        continue;
      }
      ASSERT_EQ(got.size(), ref.size());
      const size_t V = size_t(model->config().n_vocab);
      for (size_t i = 0; i < got.size(); i += V)
        ASSERT_EQ(0, std::memcmp(&got[i], &ref[i], V * sizeof(float)))
            << path << ": logits of position " << i / V << " differ with chunk " << chunk
            << ", threads " << threads << ", KV " << kv_type_name(kv_type);
    }
  }
}

class BatchInvariance : public ::testing::TestWithParam<CpuLevel> {
 protected:
  void SetUp() override {
    if (GetParam() > detect_cpu_level()) GTEST_SKIP() << "CPU cannot run this level";
    set_cpu_level(GetParam());
  }
  void TearDown() override { set_cpu_level(detect_cpu_level()); }
};

TEST_P(BatchInvariance, Stories260K) { check_invariance(test::shared_model("stories260K.gguf"), 100); }
TEST_P(BatchInvariance, TinyStories656K) {
  check_invariance(test::shared_model("TinyStories-656K-Q8_0.gguf"), 100);
}
TEST_P(BatchInvariance, LlamaTinyRandom) {
  check_invariance(test::shared_model("llama-2-tiny-random.gguf"), 80);
}
TEST_P(BatchInvariance, GeneratedLlama) { check_invariance(test::generated_model("llama", GgmlType::Q8_0), 90); }
TEST_P(BatchInvariance, GeneratedQwen2) { check_invariance(test::generated_model("qwen2", GgmlType::Q4_0), 90); }
TEST_P(BatchInvariance, GeneratedQwen3) { check_invariance(test::generated_model("qwen3", GgmlType::Q4_K), 90); }
// Sliding-window layers (window 32, prompts of 90), soft-caps, GeGLU, fused
// projections, per-layer RoPE.
TEST_P(BatchInvariance, GeneratedGemma2) { check_invariance(test::generated_model("gemma2", GgmlType::Q8_0), 90); }
TEST_P(BatchInvariance, GeneratedGemma3) { check_invariance(test::generated_model("gemma3", GgmlType::Q4_0), 90); }
TEST_P(BatchInvariance, GeneratedPhi3) { check_invariance(test::generated_model("phi3", GgmlType::Q4_0), 90); }
// Experts, sinks, YaRN and windows; Gated DeltaNet layers (their recurrence runs
// token by token whatever the chunking).
TEST_P(BatchInvariance, GeneratedQwen3Moe) { check_invariance(test::generated_model("qwen3moe", GgmlType::Q8_0), 90); }
TEST_P(BatchInvariance, GeneratedGptOss) { check_invariance(test::generated_model("gpt-oss", GgmlType::Q4_0), 90); }
TEST_P(BatchInvariance, GeneratedQwen35) { check_invariance(test::generated_model("qwen35", GgmlType::Q8_0), 90); }
TEST_P(BatchInvariance, GeneratedQwen35Moe) { check_invariance(test::generated_model("qwen35moe", GgmlType::Q4_0), 90); }
TEST_P(BatchInvariance, GeneratedF16) { check_invariance(test::generated_model("llama", GgmlType::F16), 90); }
TEST_P(BatchInvariance, GeneratedQ6K) { check_invariance(test::generated_model("qwen3", GgmlType::Q6_K), 90); }
TEST_P(BatchInvariance, GeneratedQ5K) { check_invariance(test::generated_model("llama", GgmlType::Q5_K), 90); }

// Quantized KV (kernels/kv_quant.h): each row quantized from its own values, so the
// stored bytes, and the logits, do not depend on chunking or threads; heads of 8
// and 16 (one block a row) and 64 (GGUF's 32-value blocks), long contexts split by
// segment, sliding windows and a hybrid model (recurrent layers beside quantized KV).
TEST_P(BatchInvariance, QuantizedKv) {
  // (The scalar level: the short prompts only; its attention is the kernel tests'.)
  const bool scalar = GetParam() == CpuLevel::Scalar;
  for (KvType t : {KvType::kQ8_0, KvType::kQ4_0}) {
    check_invariance(test::shared_model("stories260K.gguf"), 100, {1, 2}, {0, 1, 7, 64}, t);
    check_invariance(test::generated_model("qwen35", GgmlType::Q8_0), 90, {1, 2}, {0, 1, 7}, t);
    if (scalar) continue;
    check_invariance(test::generated_model("qwen3", GgmlType::Q4_K), 90, {1, 2}, {0, 1, 7, 64}, t);
    check_invariance(test::generated_model("llama", GgmlType::F16), 600, {1, 2}, {0, 1, 20}, t);
    check_invariance(test::generated_model("gemma2", GgmlType::F16), 200, {1, 2}, {0, 1}, t);
  }
}

// Contexts of several softmax segments (kAttnSegmentSlots): stepping 1 or 20
// tokens at a time, the attention is split by segment (Forward::plan_split:
// on 2 threads tasks per KV head and segment up to 768 slots, per segment for
// all KV heads past that; on 1 thread, one token at a time, per segment for
// all KV heads past 256) and merged; every position's logits stay bitwise
// those of the whole prompt on one thread.
TEST_P(BatchInvariance, LongContextSplitAttention) {
  // (F16 weights: activations stay F32, so a changed bit of attention shows.)
  check_invariance(test::generated_model("llama", GgmlType::F16), 800, {1, 2}, {0, 1, 20});
}

// The same with sliding-window layers: decode steps split by segment skip the
// segments outside the window, and stay bitwise the whole prompt's.
TEST_P(BatchInvariance, LongContextSplitAttentionWindowed) {
  check_invariance(test::generated_model("gemma2", GgmlType::F16), 300, {1, 2}, {0, 1});
}

// The AVX-512 kernels (matmul prompt tiles, the K-quants' decode kernels,
// attention tiles) keep the property — chunks of 1 token run the decode
// kernels, longer ones the prompt tiles — and give bitwise the AVX2 path's
// logits (the same per-element operations in the same order). Where the CPU
// lacks AVX-512 the same kernel code runs on its AVX2 emulation.
TEST(BatchInvarianceAvx512, MatchesAvx2Bitwise) {
  if (detect_cpu_level() < CpuLevel::Avx2) GTEST_SKIP() << "the emulated AVX-512 kernels need AVX2";
  const bool real = detect_cpu_level() >= CpuLevel::Avx512;
  struct Restore {
    ~Restore() {
      kern::force_kernel_set(nullptr);
      force_attn_tiles(nullptr);
      set_cpu_level(detect_cpu_level());
    }
  } restore;
  set_cpu_level(CpuLevel::Avx2);
  auto use = [real](bool avx512) {
    kern::force_kernel_set(!avx512 ? nullptr : real ? kern::avx512_kernel_set() : kern::avx512_emulated_kernel_set());
    force_attn_tiles(!avx512 ? nullptr : real ? avx512_attn_tiles : avx512_emulated_attn_tiles);
  };
  const std::pair<const char*, GgmlType> models[] = {
      {"llama", GgmlType::Q8_0}, {"llama", GgmlType::Q4_0}, {"llama", GgmlType::F16}, {"qwen3", GgmlType::Q4_K},
      {"qwen3", GgmlType::Q6_K}, {"llama", GgmlType::Q5_K}, {"gemma2", GgmlType::F16}, {"gemma3", GgmlType::Q8_0}};
  for (const auto& [arch, t] : models) {
    const std::string path = test::generated_model(arch, t);
    auto model = Model::load(path);
    const auto prompt = random_prompt(model->config().n_vocab, 300, 321);
    EngineOptions eo;
    eo.threads = 2;
    eo.kv_memory_bytes = 64 << 20;
    Engine engine(*model, eo);
    use(false);
    const std::vector<float> want = prompt_logits(engine, prompt, 300);
    use(true);
    const std::vector<float> got = prompt_logits(engine, prompt, 300);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float))) << path;
    check_invariance(path, 70);  // still AVX-512: chunks and threads
  }
}

// Scalar always runs; AVX2 only where the CPU has it (skip is explicit, and CI
// machines are x86-64 with AVX2).
INSTANTIATE_TEST_SUITE_P(Levels, BatchInvariance,
                         ::testing::Values(CpuLevel::Scalar, CpuLevel::Avx2),
                         [](const auto& info) { return cpu_level_name(info.param); });

}  // namespace
}  // namespace pc
