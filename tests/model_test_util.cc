#include "model_test_util.h"

#include <cmath>
#include <fstream>
#include <map>
#include <mutex>
#include <random>

#include "model/make_model.h"
#include "test_util.h"

namespace pc::test {

std::string shared_model(const std::string& name) { return shared_dir() + "/models/" + name; }

const nlohmann::json& llamacpp_reference(const std::string& dir) {
  static std::mutex mu;
  static std::map<std::string, nlohmann::json> loaded;
  std::lock_guard<std::mutex> lock(mu);
  auto it = loaded.find(dir);
  if (it == loaded.end()) {
    std::ifstream in(shared_model(dir + "/expected_llamacpp.json"));
    it = loaded.emplace(dir, nlohmann::json::parse(in)).first;
  }
  return it->second;
}

std::vector<double> log_softmax(const float* x, size_t n) {
  double mx = -INFINITY;
  for (size_t i = 0; i < n; ++i) mx = std::max(mx, double(x[i]));
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += std::exp(double(x[i]) - mx);
  const double lse = mx + std::log(s);
  std::vector<double> r(n);
  for (size_t i = 0; i < n; ++i) r[i] = double(x[i]) - lse;
  return r;
}

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

std::vector<int32_t> random_prompt(int64_t n_vocab, int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> d(3, int32_t(n_vocab) - 1);
  std::vector<int32_t> p{1};
  while (int(p.size()) < n) p.push_back(d(rng));
  return p;
}

}  // namespace pc::test
