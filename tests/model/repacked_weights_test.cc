// Model::WeightLayout: matrices repacked at load for the kernels in use
// (kernels/weight_repack.h) give bitwise the logits of the stored layout,
// however the prompt is chunked (1-token chunks run the decode kernels,
// longer ones the prompt tiles) and however many threads run.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "engine/engine.h"
#include "kernels/cpu.h"
#include "kernels/matmul_internal.h"
#include "kernels/paged_attention_internal.h"
#include "kernels/weight_repack.h"
#include "model/model.h"
#include "model_test_util.h"
#include "probe/engine_logits.h"

namespace pc {
namespace {

using test::random_prompt;

// Logits of every position of `prompt` in chunks of `chunk` on `threads` threads.
std::vector<float> logits(const Model& model, const std::vector<int32_t>& prompt, int chunk, int threads) {
  EngineOptions eo;
  eo.threads = threads;
  eo.kv_memory_bytes = 64 << 20;
  Engine engine(model, eo);
  return prompt_logits(engine, prompt, chunk);
}

TEST(RepackedWeights, LogitsMatchStoredLayoutBitwise) {
  if (detect_cpu_level() < CpuLevel::Avx2) GTEST_SKIP() << "the AVX-512 kernels (or their emulation) need AVX2";
  struct Restore {
    ~Restore() {
      kern::force_kernel_set(nullptr);
      force_attn_tiles(nullptr);
      set_cpu_level(detect_cpu_level());
    }
  } restore;
  // The AVX-512 kernels repack every type with an X16 layout; without AVX-512, their emulation does.
  if (detect_cpu_level() >= CpuLevel::Avx512) {
    set_cpu_level(CpuLevel::Avx512);
  } else {
    kern::force_kernel_set(kern::avx512_emulated_kernel_set());
    force_attn_tiles(avx512_emulated_attn_tiles);
  }
  struct Case {
    const char* arch;
    GgmlType type;
    Residency residency;
  };
  for (const Case& c : {Case{"qwen3", GgmlType::Q4_K, Residency::kMemory}, Case{"qwen3", GgmlType::Q4_K, Residency::kMap},
                        Case{"qwen3moe", GgmlType::Q4_K, Residency::kMemory},
                        Case{"llama", GgmlType::Q5_K, Residency::kMemory},
                        Case{"llama", GgmlType::Q6_K, Residency::kMemory},
                        Case{"llama", GgmlType::Q8_0, Residency::kMemory},
                        Case{"llama", GgmlType::Q4_0, Residency::kMemory},
                        Case{"qwen3", GgmlType::Q5_0, Residency::kMemory},
                        Case{"llama", GgmlType::IQ4_XS, Residency::kMemory},
                        Case{"qwen3", GgmlType::IQ4_NL, Residency::kMemory},
                        Case{"llama", GgmlType::Q4_1, Residency::kMemory},
                        Case{"qwen3", GgmlType::Q5_1, Residency::kMemory},
                        Case{"gpt-oss", GgmlType::MXFP4, Residency::kMemory}}) {
    const std::string path = test::generated_model(c.arch, c.type);
    auto stored = Model::load(path, c.residency, 0, Model::WeightLayout::kAsStored);
    auto packed = Model::load(path, c.residency, 0, Model::WeightLayout::kForKernels);
    // Repacked: the matmul weights of those types; the token embedding (read by rows) as stored.
    const GgmlType r = x16_layout(c.type, /*by_stored=*/true)->x16;
    int repacked = 0;
    for (const LayerWeights& l : packed->layers())
      for (const WeightView* v : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down})
        repacked += v->type == r;
    for (const LayerWeights& l : packed->layers())
      for (const auto* list : {&l.moe.gate, &l.moe.up, &l.moe.down})
        for (const WeightView& v : *list) repacked += v.type == r;
    EXPECT_GT(repacked, 0) << c.arch;
    EXPECT_EQ(packed->token_embd().type, stored->token_embd().type);
    EXPECT_NE(packed->token_embd().type, r);
    EXPECT_EQ(packed->fingerprint(), stored->fingerprint());
    // Model::weight_layouts() names the layout each stored type took.
    const std::string type_name = ggml_type_name(c.type) + ": ";
    EXPECT_NE(packed->weight_layouts().find(type_name + ggml_type_name(r) + " ("), std::string::npos)
        << packed->weight_layouts();
    EXPECT_NE(stored->weight_layouts().find(type_name + "as stored ("), std::string::npos) << stored->weight_layouts();
    const auto prompt = random_prompt(stored->config().n_vocab, 40, 77);
    const std::vector<float> want = logits(*stored, prompt, 40, 1);
    for (int threads : {1, 2})
      for (int chunk : {40, 1, 7}) {
        const std::vector<float> got = logits(*packed, prompt, chunk, threads);
        ASSERT_EQ(got.size(), want.size());
        ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
            << c.arch << " chunk " << chunk << " threads " << threads;
      }
    // The scalar and AVX2 paths read the repacked weights too (unpacking them).
    kern::force_kernel_set(nullptr);
    force_attn_tiles(nullptr);
    set_cpu_level(CpuLevel::Avx2);
    const std::vector<float> want2 = logits(*stored, prompt, 7, 2);
    EXPECT_EQ(std::memcmp(logits(*packed, prompt, 7, 2).data(), want2.data(), want2.size() * sizeof(float)), 0)
        << c.arch << " AVX2 path";
    set_cpu_level(CpuLevel::Scalar);
    const std::vector<float> want0 = logits(*stored, prompt, 40, 1);
    EXPECT_EQ(std::memcmp(logits(*packed, prompt, 40, 1).data(), want0.data(), want0.size() * sizeof(float)), 0)
        << c.arch << " scalar path";
    if (detect_cpu_level() >= CpuLevel::Avx512) {
      set_cpu_level(CpuLevel::Avx512);
    } else {
      kern::force_kernel_set(kern::avx512_emulated_kernel_set());
      force_attn_tiles(avx512_emulated_attn_tiles);
    }
  }
}

}  // namespace
}  // namespace pc
