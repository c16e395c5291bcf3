#include "model_test_util.h"

#include <map>

#include "model/make_model.h"
#include "test_util.h"

namespace pc::test {

std::string shared_model(const std::string& name) { return shared_dir() + "/models/" + name; }

std::string generated_model(const std::string& arch, GgmlType type) {
  static std::map<std::string, std::string> cache;
  static const std::string dir = temp_dir();
  const std::string key = arch + "-" + ggml_type_name(type);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  MakeModelOptions o;
  // K-quant rows need multiples of 256 elements, which the "tiny" shape lacks.
  o.shape = ggml_block_elems(type) == 256 ? "small" : "tiny";
  o.arch = arch;
  o.type = type;
  o.vocab_path = shared_dir() + "/vocab/ggml-vocab-llama-spm.gguf";
  o.seed = 7;
  const std::string path = dir + "/" + key + ".gguf";
  make_random_model(o, path);
  cache[key] = path;
  return path;
}

std::unique_ptr<Engine> block_engine(const Model& model, const TierOptions& tiers) {
  EngineOptions o;
  o.kv_memory_bytes = 32 << 20;
  o.threads = 1;
  o.tiers = tiers;
  return std::make_unique<Engine>(model, o);
}

GenerateRequest block_request(int32_t bos, const std::vector<std::vector<int32_t>>& parts, CacheReuse mode,
                              double budget) {
  GenerateRequest r;
  r.prompt = {bos};
  for (const auto& p : parts) {
    r.blocks.push_back({int32_t(r.prompt.size()), int32_t(r.prompt.size() + p.size())});
    r.prompt.insert(r.prompt.end(), p.begin(), p.end());
  }
  r.reuse.mode = mode;
  r.reuse.budget = budget;
  return r;
}

}  // namespace pc::test
