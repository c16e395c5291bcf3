// `promptcache bench prefill`: prompt and decode throughput of a model.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>

#include "cli/commands.h"
#include "cli/units.h"
#include "engine/engine.h"
#include "kernels/cpu.h"
#include "kernels/cpu_count.h"
#include "kv/kv_storage.h"
#include "model/model.h"

namespace pc::cli {

namespace {

struct PrefillArgs {
  std::string model;
  std::vector<int> lengths{512, 2048};
  int decode = 32;
  int threads = default_thread_count();
  int repeat = 1;
  int batch_tokens = EngineOptions{}.max_batch_tokens;
  bool mmap = false;
  std::string json_out;
};

int run_prefill(const PrefillArgs& a) {
  auto model = Model::load(a.model, a.mmap ? Residency::kMap : Residency::kMemory);
  const ModelConfig& c = model->config();
  EngineOptions eo;
  eo.threads = a.threads;
  eo.max_batch_tokens = a.batch_tokens;
  int max_len = 0;
  for (int n : a.lengths) max_len = std::max(max_len, n);
  KvShape shape{int(c.n_layer), int(c.n_kv_head), int(c.head_dim), eo.page_size};
  eo.kv_memory_bytes = int64_t(shape.bytes_per_token()) * (max_len + a.decode + 64);
  Engine engine(*model, eo);
  std::mt19937 rng(42);
  std::uniform_int_distribution<int32_t> pick(3, int32_t(c.n_vocab) - 1);

  std::printf("model: %s\n%s\nthreads %d, kernels %s\n\n", a.model.c_str(), c.describe().c_str(),
              a.threads, cpu_level_name(cpu_level()).c_str());
  if (c.n_ctx_train > 0 && max_len + a.decode > c.n_ctx_train)
    std::fprintf(stderr,
                 "warning: %d prompt + %d decode tokens exceed the model's training context (%lld): "
                 "the speed is measured, the text would not be meaningful\n",
                 max_len, a.decode, (long long)c.n_ctx_train);
  std::printf("%8s  %14s  %10s  %14s\n", "tokens", "prompt tok/s", "TTFT ms", "decode tok/s");
  nlohmann::json rows = nlohmann::json::array();
  for (int n : a.lengths) {
    double best_pp = 0, best_tg = 0, best_ttft = 1e30;
    for (int rep = 0; rep < a.repeat; ++rep) {
      GenerateRequest req;
      for (int i = 0; i < n; ++i) req.prompt.push_back(pick(rng));
      req.max_tokens = a.decode;
      req.stop_at_eog = false;
      GenerateResult r = engine.generate(req);
      const double pp = n / (r.prompt_ms / 1000);
      const double tg = r.tokens.size() > 1 ? (r.tokens.size() - 1) / (r.decode_ms / 1000) : 0;
      best_pp = std::max(best_pp, pp);
      best_tg = std::max(best_tg, tg);
      best_ttft = std::min(best_ttft, r.ttft_ms);
    }
    if (a.decode > 0) {
      std::printf("%8d  %14.1f  %10.1f  %14.1f\n", n, best_pp, best_ttft, best_tg);
    } else {  // (no token generated: no TTFT, no decode rate)
      std::printf("%8d  %14.1f  %10s  %14s\n", n, best_pp, "-", "-");
    }
    std::fflush(stdout);
    rows.push_back({{"prompt_tokens", n}, {"prompt_tokens_per_s", best_pp},
                    {"ttft_ms", a.decode > 0 ? nlohmann::json(best_ttft) : nlohmann::json(nullptr)},
                    {"decode_tokens_per_s", a.decode > 0 ? nlohmann::json(best_tg) : nlohmann::json(nullptr)}});
  }
  if (!a.json_out.empty()) {
    nlohmann::json j = {{"model", a.model}, {"threads", a.threads},
                        {"kernels", cpu_level_name(cpu_level())}, {"results", rows}};
    std::ofstream(a.json_out) << j.dump(2) << "\n";
  }
  return 0;
}

}  // namespace

Run add_bench(CLI::App& app) {
  app.require_subcommand(1);
  auto a = std::make_shared<PrefillArgs>();
  CLI::App* p = app.add_subcommand("prefill", "Prompt (prefill) and decode tokens/s");
  p->add_option("-m,--model", a->model, "GGUF model file")->required()->check(CLI::ExistingFile);
  p->add_flag("--mmap", a->mmap, kMmapHelp);
  p->add_option("--tokens", a->lengths, "Prompt lengths (space- or comma-separated)")
      ->capture_default_str()->delimiter(',')->check(CLI::Range(1, 1 << 20));
  p->add_option("--decode", a->decode, "Tokens to decode after each prompt")
      ->capture_default_str()->check(CLI::Range(0, 1 << 20));
  p->add_option("-t,--threads", a->threads, kThreadsHelp)->capture_default_str()->check(CLI::Range(1, 256));
  p->add_option("--repeat", a->repeat, "Runs per length (best is reported)")
      ->capture_default_str()->check(CLI::Range(1, 1000));
  p->add_option("--batch-tokens", a->batch_tokens, "Tokens per forward step (a longer prompt runs in chunks of this many)")
      ->capture_default_str()->check(CLI::Range(1, 1 << 20));
  p->add_option("--json", a->json_out, "Also write the results as JSON to this file");
  Run conversation = add_bench_conversation(app);
  Run modules = add_bench_modules(app);
  Run serve = add_bench_serve(app);
  Run tiers = add_bench_tiers(app);
  CLI::App* conv = app.get_subcommand("conversation");
  CLI::App* srv = app.get_subcommand("serve");
  CLI::App* tie = app.get_subcommand("tiers");
  return [a, p, conv, srv, tie, conversation, modules, serve, tiers] {
    return p->parsed()    ? run_prefill(*a)
           : conv->parsed() ? conversation()
           : srv->parsed()  ? serve()
           : tie->parsed()  ? tiers()
                            : modules();
  };
}

}  // namespace pc::cli
