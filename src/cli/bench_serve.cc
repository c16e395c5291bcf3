// `promptcache bench serve`: many concurrent streaming chat clients against the
// HTTP server, once with the prefix cache and once without.
//
// Every client loops for --seconds: a chat request whose system prompt is one of
// a few long shared ones and whose user turn is its own, streamed, with
// ignore_eos so every reply has max_tokens tokens. The server runs in this
// process (port 0 on loopback), or is the one at --url. Reported per run:
// requests/s and generated tokens/s over the run (until the last reply ended),
// time to first token (first content delta) p50/p99, errors, and prompt tokens
// served from the cache.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include <httplib.h>

#include "cli/chat_stream.h"
#include "cli/commands.h"
#include "cli/kv_type_flag.h"
#include "cli/progress.h"
#include "cli/units.h"
#include "common/error.h"
#include "kernels/cpu_count.h"
#include "model/make_model.h"
#include "server/server.h"

namespace pc::cli {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

struct BenchServeArgs {
  KvType kv_type = KvType::kF16;  // --kv-type
  std::string model;               // "" = a generated model in `dir`
  std::string dir;
  std::string url;                 // a running server instead of one in this process
  std::string chat_template_file;
  int clients = 32;
  double seconds = 25;             // per run
  int system_prompts = 4;
  int system_words = 400;
  int max_tokens = 16;
  int threads = default_thread_count();
  int parallel = 16;
  std::string kv_memory = "512MiB";
  std::string json_out;            // "" = none, "-" = stdout instead of the table
};

struct RunResult {
  std::string label;
  bool prefix_cache = true;
  int64_t requests = 0, errors = 0;
  int64_t prompt_tokens = 0, cached_tokens = 0, generated_tokens = 0;
  double elapsed_s = 0;
  std::vector<double> ttft_ms;
  std::string first_error;

  double percentile(double p) const {
    if (ttft_ms.empty()) return 0;
    std::vector<double> v = ttft_ms;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, size_t(p * double(v.size() - 1) + 0.5))];
  }
  json to_json() const {
    return {{"label", label},
            {"prefix_cache", prefix_cache},
            {"requests", requests},
            {"errors", errors},
            {"elapsed_s", elapsed_s},
            {"requests_per_s", elapsed_s > 0 ? requests / elapsed_s : 0},
            {"generated_tokens_per_s", elapsed_s > 0 ? generated_tokens / elapsed_s : 0},
            {"ttft_p50_ms", percentile(0.5)},
            {"ttft_p99_ms", percentile(0.99)},
            {"prompt_tokens", prompt_tokens},
            {"cached_tokens", cached_tokens},
            {"generated_tokens", generated_tokens},
            {"first_error", first_error.empty() ? json(nullptr) : json(first_error)}};
  }
};

// A deterministic system prompt of about `words` words; prompts differ from the
// first word on, so they share nothing but the template's prefix.
std::string system_prompt(int k, int words) {
  static const char* vocab[] = {"router", "signal", "restart", "cable", "light", "blinks", "red",
                                "green", "firmware", "update", "network", "customer", "ticket",
                                "reset", "button", "power", "manual", "warranty", "model", "port"};
  std::string s = "Support desk notes, volume " + std::to_string(k) + ".";
  uint64_t x = 0x9E3779B97F4A7C15ull * uint64_t(k + 1);
  for (int i = 0; i < words; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    s += (i % 12 == 0 ? ". " : " ");
    s += vocab[x % (sizeof vocab / sizeof *vocab)];
  }
  return s + ".";
}

// One streamed chat request; adds its numbers to `r` (under `mu`).
void one_request(httplib::Client& cli, const std::string& body, RunResult& r, std::mutex& mu) {
  const StreamedChat c = stream_chat(cli, body);
  std::lock_guard lk(mu);
  if (!c.error.empty()) {
    ++r.errors;
    if (r.first_error.empty()) r.first_error = c.error;
    return;
  }
  ++r.requests;
  r.prompt_tokens += c.usage.value("prompt_tokens", 0);
  r.generated_tokens += c.usage.value("completion_tokens", 0);
  r.cached_tokens += c.usage.value("prompt_tokens_details", json::object()).value("cached_tokens", 0);
  if (c.ttft_ms >= 0) r.ttft_ms.push_back(c.ttft_ms);
}

RunResult run_clients(const BenchServeArgs& a, const std::string& url, const std::string& label,
                      bool prefix_cache) {
  RunResult r;
  r.label = label;
  r.prefix_cache = prefix_cache;
  std::vector<std::string> systems;
  for (int k = 0; k < a.system_prompts; ++k) systems.push_back(system_prompt(k, a.system_words));
  std::mutex mu;
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline = start + std::chrono::duration_cast<Clock::duration>(
                                                 std::chrono::duration<double>(a.seconds));
  std::vector<std::thread> threads;
  for (int c = 0; c < a.clients; ++c) {
    threads.emplace_back([&, c] {
      httplib::Client cli(url);
      cli.set_read_timeout(600);
      cli.set_keep_alive(true);  // as API clients do: one connection per client
      for (int i = 0; Clock::now() < deadline; ++i) {
        const json body = {
            {"messages", {{{"role", "system"}, {"content", systems[(c + i) % systems.size()]}},
                          {{"role", "user"},
                           {"content", "Client " + std::to_string(c) + ", question " +
                                           std::to_string(i) + ": my router blinks red, what now?"}}}},
            {"max_tokens", a.max_tokens},
            {"temperature", 0},
            {"ignore_eos", true},
            {"stream", true},
            {"stream_options", {{"include_usage", true}}}};
        one_request(cli, body.dump(), r, mu);
      }
    });
  }
  Progress progress(label, 0);
  while (progress.shown() && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    int64_t done;
    {
      std::lock_guard lk(mu);
      done = r.requests + r.errors;
    }
    progress.set(done, "requests");
  }
  for (std::thread& t : threads) t.join();
  progress.done();
  r.elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
  return r;
}

// A run against a server started here with the prefix cache on or off.
RunResult run_in_process(const BenchServeArgs& a, const std::string& model, bool prefix_cache) {
  server::ServerOptions o;
  o.log_level = "warn";  // the bench prints its own figures, not a line per request
  o.model_path = model;
  o.port = 0;
  o.parallel = a.parallel;
  o.queue = std::max(64, a.clients);
  o.threads = a.threads;
  o.kv_type = a.kv_type;
  o.kv_memory_bytes = parse_bytes(a.kv_memory);
  o.prefix_cache = prefix_cache;
  o.chat_template_file = a.chat_template_file;
  o.chat_template_name = "chatml";  // generated models carry no chat template
  server::Server srv(o);
  const int port = srv.bind();
  std::thread listener([&srv] { srv.listen(); });
  RunResult r = run_clients(a, "http://127.0.0.1:" + std::to_string(port),
                            prefix_cache ? "prefix cache on" : "prefix cache off", prefix_cache);
  srv.stop();
  listener.join();
  return r;
}

// The generated default: "small" shape (256 wide, 2 blocks), built-in byte vocabulary.
std::string default_model(const std::string& dir) {
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  const fs::path path = fs::path(dir) / "small-shape-q8_0.gguf";
  if (!fs::exists(path)) {
    std::fprintf(stderr, "generating a random-weight 'small' model at %s ...\n", path.c_str());
    MakeModelOptions mo;
    mo.shape = "small";
    mo.type = GgmlType::Q8_0;
    Progress progress("make-model", 0);
    mo.on_progress = progress.reporter();
    make_random_model(mo, path.string());
  }
  return path.string();
}

void print_table(const BenchServeArgs& a, const std::string& target, const std::vector<RunResult>& runs) {
  std::printf("bench serve: %s, %d streaming chat clients x %.0f s, %d system prompts of ~%d words, "
              "max_tokens %d\n\n",
              target.c_str(), a.clients, a.seconds, a.system_prompts, a.system_words, a.max_tokens);
  std::printf("%-18s %9s %7s %8s %11s %13s %13s %8s\n", "run", "requests", "errors", "req/s",
              "gen tok/s", "TTFT p50 ms", "TTFT p99 ms", "cached");
  for (const RunResult& r : runs) {
    const double cached = r.prompt_tokens ? 100.0 * double(r.cached_tokens) / double(r.prompt_tokens) : 0;
    std::printf("%-18s %9lld %7lld %8.2f %11.1f %13.1f %13.1f %7.1f%%\n", r.label.c_str(),
                (long long)r.requests, (long long)r.errors, r.elapsed_s > 0 ? r.requests / r.elapsed_s : 0,
                r.elapsed_s > 0 ? r.generated_tokens / r.elapsed_s : 0, r.percentile(0.5),
                r.percentile(0.99), cached);
  }
  for (const RunResult& r : runs)
    if (!r.first_error.empty()) std::printf("%s: first error: %s\n", r.label.c_str(), r.first_error.c_str());
}

int run_bench_serve(const BenchServeArgs& a) {
  if (a.clients < 1) throw Error("--clients must be at least 1");
  if (a.system_prompts < 1) throw Error("--system-prompts must be at least 1");
  std::signal(SIGPIPE, SIG_IGN);  // a client or the server writing to a closed socket
  std::vector<RunResult> runs;
  std::string target;
  if (!a.url.empty()) {
    target = a.url;
    runs.push_back(run_clients(a, a.url, "server", true));
  } else {
    const std::string model = a.model.empty() ? default_model(a.dir) : a.model;
    target = model;
    runs.push_back(run_in_process(a, model, true));
    runs.push_back(run_in_process(a, model, false));
  }
  json out = {{"bench", "serve"}, {"target", target}, {"clients", a.clients}, {"seconds", a.seconds},
              {"system_prompts", a.system_prompts}, {"system_words", a.system_words},
              {"max_tokens", a.max_tokens}, {"runs", json::array()}};
  for (const RunResult& r : runs) out["runs"].push_back(r.to_json());
  if (a.json_out == "-") {
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    print_table(a, target, runs);
    if (!a.json_out.empty()) std::ofstream(a.json_out) << out.dump(2) << "\n";
  }
  int64_t errors = 0;
  for (const RunResult& r : runs) errors += r.errors;
  return errors ? 1 : 0;
}

}  // namespace

Run add_bench_serve(CLI::App& bench) {
  auto a = std::make_shared<BenchServeArgs>();
  CLI::App* c = bench.add_subcommand(
      "serve", "Concurrent streaming chat clients sharing a few long system prompts, against the "
               "server with the prefix cache on and off: requests/s, tokens/s, TTFT p50/p99, errors");
  c->add_option("-m,--model", a->model,
                "GGUF model (default: a generated 'small'-shape model, made once in --dir)")
      ->check(CLI::ExistingFile);
  const char* home = std::getenv("HOME");
  a->dir = std::string(home ? home : "/tmp") + "/.cache/promptcache";
  c->add_option("--dir", a->dir, "Where the generated model is kept")->capture_default_str();
  c->add_option("--url", a->url, "Benchmark the server at this URL (one run, as it is configured)");
  c->add_option("--chat-template-file", a->chat_template_file,
                "Chat template (default: the model's; ChatML for a model without one)")
      ->check(CLI::ExistingFile);
  c->add_option("--clients", a->clients, "Concurrent clients")->capture_default_str()->check(CLI::Range(1, 4096));
  c->add_option("--seconds", a->seconds, "Duration of each run (requests under way then finish)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  c->add_option("--system-prompts", a->system_prompts, "Distinct shared system prompts")
      ->capture_default_str()->check(CLI::Range(1, 1000));
  c->add_option("--system-words", a->system_words, "Words per system prompt")
      ->capture_default_str()->check(CLI::Range(1, 100000));
  c->add_option("--max-tokens", a->max_tokens, "Tokens generated per request")
      ->capture_default_str()->check(CLI::Range(1, 100000));
  add_kv_type_option(*c, &a->kv_type);
  c->add_option("-t,--threads", a->threads, kThreadsHelp)->capture_default_str()->check(CLI::Range(1, 256));
  c->add_option("--parallel", a->parallel, "Server sequences at once")->capture_default_str()->check(CLI::Range(1, 4096));
  c->add_option("--kv-memory", a->kv_memory, "Server KV cache memory")->capture_default_str();
  c->add_option("--json", a->json_out, std::string(kBenchJsonHelp) + "; '-': to stdout, instead of the table");
  return [a] { return run_bench_serve(*a); };
}

}  // namespace pc::cli
