// `promptcache generate`: run one prompt and stream the generated text.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "cli/units.h"
#include "engine/engine.h"
#include "gguf/error.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace pc::cli {

namespace {

struct GenerateArgs {
  std::string model;
  std::string prompt;
  int32_t n_predict = 64;
  int threads = 2;
  std::string kv_memory = "1GiB";
  bool no_bos = false;
  bool special = false;
  SamplingParams sampling;
};

int run_generate(const GenerateArgs& a) {
  auto model = Model::load(a.model);
  const Tokenizer& tok = model->tokenizer();
  EngineOptions eo;
  eo.threads = a.threads;
  eo.kv_memory_bytes = parse_bytes(a.kv_memory);
  Engine engine(*model, eo);

  GenerateRequest req;
  req.prompt = tok.encode(a.prompt, !a.no_bos, a.special);
  if (req.prompt.empty()) throw Error("the prompt is empty (give -p TEXT, or drop --no-bos)");
  req.max_tokens = a.n_predict;
  req.sampling = a.sampling;

  StreamDecoder dec(tok);
  GenerateResult r = engine.generate(req, [&](int32_t id) {
    const std::string s = dec.push(id);
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fflush(stdout);
    return true;
  });
  const std::string rest = dec.flush();
  std::fwrite(rest.data(), 1, rest.size(), stdout);
  std::fputc('\n', stdout);
  const double pp_tps = r.prompt_ms > 0 ? r.n_computed / (r.prompt_ms / 1000) : 0;
  const double tg_tps =
      r.tokens.size() > 1 && r.decode_ms > 0 ? (r.tokens.size() - 1) / (r.decode_ms / 1000) : 0;
  std::fprintf(stderr,
               "timings: prompt %lld tokens (%lld cached, %lld computed) %.1f tokens/s | "
               "TTFT %.1f ms | generated %zu tokens, decode %.1f tokens/s | finish: %s\n",
               (long long)r.n_prompt, (long long)r.n_cached, (long long)r.n_computed, pp_tps,
               r.ttft_ms, r.tokens.size(), tg_tps, r.finish_reason.c_str());
  return 0;
}

}  // namespace

Run add_generate(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  app.add_option("-m,--model", a->model, "GGUF model file")->required()->check(CLI::ExistingFile);
  app.add_option("-p,--prompt", a->prompt, "Prompt text (BOS is added as the model says)");
  app.add_option("-n,--n-predict", a->n_predict, "Maximum tokens to generate")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("-t,--threads", a->threads, "CPU threads")->capture_default_str()->check(CLI::Range(1, 256));
  app.add_option("--kv-memory", a->kv_memory, "KV cache memory (e.g. 512MiB, 4GiB)")->capture_default_str();
  app.add_flag("--no-bos", a->no_bos, "Do not add BOS even if the model asks for it");
  app.add_flag("--special", a->special, "Parse special-token text (e.g. <|im_start|>) in the prompt");
  SamplingParams& s = a->sampling;
  app.add_option("--temp", s.temperature, "Temperature; 0 = greedy")->capture_default_str();
  app.add_option("--seed", s.seed, "Sampling seed")->capture_default_str();
  app.add_option("--top-k", s.top_k, "Top-k (0 = off)")->capture_default_str();
  app.add_option("--top-p", s.top_p, "Top-p (1 = off)")->capture_default_str();
  app.add_option("--min-p", s.min_p, "Min-p (0 = off)")->capture_default_str();
  app.add_option("--repeat-penalty", s.repeat_penalty, "Repetition penalty (1 = off)")->capture_default_str();
  app.add_option("--repeat-last-n", s.repeat_last_n, "Tokens the penalty looks back over")->capture_default_str();
  return [a] { return run_generate(*a); };
}

}  // namespace pc::cli
