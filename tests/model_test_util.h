// Shared fixtures of the model tests: generated models and paths.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "gguf/types.h"

namespace pc::test {

std::string shared_model(const std::string& name);  // ../shared/models/<name>
// ../shared/models/<dir>/expected_llamacpp.json (arch, arch2), read once per process.
const nlohmann::json& llamacpp_reference(const std::string& dir);
// Natural-log softmax of one row of logits, in double.
std::vector<double> log_softmax(const float* x, size_t n);
// BOS (token 1), then n - 1 token ids drawn uniformly from [3, n_vocab) by a
// generator seeded with `seed`: the same prompt for the same arguments.
std::vector<int32_t> random_prompt(int64_t n_vocab, int n, uint32_t seed);
// Generates (once per process) a "tiny"-shape random model of the given arch
// and weight type, with the Llama 2 SentencePiece vocabulary; returns its path.
std::string generated_model(const std::string& arch, GgmlType type);

// Sentences of a TinyStories-like story, for prompts made of blocks on stories260K: a
// system-like opening, two middle parts, an ending and a next part.
struct Story {
  static constexpr const char* kSys =
      " Once upon a time there was a little girl named Lily who loved to play outside.";
  static constexpr const char* kA =
      " One day she found a big red ball in the park and kicked it very high into the sky.";
  static constexpr const char* kB = " Her friend Tom had a small dog named Max who liked to run and bark at the birds.";
  static constexpr const char* kC = " Then they all went home and had a nice warm dinner together.";
  static constexpr const char* kD =
      " The next morning the sun was bright and the birds sang in the tall green trees.";
};

// An engine for the block tests: 32 MiB of KV, one thread, `tiers` below memory.
std::unique_ptr<Engine> block_engine(const Model& model, const TierOptions& tiers = {});

// BOS, then each part's tokens, each part a block (GenerateRequest::blocks).
GenerateRequest block_request(int32_t bos, const std::vector<std::vector<int32_t>>& parts,
                              CacheReuse mode = CacheReuse::kExact, double budget = 0);

}  // namespace pc::test
