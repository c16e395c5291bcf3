// `promptcache bench kv-quality`: how far quantized KV (--kv-type q8_0, q4_0) is from
// F16 KV, on prompts of text the model itself generated.
//
// Each prompt is BOS and one to four stories the model sampled (one seed each, so the
// text is in its training distribution and the run deterministic), cut to a random
// length. Per prompt and KV type, against the same prompt with F16 KV (no cache on
// either side):
//   - every prompt position's next-token distribution: top-1 agreement, KL(F16 || type)
//     (mean over positions, and the largest);
//   - the last position's (the distribution a request samples from): top-1, KL;
//   - whether the greedy continuation of `--continuation` tokens is identical.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>

#include "cli/commands.h"
#include "cli/kv_type_flag.h"
#include "cli/progress.h"
#include "engine/engine.h"
#include "probe/engine_logits.h"
#include "kv/kv_page_store.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace pc::cli {

namespace {

struct KvQualityArgs {
  std::vector<std::string> models;
  std::vector<KvType> kv_types{KvType::kQ8_0, KvType::kQ4_0};
  int prompts = 200;
  int continuation = 16;
  int pool = 64;       // sampled stories the prompts draw from
  int max_tokens = 400;  // longest prompt
  int threads = 1;
  uint32_t seed = 1;
  std::string json_out;
};

// log softmax of a row, in double.
std::vector<double> log_softmax(const float* l, int64_t n) {
  double m = l[0];
  for (int64_t i = 1; i < n; ++i) m = std::max(m, double(l[i]));
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += std::exp(double(l[i]) - m);
  const double lz = m + std::log(s);
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[size_t(i)] = double(l[i]) - lz;
  return out;
}

// KL(p || q) of two rows of logits.
double kl(const float* p, const float* q, int64_t n) {
  const auto lp = log_softmax(p, n), lq = log_softmax(q, n);
  double d = 0;
  for (size_t i = 0; i < lp.size(); ++i) d += std::exp(lp[i]) * (lp[i] - lq[i]);
  return std::max(0.0, d);
}

int64_t argmax(const float* v, int64_t n) { return std::max_element(v, v + n) - v; }

struct Tally {  // one model and KV type
  int64_t positions = 0, top1 = 0, prompts = 0, last_top1 = 0, same_text = 0;
  double kl_sum = 0, kl_max = 0, last_kl_sum = 0, last_kl_max = 0;
};

EngineOptions engine_options(const KvQualityArgs& a, KvType t) {
  EngineOptions eo;
  eo.threads = a.threads;
  eo.kv_memory_bytes = 64 << 20;
  eo.prefix_cache = false;  // every run computes every token
  eo.kv_type = t;
  return eo;
}

int run_kv_quality(const KvQualityArgs& a) {
  nlohmann::json out_models = nlohmann::json::array();
  const auto t_all = std::chrono::steady_clock::now();
  for (const std::string& path : a.models) {
    auto model = Model::load(path);
    const Tokenizer& tok = model->tokenizer();
    const ModelConfig& c = model->config();
    const int64_t V = c.n_vocab;
    std::printf("model: %s (%lld layers, %lld KV heads of %lld, trained context %lld)\n", path.c_str(),
                (long long)c.n_layer, (long long)c.n_kv_head, (long long)c.head_dim, (long long)c.n_ctx_train);
    Engine f16(*model, engine_options(a, KvType::kF16));
    std::vector<std::unique_ptr<Engine>> quant;
    for (KvType t : a.kv_types) quant.push_back(std::make_unique<Engine>(*model, engine_options(a, t)));
    // The stories, sampled with F16 KV.
    std::vector<std::vector<int32_t>> pool;
    for (int i = 0; i < a.pool; ++i) {
      GenerateRequest r;
      r.prompt = {tok.bos()};
      r.max_tokens = 128;
      r.stop_at_eog = false;
      r.sampling.temperature = 1.0f;
      r.sampling.seed = a.seed * 1000003u + uint32_t(i);
      std::vector<int32_t> b;
      for (int32_t t : f16.generate(r).tokens)
        if (!tok.is_eog(t) && t != tok.bos()) b.push_back(t);
      pool.push_back(std::move(b));
    }
    std::mt19937 rng(a.seed);
    const int max_prompt = int(std::min<int64_t>(a.max_tokens, c.n_ctx_train > 0 ? c.n_ctx_train - a.continuation : a.max_tokens));
    std::vector<Tally> tally(a.kv_types.size());
    Progress progress(path, a.prompts);
    int64_t tokens = 0;
    for (int i = 0; i < a.prompts; ++i) {
      std::vector<int32_t> prompt{tok.bos()};
      const int parts = 1 + int(rng() % 4);
      for (int k = 0; k < parts; ++k) {
        const auto& s = pool[rng() % pool.size()];
        prompt.insert(prompt.end(), s.begin(), s.end());
      }
      const int len = std::min<int>(int(prompt.size()), 16 + int(rng() % uint32_t(std::max(1, max_prompt - 16))));
      prompt.resize(size_t(std::max(2, len)));
      tokens += int64_t(prompt.size());
      GenerateRequest req;
      req.prompt = prompt;
      req.max_tokens = a.continuation;
      req.stop_at_eog = false;
      req.sampling.temperature = 0;
      const std::vector<float> ref = prompt_logits(f16, prompt, int(prompt.size()));
      const std::vector<int32_t> ref_text = f16.generate(req).tokens;
      const size_t n = prompt.size();
      for (size_t k = 0; k < quant.size(); ++k) {
        const std::vector<float> got = prompt_logits(*quant[k], prompt, int(n));
        Tally& t = tally[k];
        for (size_t p = 0; p < n; ++p) {
          const float* r = ref.data() + p * size_t(V);
          const float* g = got.data() + p * size_t(V);
          const double d = kl(r, g, V);
          const bool same = argmax(r, V) == argmax(g, V);
          ++t.positions;
          t.top1 += same;
          t.kl_sum += d;
          t.kl_max = std::max(t.kl_max, d);
          if (p + 1 == n) {
            t.last_top1 += same;
            t.last_kl_sum += d;
            t.last_kl_max = std::max(t.last_kl_max, d);
          }
        }
        ++t.prompts;
        t.same_text += quant[k]->generate(req).tokens == ref_text;
      }
      progress.step("prompts");
    }
    progress.done();
    std::printf("%d prompts, %lld tokens (%.1f a prompt), greedy continuation %d tokens\n\n", a.prompts,
                (long long)tokens, double(tokens) / a.prompts, a.continuation);
    std::printf("%-6s %12s %8s %12s %10s %10s %10s %10s %9s\n", "kv", "bytes/token", "top-1", "mean KL", "max KL",
                "last top-1", "last KL", "last max", "same-cont");
    const KvShape f16_shape{int(c.n_layer), int(c.n_kv_head), int(c.head_dim), 16, KvType::kF16};
    std::printf("%-6s %12zu %8s\n", "f16", f16_shape.bytes_per_token(), "(ref)");
    nlohmann::json rows = nlohmann::json::array();
    for (size_t k = 0; k < quant.size(); ++k) {
      const Tally& t = tally[k];
      const KvShape shape{int(c.n_layer), int(c.n_kv_head), int(c.head_dim), 16, a.kv_types[k]};
      const double np = double(std::max<int64_t>(t.positions, 1)), nq = double(std::max<int64_t>(t.prompts, 1));
      std::printf("%-6s %12zu %7.2f%% %12.6f %10.4f %9.2f%% %10.6f %10.4f %8.1f%%\n", kv_type_name(a.kv_types[k]),
                  shape.bytes_per_token(), 100.0 * t.top1 / np, t.kl_sum / np, t.kl_max, 100.0 * t.last_top1 / nq,
                  t.last_kl_sum / nq, t.last_kl_max, 100.0 * t.same_text / nq);
      rows.push_back({{"kv_type", kv_type_name(a.kv_types[k])}, {"bytes_per_token", shape.bytes_per_token()},
                      {"f16_bytes_per_token", f16_shape.bytes_per_token()}, {"prompts", t.prompts},
                      {"positions", t.positions}, {"top1_agreement", t.top1 / np}, {"mean_kl", t.kl_sum / np},
                      {"max_kl", t.kl_max}, {"last_top1_agreement", t.last_top1 / nq},
                      {"last_mean_kl", t.last_kl_sum / nq}, {"last_max_kl", t.last_kl_max},
                      {"same_continuation", t.same_text / nq}});
    }
    std::printf("\n");
    std::fflush(stdout);
    out_models.push_back({{"model", path}, {"n_layer", c.n_layer}, {"n_kv_head", c.n_kv_head},
                          {"head_dim", c.head_dim}, {"prompts", a.prompts}, {"tokens", tokens}, {"results", rows}});
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_all).count();
  std::printf("total %.1f s (%d thread%s)\n", secs, a.threads, a.threads == 1 ? "" : "s");
  if (!a.json_out.empty()) {
    nlohmann::json j = {{"bench", "kv-quality"}, {"threads", a.threads}, {"seed", a.seed},
                        {"continuation", a.continuation}, {"seconds", secs}, {"models", out_models}};
    std::ofstream(a.json_out) << j.dump(2) << "\n";
  }
  return 0;
}

}  // namespace

Run add_bench_kv_quality(CLI::App& bench) {
  auto a = std::make_shared<KvQualityArgs>();
  CLI::App* q = bench.add_subcommand(
      "kv-quality",
      "Quantized KV (--kv-type) against F16 KV: top-1 agreement and KL of the next-token distribution at every "
      "prompt position and the last, and identical greedy continuations, on prompts of text the model generates");
  q->add_option("-m,--model", a->models, "GGUF model files (one or more; trained models: the text is theirs)")
      ->required()->check(CLI::ExistingFile);
  q->add_option_function<std::vector<std::string>>(
       "--kv-type",
       [a](const std::vector<std::string>& vs) {
         a->kv_types.clear();
         for (const std::string& v : vs) {
           const auto t = parse_kv_type(v);
           if (!t || *t == KvType::kF16)
             throw CLI::ValidationError("--kv-type", "'" + v + "' is not a quantized KV type (q8_0, q4_0)");
           a->kv_types.push_back(*t);
         }
       },
       "Quantized KV types compared with F16 (comma-separated)")
      ->delimiter(',')->default_str("q8_0,q4_0");
  q->add_option("--prompts", a->prompts, "Prompts per model")->capture_default_str()->check(CLI::Range(1, 100000));
  q->add_option("--continuation", a->continuation, "Greedy tokens compared after the prompt")
      ->capture_default_str()->check(CLI::Range(0, 4096));
  q->add_option("--max-tokens", a->max_tokens, "Longest prompt (capped by the model's trained context)")
      ->capture_default_str()->check(CLI::Range(17, 1 << 20));
  q->add_option("--pool", a->pool, "Sampled stories the prompts draw from")->capture_default_str()->check(CLI::Range(1, 100000));
  q->add_option("-t,--threads", a->threads, "CPU threads (the models are tiny: 1 is fastest)")
      ->capture_default_str()->check(CLI::Range(1, 256));
  q->add_option("--seed", a->seed, "Seed of the stories and the prompts")->capture_default_str();
  q->add_option("--json", a->json_out, kBenchJsonHelp);
  return [a] { return run_kv_quality(*a); };
}

}  // namespace pc::cli
