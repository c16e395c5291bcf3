// Runs generation requests on a model: prefill in chunks, then decode.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/sampler.h"

namespace pc {

class Model;
class KvStorage;
class ThreadPool;
class Forward;

struct EngineOptions {
  int threads = 2;
  int64_t kv_memory_bytes = int64_t(1) << 30;  // KV page capacity
  int page_size = 16;
  int prefill_chunk = 512;  // prompt tokens per forward call
};

struct GenerateRequest {
  std::vector<int32_t> prompt;  // token ids (BOS included if wanted)
  int32_t max_tokens = 64;
  SamplingParams sampling;
  bool stop_at_eog = true;      // stop at end-of-generation tokens
};

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated ids
  int64_t n_prompt = 0;
  int64_t n_cached = 0;         // prompt tokens whose KV was reused
  int64_t n_computed = 0;       // prompt tokens computed
  double prompt_ms = 0;         // prefill wall time
  double ttft_ms = 0;           // request start → first token sampled
  double decode_ms = 0;         // time for the remaining tokens
  std::string finish_reason;    // "stop" (end of generation) or "length"
};

class Engine {
 public:
  Engine(const Model& model, const EngineOptions& opt);
  ~Engine();

  // Generates; on_token is called with each new token id as soon as it is
  // sampled and may return false to stop early. Throws pc::Error for bad
  // requests (empty prompt, prompt + max_tokens beyond KV capacity).
  GenerateResult generate(const GenerateRequest& req,
                          const std::function<bool(int32_t)>& on_token = nullptr);

  // Logits for every position of `prompt`, computed in chunks of `chunk`
  // tokens: [prompt.size()][n_vocab]. For tests and tools.
  std::vector<float> prompt_logits(const std::vector<int32_t>& prompt, int chunk);

  const Model& model() const { return model_; }
  ThreadPool& pool() { return *pool_; }

 private:
  struct Seq;
  void grow(Seq& s, int64_t n_slots);
  void release(Seq& s);
  const float* step(Seq& s, const std::vector<int32_t>& tokens, size_t begin, size_t end,
                    bool all_logits);

  const Model& model_;
  EngineOptions opt_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<KvStorage> kv_;
  std::unique_ptr<Forward> fwd_;
  std::vector<int32_t> free_pages_;
};

}  // namespace pc
