// Token sampling from logits: greedy, temperature, top-k, top-p, min-p,
// repetition penalty; seeded and reproducible.
#pragma once
#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace pc {

struct SamplingParams {
  float temperature = 0.f;     // <= 0: greedy (argmax, lowest id on ties)
  int32_t top_k = 0;           // 0 = off
  float top_p = 1.f;           // 1 = off
  float min_p = 0.f;           // 0 = off; keep tokens with p >= min_p * p_max
  float repeat_penalty = 1.f;  // 1 = off; divides positive / multiplies negative logits
  int32_t repeat_last_n = 64;  // how many recent tokens the penalty looks at
  uint64_t seed = 0xC0FFEE;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& p);
  // `recent` = the sequence's tokens so far (for the repetition penalty).
  // `allowed`: when given, only tokens whose bit is set (bit id % 64 of word id / 64,
  // grammar/matcher.h) are candidates — constrained decoding masks before the
  // penalty, greedy choice and truncation, at every temperature. It must allow one.
  // Draws one token from distribution(logits, recent), advancing the seeded generator.
  // Truncation selects only what top-k/top-p need (no sort of the vocabulary), so a
  // step costs O(n_vocab) at any temperature.
  int32_t sample(std::span<const float> logits, std::span<const int32_t> recent,
                 const std::vector<uint64_t>* allowed = nullptr);
  // The distribution sample() draws from: the tokens kept by top-k, top-p and min-p
  // and their probabilities (summing to 1), by id; the argmax alone when greedy.
  std::vector<std::pair<int32_t, float>> distribution(std::span<const float> logits,
                                                      std::span<const int32_t> recent,
                                                      const std::vector<uint64_t>* allowed = nullptr);
  const SamplingParams& params() const { return p_; }

 private:
  struct Cand { int32_t id; float logit; float p; };
  // cands_ (the allowed tokens), penalized
  void fill(std::span<const float> logits, std::span<const int32_t> recent, const std::vector<uint64_t>* allowed);
  void apply_penalty(std::span<const int32_t> recent);
  void truncate();  // top-k, weights, top-p, min-p over cands_ (sampler.cc)
  int32_t greedy() const;  // the best of cands_ by logit, lowest id on ties

  SamplingParams p_;
  std::mt19937_64 rng_;
  std::vector<Cand> cands_;
};

// Index of the largest value (lowest index on ties).
int32_t argmax(std::span<const float> v);

// Log-probabilities at one generated position (the API's logprobs). They are
// the log-softmax of the model's raw logits — before temperature, repetition
// penalty and top-k/p truncation, as OpenAI and vLLM report them by default —
// so they describe the model, not the sampling settings, and a greedy token's
// logprob is the largest of the step.
struct TokenLogprobs {
  float logprob = 0.f;                         // of the sampled token
  std::vector<std::pair<int32_t, float>> top;  // the N most likely (id, logprob):
                                               // descending, lower id first on ties
};

// `token`'s log-probability under softmax(logits), and the `top_n` most likely
// tokens. O(n_vocab + n_vocab·log top_n); computed in double for the sum.
TokenLogprobs token_logprobs(std::span<const float> logits, int32_t token, int32_t top_n);

}  // namespace pc
