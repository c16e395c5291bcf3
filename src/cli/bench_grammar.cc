// `promptcache bench grammar`: the decode cost of constrained decoding, side by side
// with unconstrained decoding of the same model, prompt and seed.
//
// Each round runs, interleaved: a free request, a JSON-Schema request and a
// json_object request, each grammar once with a warm automaton (the engine's cache
// already holds its states' masks, as for an agent resending one schema) and once
// cold (a grammar text the engine has not seen: every state's transitions and mask
// computed during the request). Decode time per token is reported for each, with its
// ratio to the free request's; the best round counts.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>

#include "cli/commands.h"
#include "cli/kv_type_flag.h"
#include "engine/engine.h"
#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "kernels/cpu_count.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace pc::cli {

namespace {

struct GrammarArgs {
  KvType kv_type = KvType::kF16;  // --kv-type
  std::string model;
  int decode = 128;
  int threads = default_thread_count();
  int repeat = 3;
  float temperature = 1.f;
  uint64_t seed = 1;
  std::string json_out;
};

// A schema of the kind agents send: strings, an enum, bounded numbers, a nested array.
const char* kSchema = R"({"type": "object", "properties": {
  "name": {"type": "string"}, "city": {"type": "string"},
  "age": {"type": "integer", "minimum": 0, "maximum": 150},
  "role": {"enum": ["admin", "user", "guest"]},
  "score": {"type": "number"},
  "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 8},
  "address": {"type": "object", "properties": {"street": {"type": "string"}, "zip": {"type": "string"}},
              "required": ["street", "zip"]}},
  "required": ["name", "city", "age", "role", "score", "tags", "address"]})";

struct Case {
  std::string name;
  std::string gbnf;  // "" = unconstrained
  bool cold = false;
};

int run_grammar(const GrammarArgs& a) {
  auto model = Model::load(a.model);
  EngineOptions eo;
  eo.threads = a.threads;
  eo.kv_type = a.kv_type;
  eo.kv_memory_bytes = int64_t(256) << 20;
  Engine engine(*model, eo);
  const int32_t V = int32_t(model->config().n_vocab);
  const std::string schema_gbnf = grammar::schema_to_gbnf(nlohmann::ordered_json::parse(kSchema));
  const std::string object_gbnf = grammar::any_object_gbnf();
  const std::vector<Case> cases = {{"free", "", false},
                                   {"schema (warm)", schema_gbnf, false},
                                   {"schema (cold)", schema_gbnf, true},
                                   {"json_object (warm)", object_gbnf, false},
                                   {"json_object (cold)", object_gbnf, true}};
  std::printf("model: %s (vocabulary %d tokens), threads %d, %d decode tokens, temperature %g, seed %llu\n\n",
              a.model.c_str(), V, a.threads, a.decode, double(a.temperature), (unsigned long long)a.seed);
  // Warm automata: one request per grammar before measuring.
  std::mt19937 rng(42);
  std::vector<int32_t> prompt{model->tokenizer().bos() >= 0 ? model->tokenizer().bos() : 1};
  for (int i = 0; i < 31; ++i) prompt.push_back(int32_t(3 + rng() % uint32_t(V - 3)));
  auto request = [&](const Case& c, int round) {
    GenerateRequest r;
    r.prompt = prompt;
    r.max_tokens = a.decode;
    r.stop_at_eog = false;
    r.sampling.temperature = a.temperature;
    r.sampling.seed = a.seed + uint64_t(round);
    if (!c.gbnf.empty()) {
      // A cold case's text differs by a comment each round: a grammar the engine has not seen.
      static int unique = 0;
      r.grammar = grammar::parse_gbnf(c.cold ? c.gbnf + "# cold " + std::to_string(++unique) + "\n" : c.gbnf);
    }
    return r;
  };
  for (const Case& c : cases)
    if (!c.gbnf.empty() && !c.cold) engine.generate(request(c, -1));
  std::vector<double> best(cases.size(), 1e30);
  std::vector<int64_t> tokens(cases.size(), 0);
  for (int round = 0; round < a.repeat; ++round) {
    for (size_t i = 0; i < cases.size(); ++i) {
      GenerateResult r = engine.generate(request(cases[i], round));
      if (r.tokens.size() < 2) continue;
      const double per_token = r.decode_ms / double(r.tokens.size() - 1);
      best[i] = std::min(best[i], per_token);
      tokens[i] += int64_t(r.tokens.size());
    }
  }
  std::printf("%-20s %12s %14s %10s\n", "request", "tokens", "decode ms/tok", "vs free");
  nlohmann::json rows = nlohmann::json::array();
  for (size_t i = 0; i < cases.size(); ++i) {
    const double ratio = best[i] / best[0];
    std::printf("%-20s %12lld %14.3f %10.3f\n", cases[i].name.c_str(), (long long)tokens[i], best[i], ratio);
    rows.push_back({{"request", cases[i].name}, {"tokens", tokens[i]}, {"decode_ms_per_token", best[i]},
                    {"ratio_to_free", ratio}});
  }
  if (!a.json_out.empty()) {
    nlohmann::json j = {{"bench", "grammar"}, {"model", a.model}, {"threads", a.threads}, {"n_vocab", V},
                        {"decode", a.decode}, {"temperature", a.temperature}, {"results", rows}};
    std::ofstream(a.json_out) << j.dump(2) << "\n";
  }
  return 0;
}

}  // namespace

Run add_bench_grammar(CLI::App& bench) {
  auto a = std::make_shared<GrammarArgs>();
  CLI::App* p = bench.add_subcommand("grammar", "Decode cost of constrained decoding (JSON Schema, json_object) vs free");
  p->add_option("-m,--model", a->model, "GGUF model file")->required()->check(CLI::ExistingFile);
  p->add_option("--decode", a->decode, "Most tokens per request")->capture_default_str()->check(CLI::Range(2, 1 << 16));
  add_kv_type_option(*p, &a->kv_type);
  p->add_option("-t,--threads", a->threads, kThreadsHelp)->capture_default_str()->check(CLI::Range(1, 256));
  p->add_option("--repeat", a->repeat, "Rounds (the best per request is reported)")
      ->capture_default_str()->check(CLI::Range(1, 1000));
  p->add_option("--temperature", a->temperature, "Sampling temperature")->capture_default_str()->check(CLI::Range(0.0, 100.0));
  p->add_option("--seed", a->seed, "Sampling seed (round r uses seed + r)")->capture_default_str();
  p->add_option("--json", a->json_out, kBenchJsonHelp);
  return [a] { return run_grammar(*a); };
}

}  // namespace pc::cli
