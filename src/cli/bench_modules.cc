// `promptcache bench modules`: TTFT of PML prompts whose documents come from
// the module store, next to full recomputation of the same assembled text.
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
#include "pml/compiled_plan.h"
#include "common/error.h"
#include "kernels/cpu_count.h"
#include "model/model.h"
#include "pml/pml.h"
#include "tokenizer/tokenizer.h"
#include "probe/engine_logits.h"

namespace pc::cli {

namespace {

struct ModArgs {
  KvType kv_type = KvType::kF16;  // --kv-type
  std::string model;
  std::vector<int> lengths{512, 1024, 2048, 4096};
  int docs = 4;
  int prompts = 3;
  int threads = default_thread_count();
  uint32_t seed = 1;
  std::string json_out;
  int accuracy = 0;  // > 0: measure modular vs full next-token distributions instead
};

// Text of about n tokens: seeded random words, grown until the tokenizer says so.
std::string document(const Tokenizer& tok, int n, std::mt19937& rng) {
  static const char* words[] = {"river", "stone", "light", "garden", "window", "paper", "silver",
                                "morning", "engine", "forest", "cloud", "letter", "market",
                                "bridge", "winter", "candle", "harbor", "signal", "meadow", "copper"};
  std::string text;
  while (true) {
    for (int i = 0; i < 32; ++i) text += std::string(i ? " " : (text.empty() ? "" : " ")) + words[rng() % 20];
    if (int(tok.encode(text, false, false).size()) >= n) return text;
  }
}

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

// Next-token distributions of module-cached prompts vs full recomputation of
// the same tokens: top-1 agreement and KL(full || modular), over `a.accuracy`
// prompts whose questions are cut at different lengths.
int run_accuracy(const ModArgs& a, const Model& model, const pml::Encoder& enc) {
  const Tokenizer& tok = model.tokenizer();
  std::mt19937 rng(a.seed);
  const int L = a.lengths.front();
  std::string schema = "<schema name=\"docs\">";
  for (int d = 0; d < a.docs; ++d)
    schema += "<module name=\"doc" + std::to_string(d) + "\">" + document(tok, L, rng) + "</module>";
  schema += "</schema>";
  const pml::SchemaLayout layout = pml::compile_schema(schema, enc, "bench.pml");
  EngineOptions eo;
  eo.threads = a.threads;
  eo.kv_type = a.kv_type;
  Engine cached(model, eo);
  eo.prefix_cache = false;
  Engine cold(model, eo);
  const int64_t V = model.config().n_vocab;
  int agree = 0;
  double kl_sum = 0, kl_max = 0;
  Progress progress("modules --accuracy", a.accuracy);
  for (int i = 0; i < a.accuracy; ++i) {
    const int d1 = int(rng() % a.docs);
    const int d2 = (d1 + 1 + int(rng() % (a.docs - 1))) % a.docs;
    const std::string q = document(tok, 4 + int(rng() % 40), rng);
    const std::string prompt = "<prompt schema=\"docs\"><doc" + std::to_string(d1) + "/><doc" +
                               std::to_string(d2) + "/> " + q + "</prompt>";
    const pml::PromptPlan plan = pml::plan_prompt(prompt, layout, enc, "prompt.pml");
    const std::vector<float> mod = plan_logits(cached, pml::kv_plan(plan, layout));
    const std::vector<int32_t> full = pml::plan_tokens(plan, layout);
    const std::vector<float> all = prompt_logits(cold, full, 512);
    const float* ref = all.data() + (full.size() - 1) * V;
    auto softmax = [&](const float* l) {
      std::vector<double> p(V);
      double mx = l[0], sum = 0;
      for (int64_t v = 1; v < V; ++v) mx = std::max(mx, double(l[v]));
      for (int64_t v = 0; v < V; ++v) sum += p[v] = std::exp(double(l[v]) - mx);
      for (double& x : p) x /= sum;
      return p;
    };
    const auto pf = softmax(ref), pm = softmax(mod.data());
    double kl = 0;
    for (int64_t v = 0; v < V; ++v)
      if (pf[v] > 0) kl += pf[v] * std::log(pf[v] / std::max(pm[v], 1e-300));
    kl_sum += kl;
    kl_max = std::max(kl_max, kl);
    agree += std::max_element(pf.begin(), pf.end()) - pf.begin() ==
             std::max_element(pm.begin(), pm.end()) - pm.begin();
    progress.step("prompts");
  }
  progress.done();
  std::printf("modular vs full recomputation over %d prompts (documents of %d tokens):\n"
              "  top-1 agreement %.1f%%, KL(full || modular) mean %.4f, max %.4f nats\n",
              a.accuracy, L, 100.0 * agree / a.accuracy, kl_sum / a.accuracy, kl_max);
  return 0;
}

int run_modules(const ModArgs& a) {
  if (a.docs < 2 || a.prompts < 1) throw Error("need at least 2 documents and 1 prompt");
  auto model = Model::load(a.model);
  const Tokenizer& tok = model->tokenizer();
  const pml::Encoder enc = pml::Encoder::for_model(tok, model->file());
  if (a.accuracy > 0) return run_accuracy(a, *model, enc);
  std::printf("model: %s\n%s\n%d documents per schema, prompts import 2 of them in varying order "
              "plus a question; TTFT in ms (best of 2)\n\n",
              a.model.c_str(), model->config().describe().c_str(), a.docs);
  std::printf("%8s %10s %14s %14s %10s\n", "doc len", "prompt", "full recompute", "cached modules", "speed-up");
  nlohmann::json rows = nlohmann::json::array();
  std::mt19937 rng(a.seed);
  Progress progress("modules", int64_t(a.lengths.size()) * a.prompts);
  for (int L : a.lengths) {
    std::string schema = "<schema name=\"docs\"><system>Answer from the documents.</system>";
    for (int d = 0; d < a.docs; ++d)
      schema += "<module name=\"doc" + std::to_string(d) + "\">" + document(tok, L, rng) + "</module>";
    schema += "</schema>";
    const pml::SchemaLayout layout = pml::compile_schema(schema, enc, "bench.pml");
    EngineOptions eo;
    eo.threads = a.threads;
    eo.kv_type = a.kv_type;
    eo.kv_memory_bytes = int64_t(model->config().n_layer) * model->config().n_kv_head *
                             model->config().head_dim * 4 * (int64_t(a.docs + 3) * L + 1024) + (64 << 20);
    Engine cached(*model, eo);
    eo.prefix_cache = false;
    Engine cold(*model, eo);
    cached.preload(pml::module_set(layout));
    double sum_full = 0, sum_mod = 0;
    int64_t n_prompt = 0;
    for (int p = 0; p < a.prompts; ++p) {
      const int d1 = int(rng() % a.docs);
      int d2 = int(rng() % a.docs);
      if (d2 == d1) d2 = (d1 + 1) % a.docs;
      const std::string question = document(tok, 32 + int(rng() % 33), rng);
      const std::string prompt = "<prompt schema=\"docs\"><doc" + std::to_string(d1) + "/><doc" +
                                 std::to_string(d2) + "/><user>" + question + "?</user><assistant/></prompt>";
      const pml::PromptPlan plan = pml::plan_prompt(prompt, layout, enc, "prompt.pml");
      GenerateRequest req;
      req.max_tokens = 1;
      req.stop_at_eog = false;
      double best_mod = 1e30, best_full = 1e30;
      for (int rep = 0; rep < 2; ++rep) {
        auto t0 = std::chrono::steady_clock::now();
        const GenerateResult r = cached.generate_plan(pml::kv_plan(plan, layout), req);
        best_mod = std::min(best_mod, ms_since(t0));
        n_prompt = r.n_prompt;
        // The same assembled tokens, computed from scratch (positions 0..n-1).
        GenerateRequest full = req;
        full.prompt = pml::plan_tokens(plan, layout);
        t0 = std::chrono::steady_clock::now();
        cold.generate(full);
        best_full = std::min(best_full, ms_since(t0));
      }
      sum_full += best_full;
      sum_mod += best_mod;
      progress.step("prompts (documents of " + std::to_string(L) + " tokens)");
    }
    progress.clear();
    const double full = sum_full / a.prompts, mod = sum_mod / a.prompts;
    std::printf("%8d %10lld %14.1f %14.1f %9.1fx\n", L, (long long)n_prompt, full, mod, full / mod);
    std::fflush(stdout);
    rows.push_back({{"doc_tokens", L}, {"prompt_tokens", n_prompt}, {"ttft_full_ms", full},
                    {"ttft_cached_ms", mod}, {"speedup", full / mod}});
  }
  progress.done();
  if (!a.json_out.empty())
    std::ofstream(a.json_out) << nlohmann::json{{"bench", "modules"}, {"model", a.model}, {"results", rows}}.dump(2) << "\n";
  return 0;
}

}  // namespace

Run add_bench_modules(CLI::App& bench) {
  auto a = std::make_shared<ModArgs>();
  CLI::App* p = bench.add_subcommand("modules", "PML module reuse: TTFT with cached document modules "
                                                 "vs full recomputation of the same text");
  p->add_option("-m,--model", a->model, "GGUF model file")->required()->check(CLI::ExistingFile);
  p->add_option("--lengths", a->lengths, "Document lengths in tokens")
      ->capture_default_str()->delimiter(',')->check(CLI::Range(1, 1 << 20));
  p->add_option("--docs", a->docs, "Documents per schema")->capture_default_str()->check(CLI::Range(2, 1000));
  p->add_option("--prompts", a->prompts, "Prompts per length")->capture_default_str()->check(CLI::Range(1, 100000));
  add_kv_type_option(*p, &a->kv_type);
  p->add_option("-t,--threads", a->threads, kThreadsHelp)->capture_default_str()->check(CLI::Range(1, 256));
  p->add_option("--seed", a->seed, "Seed")->capture_default_str();
  p->add_option("--json", a->json_out, kBenchJsonHelp);
  p->add_option("--accuracy", a->accuracy,
                "Instead of timing: compare next-token distributions of N module-cached prompts "
                "with full recomputation (top-1 agreement, KL); uses the first --lengths value")
      ->check(CLI::Range(0, 100000));
  return [a] { return run_modules(*a); };
}

}  // namespace pc::cli
