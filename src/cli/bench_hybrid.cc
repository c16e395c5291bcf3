// `promptcache bench hybrid`: one chat session replayed on a hybrid (Gated DeltaNet)
// model and on an attention-only model of the same size, over the HTTP API, with the
// Qwen3.5 template, which drops an assistant turn's reasoning once a user message
// follows it — so every turn re-renders the previous reply and diverges from what was
// cached inside the history, never at its end.
//
// Turn t sends: a system prompt (~300 words), 4 tools, then for each earlier turn a
// user message (~80 words) and the assistant's answer with its reasoning (~60 + 40
// words), then the new user message. Per turn and model: prompt tokens and the tokens
// the server computed (prompt − cached). The hybrid model resumes from recurrent-state
// snapshots (engine/state_snapshots.h); the attention model from any token. The
// whole-prompt reprocess (what an engine with no snapshot at the divergence does) is
// the prompt itself. At the end: the snapshots the hybrid server holds and their bytes
// (/v1/cache/stats), per session.
//
// The models are random-weight `small`-shape files (n_embd 256, 2 blocks: a DeltaNet
// block and a full-attention block for qwen35) with the Qwen3.5 vocabulary, made once
// in --dir.
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include <httplib.h>

#include "cli/chat_stream.h"
#include "cli/commands.h"
#include "cli/kv_type_flag.h"
#include "cli/in_process_server.h"
#include "cli/units.h"
#include "common/error.h"
#include "kernels/cpu_count.h"
#include "model/make_model.h"
#include "server/server.h"

namespace pc::cli {

namespace {

using json = nlohmann::json;

struct BenchHybridArgs {
  KvType kv_type = KvType::kF16;  // --kv-type
  std::string dir;
  std::string shape = "small";
  std::string vocab = "../shared/vocab/ggml-vocab-qwen35.gguf";
  std::string template_file = "../shared/templates-2026/Qwen-Qwen3.5-4B.jinja";
  int turns = 10;
  int max_tokens = 4;
  int threads = default_thread_count();
  std::string kv_memory = "1GiB";
};

std::string words(uint64_t seed, int n) {
  static const char* w[] = {"the", "router", "signal", "customer", "reports", "that", "cable", "light",
                            "blinks", "after", "firmware", "update", "network", "ticket", "reset", "button",
                            "power", "manual", "warranty", "model", "port", "office", "engineer", "checked"};
  std::string s;
  uint64_t x = 0x9E3779B97F4A7C15ull * (seed + 1);
  for (int i = 0; i < n; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    if (i) s += ' ';
    s += w[x % (sizeof(w) / sizeof(w[0]))];
  }
  return s;
}

std::string model_file(const BenchHybridArgs& a, const std::string& arch) {
  namespace fs = std::filesystem;
  fs::create_directories(a.dir);
  const fs::path path = fs::path(a.dir) / ("hybrid-bench-" + a.shape + "-" + arch + ".gguf");
  if (!fs::exists(path)) {
    MakeModelOptions mo;
    mo.shape = a.shape;
    mo.arch = arch;
    mo.vocab_path = a.vocab;
    mo.context_length = 16384;
    make_random_model(mo, path.string());
  }
  return path.string();
}

json messages_for(int turn) {
  json m = json::array();
  m.push_back({{"role", "system"}, {"content", "You are a support agent. " + words(1, 300)}});
  for (int t = 1; t <= turn; ++t) {
    m.push_back({{"role", "user"}, {"content", words(100 + t, 80)}});
    if (t == turn) break;
    m.push_back({{"role", "assistant"},
                 {"reasoning_content", words(200 + t, 60)},
                 {"content", words(300 + t, 40)}});
  }
  return m;
}

json tools() {
  json out = json::array();
  for (int k = 0; k < 4; ++k)
    out.push_back({{"type", "function"},
                   {"function",
                    {{"name", "tool_" + std::to_string(k)},
                     {"description", words(1000 + k, 24)},
                     {"parameters",
                      {{"type", "object"},
                       {"properties", {{"id", {{"type", "string"}, {"description", words(1100 + k, 6)}}}}},
                       {"required", {"id"}}}}}}});
  return out;
}

int run_bench_hybrid(const BenchHybridArgs& a) {
  if (!std::filesystem::exists(a.template_file)) throw Error("chat template " + a.template_file + " not found");
  std::signal(SIGPIPE, SIG_IGN);
  const char* archs[2] = {"qwen35", "qwen3"};
  std::vector<std::unique_ptr<InProcessServer>> servers;
  for (const char* arch : archs) {
    server::ServerOptions o;
    o.log_level = "warn";
    o.model_path = model_file(a, arch);
    o.port = 0;
    o.threads = a.threads;
    o.kv_type = a.kv_type;
    o.kv_memory_bytes = parse_bytes(a.kv_memory);
    o.chat_template_file = a.template_file;
    servers.push_back(std::make_unique<InProcessServer>(o));
  }
  std::printf("bench hybrid: %d turns, shape %s, Qwen3.5 template (earlier reasoning dropped every turn)\n",
              a.turns, a.shape.c_str());
  std::printf("%5s %8s %16s %16s\n", "turn", "prompt", "qwen35 computed", "qwen3 computed");
  int64_t tot_prompt = 0, tot[2] = {0, 0};
  json rows = json::array();
  for (int t = 1; t <= a.turns; ++t) {
    json body = {{"messages", messages_for(t)}, {"tools", tools()},          {"max_tokens", a.max_tokens},
                 {"temperature", 0},             {"ignore_eos", true},       {"stream", true},
                 {"stream_options", {{"include_usage", true}}}};
    int64_t prompt = 0, computed[2] = {0, 0};
    for (int i = 0; i < 2; ++i) {
      httplib::Client cli("127.0.0.1", servers[i]->port);
      cli.set_read_timeout(600);
      const StreamedChat c = stream_chat(cli, body.dump());
      if (!c.error.empty()) throw Error(std::string("bench hybrid: ") + archs[i] + " turn " + std::to_string(t) + ": " + c.error);
      prompt = c.usage.value("prompt_tokens", int64_t(0));
      const json details = c.usage.value("prompt_tokens_details", json::object());
      computed[i] = prompt - details.value("cached_tokens", int64_t(0));
    }
    std::printf("%5d %8lld %16lld %16lld\n", t, (long long)prompt, (long long)computed[0], (long long)computed[1]);
    if (t > 1) {  // the first turn is a cold prompt for both
      tot_prompt += prompt;
      tot[0] += computed[0];
      tot[1] += computed[1];
    }
    rows.push_back({{"turn", t}, {"prompt", prompt}, {"qwen35_computed", computed[0]}, {"qwen3_computed", computed[1]}});
  }
  httplib::Client cli("127.0.0.1", servers[0]->port);
  auto res = cli.Get("/v1/cache/stats");
  json idx = res && res->status == 200 ? json::parse(res->body).value("index", json::object()) : json::object();
  const int64_t snaps = idx.value("state_snapshots", int64_t(-1)), bytes = idx.value("state_snapshot_bytes", int64_t(-1));
  auto ratio = [](int64_t x, int64_t y) { return y > 0 ? double(x) / double(y) : 0.0; };
  std::printf("\nturns 2..%d: prompt %lld, computed qwen35 %lld, qwen3 %lld\n", a.turns, (long long)tot_prompt,
              (long long)tot[0], (long long)tot[1]);
  std::printf("qwen35 computed / qwen3 computed: %.3f (target <= 1.2)\n", ratio(tot[0], tot[1]));
  std::printf("qwen35 computed / whole-prompt reprocess: %.3f (target <= 0.3)\n", ratio(tot[0], tot_prompt));
  std::printf("snapshots held after the session (1 session): %lld, %s\n", (long long)snaps,
              format_bytes(bytes).c_str());
  return 0;
}

}  // namespace

Run add_bench_hybrid(CLI::App& bench) {
  auto a = std::make_shared<BenchHybridArgs>();
  CLI::App* c = bench.add_subcommand(
      "hybrid", "A chat session on a hybrid (Gated DeltaNet) model and an attention-only one of the same size, "
                "Qwen3.5 template dropping earlier reasoning each turn: tokens computed per turn, snapshots held");
  c->add_option("--dir", a->dir, "Where the generated models are kept")->required();
  c->add_option("--shape", a->shape, "make-model shape of both models")->capture_default_str();
  c->add_option("--vocab", a->vocab, "GGUF whose tokenizer the models carry")->capture_default_str();
  c->add_option("--chat-template-file", a->template_file, "Qwen3.5 chat template")->capture_default_str();
  c->add_option("--turns", a->turns, "Turns of the session")->capture_default_str()->check(CLI::Range(2, 100));
  c->add_option("--max-tokens", a->max_tokens, "Tokens generated per turn")->capture_default_str();
  add_kv_type_option(*c, &a->kv_type);
  c->add_option("-t,--threads", a->threads, "Server threads")->capture_default_str();
  c->add_option("--kv-memory", a->kv_memory, "Server KV memory")->capture_default_str();
  return [a] { return run_bench_hybrid(*a); };
}

}  // namespace pc::cli
