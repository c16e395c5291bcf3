// `promptcache demo`: the quickstart's main job. Generates a small random
// model (or uses the shared TinyStories model when present) and shows
// generation with timings.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "cli/commands.h"
#include "engine/engine.h"
#include "kernels/cpu_count.h"
#include "model/make_model.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace pc::cli {

namespace {

struct DemoArgs {
  std::string dir;
  std::string shared;  // folder with models/stories260K.gguf
  int threads = default_thread_count();
};

void show(const std::string& path, const std::string& prompt, int n, int threads) {
  auto model = Model::load(path);
  std::printf("\n== %s\n   %s\n", path.c_str(), model->config().describe().c_str());
  EngineOptions eo;
  eo.threads = threads;
  eo.kv_memory_bytes = 256 << 20;
  Engine engine(*model, eo);
  GenerateRequest req;
  req.prompt = model->tokenizer().encode(prompt, true, false);
  req.max_tokens = n;
  StreamDecoder dec(model->tokenizer());
  std::printf("prompt: %s\noutput: ", prompt.c_str());
  GenerateResult r = engine.generate(req, [&](int32_t id) {
    std::fputs(dec.push(id).c_str(), stdout);
    std::fflush(stdout);
    return true;
  });
  std::fputs(dec.flush().c_str(), stdout);
  std::printf("\ntimings: %lld prompt tokens at %.0f tokens/s, TTFT %.1f ms, %zu tokens at %.1f tokens/s\n",
              (long long)r.n_prompt, r.n_prompt / (r.prompt_ms / 1000), r.ttft_ms, r.tokens.size(),
              r.tokens.size() > 1 ? (r.tokens.size() - 1) / (r.decode_ms / 1000) : 0.0);
}

// Printable form of random-weight output (bytes outside ASCII become '.').
std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s) out += (c >= 32 && c < 127) || c == '\n' ? char(c) : '.';
  return out;
}

// Prefix reuse on the generated model: a long shared context, then two
// follow-ups that pay only for their new tokens.
void show_prefix_reuse(const std::string& path, int threads) {
  auto model = Model::load(path);
  std::printf("\n== prefix reuse on %s\n   %s\n", path.c_str(), model->config().describe().c_str());
  EngineOptions eo;
  eo.threads = threads;
  eo.kv_memory_bytes = 512 << 20;
  Engine engine(*model, eo);
  std::string context = "Notes for the support desk. ";
  for (int i = 0; i < 12; ++i) context += "Router model R" + std::to_string(i) + " blinks red when the link is down; restart it. ";
  const char* questions[] = {"", " Q: what does a red light mean?", " Q: how do I restart it?"};
  for (const char* q : questions) {
    GenerateRequest req;
    req.prompt = model->tokenizer().encode(context + q, true, false);
    req.max_tokens = 8;
    req.stop_at_eog = false;
    std::string text;
    StreamDecoder dec(model->tokenizer());
    const GenerateResult r = engine.generate(req, [&](int32_t id) {
      text += dec.push(id);
      return true;
    });
    std::printf("request: %4lld prompt tokens, %4lld cached, %4lld computed, TTFT %7.1f ms | %s\n",
                (long long)r.n_prompt, (long long)r.n_cached, (long long)r.n_computed, r.ttft_ms,
                printable(text + dec.flush()).c_str());
  }
  std::printf("(random weights: the text is gibberish; the timings and the cache are real)\n");
}

int run_demo(const DemoArgs& a) {
  namespace fs = std::filesystem;
  fs::create_directories(a.dir);
  const fs::path gen = fs::path(a.dir) / "smollm-135m-shape-q8_0.gguf";
  if (!fs::exists(gen)) {
    std::printf("generating a random-weight smollm-135m-shape Q8_0 model at %s ...\n", gen.c_str());
    MakeModelOptions o;
    o.shape = "smollm-135m";
    o.type = GgmlType::Q8_0;
    make_random_model(o, gen.string());
  }
  show_prefix_reuse(gen.string(), a.threads);
  // A real trained model, when the shared model folder sits beside the checkout.
  const fs::path stories = fs::path(a.shared) / "models" / "stories260K.gguf";
  if (fs::exists(stories)) {
    show(stories.string(), "Once upon a time", 60, a.threads);
  } else {
    std::printf("\n(%s not found: skipping the trained-model example)\n", stories.c_str());
  }
  return 0;
}

}  // namespace

Run add_demo(CLI::App& app) {
  auto a = std::make_shared<DemoArgs>();
  const char* home = std::getenv("HOME");
  a->dir = std::string(home ? home : "/tmp") + "/.cache/promptcache";
  app.add_option("--dir", a->dir, "Where the generated model is kept")->capture_default_str();
  const char* shared = std::getenv("PC_SHARED_DIR");
  a->shared = shared ? shared : "../shared";
  app.add_option("--shared", a->shared, "Folder with models/stories260K.gguf (default $PC_SHARED_DIR or ../shared)")
      ->capture_default_str();
  app.add_option("-t,--threads", a->threads, kThreadsHelp)->capture_default_str();
  return [a] { return run_demo(*a); };
}

}  // namespace pc::cli
