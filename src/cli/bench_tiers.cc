// `promptcache bench tiers`: how fast each KV tier gives an entry back, and the TTFT of
// a module-cached PML prompt when its document module sits in memory, on disk or in
// Redis, next to full recomputation of the same text.
#include <CLI/CLI.hpp>
#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>

#include "cli/commands.h"
#include "cli/kv_type_flag.h"
#include "cli/bench_tier_chat.h"
#include "cli/progress.h"
#include "engine/engine.h"
#include "pml/compiled_plan.h"
#include "engine/kv_tiers.h"
#include "common/error.h"
#include "kernels/cpu_count.h"
#include "model/make_model.h"
#include "model/model.h"
#include "pml/pml.h"
#include "tier/tier_bench.h"
#include "tokenizer/tokenizer.h"

namespace pc::cli {

namespace {

namespace fs = std::filesystem;

struct TiersArgs {
  KvType kv_type = KvType::kF16;  // --kv-type
  std::string model;
  std::string shape = "smollm-135m";
  int length = 2048;
  int threads = default_thread_count();
  std::string dir;
  std::string redis_url;
  bool throughput = true;
  int throughput_tokens = 4096;
  std::string json_out;
  bool chat = false;  // only the chat section (bench_tier_chat.h)
  TierChatOptions chat_opt;
};

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

// Words until the tokenizer counts n tokens.
std::string words(const Tokenizer& tok, int n, uint32_t seed) {
  static const char* w[] = {"river", "stone", "light", "garden", "window", "paper", "silver", "morning",
                            "engine", "forest", "cloud", "letter", "market", "bridge", "winter", "candle"};
  std::mt19937 rng(seed);
  std::string text;
  while (int(tok.encode(text, false, false).size()) < n)
    for (int i = 0; i < 32; ++i) text += std::string(text.empty() ? "" : " ") + w[rng() % 16];
  return text;
}

std::string make_scratch(const std::string& dir) {
  if (!dir.empty()) {
    fs::create_directories(dir);
    return dir;
  }
  std::string tmpl = (fs::temp_directory_path() / "promptcache-bench-tiers-XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) throw Error("cannot create a scratch directory under " + fs::temp_directory_path().string());
  return tmpl;
}

int run_tiers(const TiersArgs& a) {
  const std::string scratch = make_scratch(a.dir);
  nlohmann::json out = {{"bench", "tiers"}};
  if (a.chat) {
    TierChatOptions co = a.chat_opt;
    co.model = a.model;
    co.scratch = scratch;
    co.redis_url = a.redis_url;
    co.threads = a.threads;
    out["chat"] = run_tier_chat(co);
    if (a.dir.empty()) fs::remove_all(scratch);
    if (!a.json_out.empty()) std::ofstream(a.json_out) << out.dump(2) << "\n";
    return 0;
  }
  // Steps: the throughput table, then each TTFT row (full, memory, disk, Redis).
  Progress progress("tiers", (a.throughput ? 1 : 0) + 3 + (a.redis_url.empty() ? 0 : 1));
  int64_t step = 0;
  auto running = [&](const std::string& what) { progress.set(step++, what); };
  if (a.throughput) {
    std::printf("== restoring one entry from each tier\n");
    std::fflush(stdout);
    running("restore throughput");
    TierBenchOptions to;
    to.n_tokens = a.throughput_tokens;
    to.dir = scratch + "/throughput";
    to.redis_url = a.redis_url;
    fs::create_directories(to.dir);
    const auto rows = run_tier_bench(to);
    progress.clear();
    std::printf("%s\n", format_tier_bench(to, rows).c_str());
    for (const auto& r : rows)
      out["throughput"].push_back({{"path", r.name}, {"bytes", r.bytes}, {"ms", r.seconds * 1e3},
                                   {"gb_per_s", r.gb_per_s()}});
    fs::remove_all(to.dir);
  }

  std::string model_path = a.model;
  if (model_path.empty()) {
    model_path = scratch + "/" + a.shape + "-q8_0.gguf";
    if (!fs::exists(model_path)) {
      MakeModelOptions mo;
      mo.shape = a.shape;
      progress.clear();
      std::printf("generating a %s-shape Q8_0 model in %s\n", a.shape.c_str(), model_path.c_str());
      Progress making("make-model", 0);
      mo.on_progress = making.reporter();
      make_random_model(mo, model_path);
    }
  }
  auto model = Model::load(model_path);
  const Tokenizer& tok = model->tokenizer();
  const pml::Encoder enc = pml::Encoder::for_model(tok, model->file());
  const std::string schema_text = "<schema name=\"doc\"><system>Answer from the document.</system><module name=\"doc\">" +
                                  words(tok, a.length, 1) + "</module></schema>";
  const pml::SchemaLayout layout = pml::compile_schema(schema_text, enc, "bench.pml");
  const pml::PromptPlan plan = pml::plan_prompt(
      "<prompt schema=\"doc\"><doc/><user>" + words(tok, 40, 2) + "?</user><assistant/></prompt>", layout, enc,
      "prompt.pml");
  GenerateRequest req;
  req.max_tokens = 1;
  req.stop_at_eog = false;
  const auto& c = model->config();
  EngineOptions eo;
  eo.threads = a.threads;
  eo.kv_type = a.kv_type;
  eo.kv_memory_bytes = int64_t(c.n_layer) * c.n_kv_head * c.head_dim * 4 * (3 * int64_t(a.length) + 1024) + (64 << 20);
  auto engine_with = [&](const std::string& disk, const std::string& redis) {
    EngineOptions o = eo;
    o.tiers.disk_dir = disk;
    o.tiers.redis_url = redis;
    return std::make_unique<Engine>(*model, o);
  };
  progress.clear();
  std::printf("== TTFT of a prompt importing one %d-token document module (+ ~50 tokens)\nmodel: %s\n%s\n",
              a.length, model_path.c_str(), c.describe().c_str());
  const std::string disk_dir = scratch + "/disk-cache";
  fs::remove_all(disk_dir);

  struct Row {
    std::string where;
    double ms;
    int64_t cached;
  };
  std::vector<Row> rows;
  running("full recomputation");
  {  // full recomputation: the same assembled tokens, nothing cached
    EngineOptions o = eo;
    o.prefix_cache = false;
    Engine cold(*model, o);
    GenerateRequest full = req;
    full.prompt = pml::plan_tokens(plan, layout);
    const auto t0 = std::chrono::steady_clock::now();
    cold.generate(full);
    rows.push_back({"full recomputation", ms_since(t0), 0});
  }
  running("module in memory");
  {  // memory: encoded (and written through) once, then hit
    auto e = engine_with(disk_dir, a.redis_url);
    e->generate_plan(pml::kv_plan(plan, layout), req);
    e->flush_tiers();
    const auto t0 = std::chrono::steady_clock::now();
    const GenerateResult r = e->generate_plan(pml::kv_plan(plan, layout), req);
    rows.push_back({"module in memory", ms_since(t0), r.n_cached});
  }
  running("module on disk");
  {  // disk: a fresh engine (a restart) with only the disk tier
    auto e = engine_with(disk_dir, "");
    const auto t0 = std::chrono::steady_clock::now();
    const GenerateResult r = e->generate_plan(pml::kv_plan(plan, layout), req);
    rows.push_back({"module on disk", ms_since(t0), r.n_promoted});
  }
  if (!a.redis_url.empty()) {  // Redis: a fresh engine (another server) with only Redis
    running("module in Redis");
    auto e = engine_with("", a.redis_url);
    const auto t0 = std::chrono::steady_clock::now();
    const GenerateResult r = e->generate_plan(pml::kv_plan(plan, layout), req);
    rows.push_back({"module in Redis", ms_since(t0), r.n_promoted});
    if (r.n_promoted == 0) std::printf("note: Redis at %s held nothing (unreachable?)\n", a.redis_url.c_str());
  }
  progress.done();
  std::printf("%-20s %10s %14s %10s\n", "module", "TTFT ms", "tokens reused", "speed-up");
  for (const Row& r : rows) {
    std::printf("%-20s %10.1f %14lld %9.1fx\n", r.where.c_str(), r.ms, (long long)r.cached, rows[0].ms / r.ms);
    out["ttft"].push_back({{"where", r.where}, {"ms", r.ms}, {"tokens_reused", r.cached},
                           {"speedup", rows[0].ms / r.ms}});
  }
  if (a.redis_url.empty()) std::printf("(no --redis URL: Redis rows skipped)\n");
  fs::remove_all(disk_dir);
  if (a.dir.empty()) fs::remove_all(scratch);  // ours: the generated model goes too
  if (!a.json_out.empty()) std::ofstream(a.json_out) << out.dump(2) << "\n";
  return 0;
}

}  // namespace

Run add_bench_tiers(CLI::App& bench) {
  auto a = std::make_shared<TiersArgs>();
  CLI::App* p = bench.add_subcommand(
      "tiers", "KV tiers: restore throughput of each tier, and TTFT of a module-cached prompt with the "
               "module in memory, on disk or in Redis vs full recomputation");
  p->add_option("-m,--model", a->model, "GGUF model file (default: generate one of --shape)")
      ->check(CLI::ExistingFile);
  p->add_option("--shape", a->shape, "Shape of the generated model")->capture_default_str();
  p->add_option("--length", a->length, "Tokens of the document module")->capture_default_str()->check(CLI::Range(16, 1 << 20));
  add_kv_type_option(*p, &a->kv_type);
  p->add_option("-t,--threads", a->threads, kThreadsHelp)->capture_default_str()->check(CLI::Range(1, 256));
  p->add_option("--dir", a->dir, "Scratch directory (default: a new one under $TMPDIR)");
  p->add_option("--redis", a->redis_url, "Redis URL for the Redis rows (e.g. redis://127.0.0.1:6379/0)");
  p->add_flag("!--no-throughput", a->throughput, "Skip the restore-throughput table");
  p->add_option("--throughput-tokens", a->throughput_tokens,
                "Tokens of the throughput entry (tinyllama-1.1b KV shape)")
      ->capture_default_str()->check(CLI::Range(1, 1 << 20));
  p->add_option("--json", a->json_out, kBenchJsonHelp);
  p->add_flag("--chat", a->chat,
              "Instead: a long chat through --disk-cache (and --redis): bytes each tier wrote vs the final KV, "
              "and reuse of the whole history by a restarted and a second server");
  p->add_option("--turns", a->chat_opt.turns, "Chat turns (--chat)")->capture_default_str()->check(CLI::Range(1, 100000));
  p->add_option("--turn-tokens", a->chat_opt.turn_tokens, "User tokens each turn adds (--chat)")
      ->capture_default_str()->check(CLI::Range(1, 1 << 20));
  p->add_option("--reply-tokens", a->chat_opt.reply_tokens, "Tokens generated each turn (--chat)")
      ->capture_default_str()->check(CLI::Range(1, 4096));
  p->add_option("--chat-shape", a->chat_opt.shape, "Shape of the generated model (--chat)")->capture_default_str();
  return [a] { return run_tiers(*a); };
}

}  // namespace pc::cli
