// promptcache: an LLM inference server that reuses attention state.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/flag_hints.h"
#include "cli/kernel_cap.h"
#include "common/error.h"

int main(int argc, char** argv) {
  CLI::App app{
      "promptcache — LLM inference that never computes the same attention state twice.\n"
      "Loads GGUF models (llama, qwen2, qwen3, gemma2, gemma3, phi3) and runs them on the CPU."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "promptcache 0.1.0");
  using namespace pc::cli;
  Run runs[] = {
      add_generate(*app.add_subcommand("generate", "Generate text from a prompt")),
      add_inspect(*app.add_subcommand("inspect", "Print a GGUF file's metadata and tensors")),
      add_make_model(*app.add_subcommand("make-model", "Write a random-weight GGUF model of a named shape")),
      add_demo(*app.add_subcommand("demo", "Generate a small model and show generation")),
      add_bench(*app.add_subcommand("bench", "Benchmarks: prefill, conversation, modules")),
      add_pml(*app.add_subcommand("pml", "PML schemas and prompts (modular prompt caching)")),
      add_serve(*app.add_subcommand("serve", "Serve the OpenAI-compatible HTTP API")),
  };
  try {
    // llama.cpp's spellings first (-np), then CLI11; CLI11 takes argv without the
    // program name in reverse order.
    app.name(argv[0]);
    std::vector<std::string> args = translate_llama_flags(argc - 1, argv + 1);
    std::reverse(args.begin(), args.end());
    app.parse(args);
  } catch (const CLI::ExtrasError& e) {
    const int rc = app.exit(e);
    std::fputs(flag_hints(app).c_str(), stderr);
    return rc;
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const pc::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  apply_kernel_cap_from_environment();  // before any command runs a kernel
  const char* names[] = {"generate", "inspect", "make-model", "demo", "bench", "pml", "serve"};
  try {
    for (size_t i = 0; i < std::size(names); ++i)
      if (app.got_subcommand(names[i])) return runs[i]();
  } catch (const pc::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "internal error: %s\n", e.what());
    return 2;
  }
  return 0;
}
