// `promptcache make-model`: write a random-weight GGUF of a named shape.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "cli/progress.h"
#include "cli/units.h"
#include "common/error.h"
#include "model/make_model.h"

namespace pc::cli {

namespace {

constexpr const char* kMixNames = "Q4_K_M, Q5_K_M, Q6_K, IQ4_XS";

}  // namespace

GgmlType parse_weight_type(const std::string& s) {
  std::string u;
  for (char c : s) u += char(std::toupper(static_cast<unsigned char>(c)));
  for (uint32_t id = 0; id < 64; ++id) {
    const GgmlType t = static_cast<GgmlType>(id);
    if (ggml_type_supported(t) && ggml_type_name(t) == u) return t;
  }
  throw Error("unknown weight type '" + s + "' (use " + ggml_supported_type_names() + ", or a mix: " +
              kMixNames + ")");
}

namespace {

struct MakeModelArgs {
  MakeModelOptions opt;
  std::string type = "Q8_0";
  std::string out;
};

int run_make_model(MakeModelArgs& a) {
  std::string upper;
  for (char c : a.type) upper += char(std::toupper(static_cast<unsigned char>(c)));
  a.opt.mix = parse_type_mix(upper);  // Q6_K: the mix, which is every matrix Q6_K
  if (a.opt.mix == TypeMix::kNone) a.opt.type = parse_weight_type(a.type);
  const auto t0 = std::chrono::steady_clock::now();
  std::fprintf(stderr, "writing %s: shape %s, arch %s, %s weights...\n", a.out.c_str(),
               a.opt.shape.c_str(), a.opt.arch.c_str(), a.type.c_str());
  {
    Progress progress("make-model", 0);
    a.opt.on_progress = progress.reporter();
    make_random_model(a.opt, a.out);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "done in %.1f s\n", s);
  return 0;
}

}  // namespace

Run add_make_model(CLI::App& app) {
  auto a = std::make_shared<MakeModelArgs>();
  std::string shapes;
  for (const std::string& s : make_model_shapes()) shapes += (shapes.empty() ? "" : ", ") + s;
  app.add_option("-o,--output", a->out, "Output GGUF path")->required();
  app.add_option("--shape", a->opt.shape, "Model shape: " + shapes)->capture_default_str();
  app.add_option("--arch", a->opt.arch, "Architecture: llama, qwen2, qwen3, gemma2, gemma3, phi3, qwen3moe, gpt-oss, qwen35, qwen35moe")->capture_default_str();
  app.add_option("--type", a->type,
                 "Weight type (" + ggml_supported_type_names() + ") or llama.cpp's per-tensor mix (" + kMixNames +
                     ")")
      ->capture_default_str();
  app.add_option("--vocab", a->opt.vocab_path,
                 "GGUF file whose tokenizer is copied (e.g. a model or ggml-vocab-*.gguf); "
                 "default: a built-in byte-level vocabulary")
      ->check(CLI::ExistingFile);
  app.add_option("--seed", a->opt.seed, "Random seed")->capture_default_str();
  app.add_option("--context-length", a->opt.context_length,
                 "Positions the model states it was trained for (<arch>.context_length)")
      ->check(CLI::Range(int64_t(1), int64_t(UINT32_MAX)))
      ->capture_default_str();
  app.add_flag("--tied", a->opt.tied_output, "Tie the output projection to the token embedding");
  return [a] { return run_make_model(*a); };
}

}  // namespace pc::cli
