// `promptcache generate`: run one prompt and stream the generated text.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/kv_type_flag.h"
#include "cli/repack_flag.h"
#include "cli/tier_flags.h"
#include "cli/units.h"
#include "engine/engine.h"
#include "pml/compiled_plan.h"
#include "common/error.h"
#include "kernels/cpu_count.h"
#include "model/config_check.h"
#include "model/model.h"
#include "pml/pml.h"
#include "tokenizer/tokenizer.h"

namespace pc::cli {

namespace {

struct GenerateArgs {
  TierArgs tiers;
  std::string model;
  std::string prompt;
  bool prompt_given = false;  // -p was given, perhaps as "" (a BOS-only prompt)
  std::string file;
  std::string schema;  // PML schema file; `prompt` is then a PML prompt file
  bool preload = false;
  bool mmap = false;
  Model::WeightLayout weights = Model::WeightLayout::kFastest;
  int32_t n_predict = 64;
  int64_t ctx_size = 0;  // -c: positions prompt + reply may use (0 = no cap)
  int threads = default_thread_count();
  std::string kv_memory = "1GiB";
  KvType kv_type = KvType::kF16;
  bool no_bos = false;
  bool special = false;
  SamplingParams sampling;
};

void print_timings(const GenerateResult& r) {
  const double pp_tps = r.prompt_ms > 0 ? r.n_computed / (r.prompt_ms / 1000) : 0;
  const double tg_tps =
      r.tokens.size() > 1 && r.decode_ms > 0 ? (r.tokens.size() - 1) / (r.decode_ms / 1000) : 0;
  std::fprintf(stderr,
               "timings: prompt %lld tokens (%lld cached, %lld computed) %.1f tokens/s | "
               "TTFT %.1f ms | generated %zu tokens, decode %.1f tokens/s | finish: %s\n",
               (long long)r.n_prompt, (long long)r.n_cached, (long long)r.n_computed, pp_tps,
               r.ttft_ms, r.tokens.size(), tg_tps, to_string(r.finish_reason));
  if (r.n_promoted > 0)
    std::fprintf(stderr, "tiers: %lld of the cached tokens were restored from disk or Redis\n",
                 (long long)r.n_promoted);
}

// Runs `gen` with a callback that streams the text to stdout as it comes.
template <class Gen>
GenerateResult stream_to_stdout(const Tokenizer& tok, Gen&& gen) {
  StreamDecoder dec(tok);
  GenerateResult r = gen([&](int32_t id) {
    const std::string s = dec.push(id);
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fflush(stdout);
    return true;
  });
  const std::string rest = dec.flush();
  std::fwrite(rest.data(), 1, rest.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
  return r;
}

// Runs one request and streams its text to stdout.
void run_one(Engine& engine, const Tokenizer& tok, const GenerateRequest& req) {
  print_timings(stream_to_stdout(tok, [&](const TokenCallback& cb) { return engine.generate(req, cb); }));
}

// The fields a request line may have (read_requests).
constexpr const char* kRequestKeys[] = {"prompt", "max_tokens", "temperature", "seed", "top_k", "top_p",
                                        "min_p", "repeat_penalty", "repeat_last_n", "tenant"};

// One request per line: {"prompt": "...", "max_tokens": N, "temperature": T,
// "seed": S, "top_k": K, "top_p": P, "min_p": M, "repeat_penalty": R,
// "repeat_last_n": L, "tenant": "..."}; missing fields take the command-line
// values, other fields are an error naming the line. Blank lines and lines
// starting with # are skipped.
std::vector<std::pair<std::string, GenerateRequest>> read_requests(const GenerateArgs& a,
                                                                    const GenerateRequest& defaults) {
  std::ifstream in(a.file);
  if (!in) throw Error("cannot open request file '" + a.file + "'");
  std::vector<std::pair<std::string, GenerateRequest>> out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos || line[0] == '#') continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const std::exception& e) {
      throw Error(a.file + ":" + std::to_string(n) + ": invalid JSON: " + e.what());
    }
    const std::string where = a.file + ":" + std::to_string(n) + ": ";
    if (!j.is_object() || !j.contains("prompt") || !j["prompt"].is_string())
      throw Error(where + "expected an object with a string \"prompt\"");
    for (const auto& [key, value] : j.items()) {
      bool known = false;
      for (const char* k : kRequestKeys) known = known || key == k;
      if (known) continue;
      std::string list;
      for (const char* k : kRequestKeys) list += (list.empty() ? "" : ", ") + std::string(k);
      throw Error(where + "unknown field \"" + key + "\" (a request takes: " + list + ")");
    }
    GenerateRequest r = defaults;
    SamplingParams& s = r.sampling;
    try {
      r.max_tokens = j.value("max_tokens", r.max_tokens);
      s.temperature = j.value("temperature", s.temperature);
      s.seed = j.value("seed", s.seed);
      s.top_k = j.value("top_k", s.top_k);
      s.top_p = j.value("top_p", s.top_p);
      s.min_p = j.value("min_p", s.min_p);
      s.repeat_penalty = j.value("repeat_penalty", s.repeat_penalty);
      s.repeat_last_n = j.value("repeat_last_n", s.repeat_last_n);
      r.scope.tenant = j.value("tenant", r.scope.tenant);
      Sampler check(s);  // its settings' ranges, reported with the line
    } catch (const std::exception& e) {
      throw Error(where + e.what());
    }
    out.emplace_back(j["prompt"].get<std::string>(), r);
  }
  return out;
}

// A PML prompt: modules from the module store (encoded on first use), the
// rest computed; the timings line says how many tokens came from cached modules.
int run_pml(const GenerateArgs& a, const Model& model, Engine& engine, const GenerateRequest& defaults) {
  const pml::Encoder enc = pml::Encoder::for_model(model.tokenizer(), model.file());
  const pml::SchemaLayout layout = pml::compile_schema(read_text_file(a.schema), enc, a.schema);
  const pml::PromptPlan plan = pml::plan_prompt(read_text_file(a.prompt), layout, enc, a.prompt);
  if (a.preload) {
    const int64_t n = engine.preload(pml::module_set(layout));
    std::fprintf(stderr, "preloaded schema '%s': %lld module tokens encoded\n", layout.name.c_str(), (long long)n);
  }
  const GenerateResult r = stream_to_stdout(model.tokenizer(), [&](const TokenCallback& cb) {
    return engine.generate_plan(pml::kv_plan(plan, layout), defaults, cb);
  });
  std::fprintf(stderr, "modules: %lld cached, %lld encoded\n", (long long)r.n_module_hits,
               (long long)r.n_module_misses);
  print_timings(r);
  return 0;
}

// The prompt's tokens: BOS alone for "" (as llama.cpp runs it), unless there is no BOS.
std::vector<int32_t> encode_prompt(const GenerateArgs& a, const Tokenizer& tok, const std::string& text,
                                   const std::string& what) {
  std::vector<int32_t> ids = tok.encode(text, !a.no_bos, a.special);
  if (ids.empty())
    throw Error(what + " is empty and " +
                (a.no_bos ? std::string("--no-bos leaves no BOS token") : "the model adds no BOS token") +
                ": there is no token to generate from");
  return ids;
}

// The reply's room under -c: the prompt must leave at least one position.
void fit_context(int64_t n_ctx, GenerateRequest& req, const std::string& what) {
  if (n_ctx <= 0) return;
  const int64_t n = int64_t(req.prompt.size());
  if (n >= n_ctx)
    throw Error(what + " is " + std::to_string(n) + " tokens; --ctx-size " + std::to_string(n_ctx) +
                " leaves no room for a reply");
  req.max_tokens = int32_t(std::min<int64_t>(req.max_tokens, n_ctx - n));
}

int run_generate(const GenerateArgs& a) {
  if (a.prompt_given == !a.file.empty())
    throw Error("give either -p TEXT (with --schema: -p PROMPT.pml) or -f FILE");
  auto model = Model::load(a.model, a.mmap ? Residency::kMap : Residency::kMemory, 0,
                           a.weights);
  const Tokenizer& tok = model->tokenizer();
  EngineOptions eo;
  eo.threads = a.threads;
  eo.kv_memory_bytes = parse_bytes(a.kv_memory);
  eo.kv_type = a.kv_type;
  eo.tiers = tier_options(a.tiers);
  Engine engine(*model, eo);
  const int64_t n_ctx = a.ctx_size > 0 ? context_size(model->config(), a.ctx_size) : 0;

  GenerateRequest defaults;
  defaults.max_tokens = a.n_predict;
  defaults.sampling = a.sampling;
  if (!a.schema.empty()) return run_pml(a, *model, engine, defaults);
  if (a.file.empty()) {
    GenerateRequest req = defaults;
    req.prompt = encode_prompt(a, tok, a.prompt, "the prompt");
    fit_context(n_ctx, req, "the prompt");
    run_one(engine, tok, req);
    return 0;
  }
  const auto reqs = read_requests(a, defaults);
  for (size_t i = 0; i < reqs.size(); ++i) {
    GenerateRequest req = reqs[i].second;
    const std::string what = "request " + std::to_string(i + 1) + "'s prompt";
    req.prompt = encode_prompt(a, tok, reqs[i].first, what);
    fit_context(n_ctx, req, what);
    std::fprintf(stderr, "== request %zu\n", i + 1);
    run_one(engine, tok, req);
  }
  const EngineStats& st = engine.stats();
  std::fprintf(stderr, "total: %lld requests, %lld prompt tokens, %lld cached (%.1f%%), %lld computed\n",
               (long long)st.requests, (long long)st.prompt_tokens, (long long)st.cached_tokens,
               st.prompt_tokens ? 100.0 * st.cached_tokens / st.prompt_tokens : 0.0,
               (long long)st.computed_tokens);
  return 0;
}

}  // namespace

Run add_generate(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  app.add_option("-m,--model", a->model, "GGUF model file")->required()->check(CLI::ExistingFile);
  app.add_flag("--mmap", a->mmap, kMmapHelp);
  add_repack_options(app, &a->weights);
  app.add_option("-p,--prompt", a->prompt, "Prompt text (BOS is added as the model says; \"\" = BOS alone)")
      ->each([a](const std::string&) { a->prompt_given = true; });
  app.add_option("-f,--file", a->file,
                 "Requests, one JSON object per line ({\"prompt\": ..., \"max_tokens\": ...}), "
                 "run in order through one cache")
      ->check(CLI::ExistingFile);
  app.add_option("--schema", a->schema,
                 "PML schema file; --prompt then names a PML prompt file importing its modules")
      ->check(CLI::ExistingFile);
  app.add_flag("--preload", a->preload, "Encode every module of --schema before the prompt");
  app.add_option("-n,--n-predict", a->n_predict, "Maximum tokens to generate")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("-c,--ctx-size", a->ctx_size,
                 "Positions prompt + reply may use, at most the model's context (0 = no cap: the "
                 "reply runs -n tokens)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("-t,--threads", a->threads, kThreadsHelp)->capture_default_str()->check(CLI::Range(1, 256));
  app.add_option("--kv-memory", a->kv_memory, "KV cache memory (e.g. 512MiB, 4GiB)")->capture_default_str();
  add_kv_type_option(app, &a->kv_type);
  add_tier_options(app, a->tiers);
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
