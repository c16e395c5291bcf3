// `promptcache bench cluster`: several servers and one Redis, as docs/deploy.md sets
// them up, under one multi-session chat trace; and what a promotion from Redis costs
// next to recomputing the same history.
//
// Part 1, the trace. --sessions chat sessions of --turns turns each (a shared system
// prompt, then the session's own questions; every turn resends the whole history, the
// replies included), run by --clients concurrent clients, each working through its
// sessions turn by turn. The same trace runs against:
//
//   1 server (ideal)          one server: every turn finds its history; its computed
//                             tokens are the ideal the others are measured against
//   round-robin               --servers servers, each request to the next server
//   round-robin + Redis       the same, the servers sharing one Redis
//   affinity                  a session always on one server (session index mod servers:
//                             what HAProxy's consistent hash on the session key gives,
//                             without the balancer in the measurement)
//   affinity + Redis
//
// The servers run in this process (port 0 on loopback, --threads each); the client
// routes requests itself. Redis: --redis URL, else a redis-server started here on a free
// loopback port (without persistence) and stopped at the end; neither: Redis rows are
// skipped. Each run uses its own Redis database, flushed first.
//
// Part 2, promotion. For each --history length, a fresh engine computes the history
// (recomputation), an engine with the Redis tier computes it and writes it through,
// and a fresh engine with only the Redis tier answers the same prompt by promoting
// the entry (another server's first turn of a moved session). Model: --promotion-model,
// else a generated --shape model with a context of 32K tokens.
#include <CLI/CLI.hpp>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>
#include <vector>

#include <httplib.h>

#include "cli/chat_stream.h"
#include "cli/commands.h"
#include "cli/kv_type_flag.h"
#include "cli/units.h"
#include "engine/engine.h"
#include "common/error.h"
#include "kernels/cpu_count.h"
#include "model/make_model.h"
#include "model/model.h"
#include "server/server.h"
#include "tier/redis_tier.h"

namespace pc::cli {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

struct ClusterArgs {
  KvType kv_type = KvType::kF16;  // --kv-type
  std::string model;  // "" = a generated 'small' model in dir
  std::string dir;
  std::string chat_template_file;
  std::string redis_url;
  int servers = 3;
  int sessions = 12;
  int turns = 4;
  int clients = 4;
  int system_prompts = 2;
  int system_words = 120;
  int max_tokens = 12;
  int threads = 1;
  std::string kv_memory = "256MiB";
  std::vector<int> history{1024, 4096, 16384};
  std::string promotion_model;
  std::string shape = "small";
  int promotion_threads = default_thread_count();
  bool trace = true;
  bool promotion = true;
  std::string json_out;
};

int free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = -1;
  if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0) ::close(fd);
  return port;
}

// A redis-server child on a free loopback port, without persistence; killed with us.
class LocalRedis {
 public:
  LocalRedis() {
    for (const char* p : {"/usr/bin/redis-server", "/usr/local/bin/redis-server", "/usr/sbin/redis-server"})
      if (::access(p, X_OK) == 0) bin_ = p;
    if (bin_.empty() || (port_ = free_loopback_port()) <= 0) return;
    const std::string port = std::to_string(port_);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (!std::freopen("/dev/null", "w", stdout)) ::_exit(127);
      ::execl(bin_.c_str(), bin_.c_str(), "--port", port.c_str(), "--bind", "127.0.0.1", "--save", "",
              "--appendonly", "no", "--daemonize", "no", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    for (int i = 0; i < 200; ++i) {  // up to 10 s to accept connections
      timeval tv{0, 200000};
      redisContext* c = redisConnectWithTimeout("127.0.0.1", port_, tv);
      const bool ok = c && !c->err;
      if (c) redisFree(c);
      if (ok) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    stop();
  }
  ~LocalRedis() { stop(); }
  bool running() const { return pid_ > 0; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }

 private:
  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  std::string bin_;
  int port_ = 0;
  pid_t pid_ = -1;
};

// `base` (redis://host:port[/db]) with database `db`, flushed.
std::string fresh_db(const std::string& base, int db) {
  RedisUrl u = parse_redis_url(base);
  timeval tv{1, 0};
  redisContext* c = redisConnectWithTimeout(u.host.c_str(), u.port, tv);
  if (!c || c->err) {
    if (c) redisFree(c);
    throw Error("bench cluster: cannot reach Redis at " + base);
  }
  auto run = [&](const std::string& cmd) {
    auto* r = static_cast<redisReply*>(redisCommand(c, cmd.c_str()));
    const bool ok = r && r->type != REDIS_REPLY_ERROR;
    if (r) freeReplyObject(r);
    return ok;
  };
  const bool ok = (u.password.empty() || run("AUTH " + u.password)) && run("SELECT " + std::to_string(db)) &&
                  run("FLUSHDB");
  redisFree(c);
  if (!ok) throw Error("bench cluster: cannot flush database " + std::to_string(db) + " of " + base);
  std::string url = "redis://" + (u.password.empty() ? "" : ":" + u.password + "@") + u.host + ":" +
                    std::to_string(u.port) + "/" + std::to_string(db);
  return url;
}

// Deterministic text of `words` words, different for each k.
std::string filler(int k, int words) {
  static const char* vocab[] = {"ledger", "harbor", "invoice", "shipment", "customs", "pallet", "crane",
                                "berth", "manifest", "freight", "cargo", "tariff", "vessel", "quay"};
  std::string s = "Port operations handbook, part " + std::to_string(k) + ".";
  uint64_t x = 0x9E3779B97F4A7C15ull * uint64_t(k + 7);
  for (int i = 0; i < words; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    s += (i % 10 == 0 ? ". " : " ");
    s += vocab[x % (sizeof vocab / sizeof *vocab)];
  }
  return s + ".";
}

struct TraceResult {
  std::string label;
  int servers = 0;
  bool redis = false, affinity = false;
  int64_t requests = 0, errors = 0, prompt_tokens = 0, cached_tokens = 0;
  int64_t replies_resent = 0, replies_spliced = 0;  // assistant messages sent back; spliced as generated
  double elapsed_s = 0;
  std::vector<double> ttft_ms;
  std::string first_error;
  int64_t computed() const { return prompt_tokens - cached_tokens; }
  double percentile(double p) const {
    if (ttft_ms.empty()) return 0;
    std::vector<double> v = ttft_ms;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, size_t(p * double(v.size() - 1) + 0.5))];
  }
};

// One streamed chat turn to `port`; returns the reply text (empty on an error, which is
// counted in r).
std::string chat_turn(int port, const json& messages, int max_tokens, TraceResult& r, std::mutex& mu) {
  httplib::Client cli("127.0.0.1", port);
  cli.set_read_timeout(600);
  const StreamedChat c =
      stream_chat(cli, json{{"messages", messages}, {"max_tokens", max_tokens}, {"temperature", 0},
                            {"ignore_eos", true}, {"stream", true}, {"stream_options", {{"include_usage", true}}}}
                           .dump());
  std::lock_guard lk(mu);
  if (!c.error.empty()) {
    ++r.errors;
    if (r.first_error.empty()) r.first_error = c.error;
    return "";
  }
  ++r.requests;
  r.prompt_tokens += c.usage.value("prompt_tokens", 0);
  r.cached_tokens += c.usage.value("prompt_tokens_details", json::object()).value("cached_tokens", 0);
  for (const json& m : messages) r.replies_resent += m.value("role", "") == "assistant";
  if (c.promptcache.is_object()) r.replies_spliced += c.promptcache.value("spliced_replies", int64_t(0));
  if (c.ttft_ms >= 0) r.ttft_ms.push_back(c.ttft_ms);
  return c.text;
}

TraceResult run_trace(const ClusterArgs& a, const std::string& model, const std::string& label, int n_servers,
                      const std::string& redis_url, bool affinity) {
  TraceResult r;
  r.label = label;
  r.servers = n_servers;
  r.redis = !redis_url.empty();
  r.affinity = affinity;
  std::vector<std::unique_ptr<server::Server>> servers;
  std::vector<std::thread> listeners;
  std::vector<int> ports;
  for (int i = 0; i < n_servers; ++i) {
    server::ServerOptions o;
    o.log_level = "warn";  // the bench prints its own figures, not a line per request
    o.model_path = model;
    o.port = 0;
    o.threads = a.threads;
    o.kv_type = a.kv_type;
    o.parallel = std::max(1, a.clients);
    o.kv_memory_bytes = parse_bytes(a.kv_memory);
    o.chat_template_file = a.chat_template_file;
    o.chat_template_name = "chatml";  // generated models carry no chat template
    o.tiers.redis_url = redis_url;
    servers.push_back(std::make_unique<server::Server>(o));
    ports.push_back(servers.back()->bind());
  }
  for (auto& s : servers) listeners.emplace_back([srv = s.get()] { srv->listen(); });

  std::vector<std::string> systems;
  for (int k = 0; k < a.system_prompts; ++k) systems.push_back(filler(k, a.system_words));
  std::mutex mu;
  std::atomic<int64_t> next{0};
  const Clock::time_point start = Clock::now();
  std::vector<std::thread> clients;
  for (int c = 0; c < a.clients; ++c) {
    clients.emplace_back([&, c] {
      std::vector<int> mine;
      for (int s = c; s < a.sessions; s += a.clients) mine.push_back(s);
      std::vector<json> history(mine.size());
      for (size_t k = 0; k < mine.size(); ++k)
        history[k] = json::array({{{"role", "system"}, {"content", systems[size_t(mine[k]) % systems.size()]}}});
      for (int turn = 0; turn < a.turns; ++turn) {
        for (size_t k = 0; k < mine.size(); ++k) {
          const int s = mine[k];
          json& h = history[k];
          h.push_back({{"role", "user"},
                       {"content", "Session " + std::to_string(s) + ", question " + std::to_string(turn) +
                                       ": which berth takes the next vessel, and why?"}});
          const int to = affinity ? s % n_servers : int(next.fetch_add(1) % n_servers);
          const std::string reply = chat_turn(ports[size_t(to)], h, a.max_tokens, r, mu);
          h.push_back({{"role", "assistant"}, {"content", reply}});
        }
      }
    });
  }
  for (std::thread& t : clients) t.join();
  r.elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
  for (auto& s : servers) s->stop();
  for (std::thread& t : listeners) t.join();
  return r;
}

struct PromotionRow {
  int tokens = 0;
  double recompute_ms = 0, promote_ms = 0;
  int64_t promoted = 0;
  double entry_mb = 0;
};

std::vector<PromotionRow> run_promotion(const ClusterArgs& a, const std::string& redis_base, std::string* model_out) {
  std::string path = a.promotion_model;
  int max_len = 0;
  for (int n : a.history) max_len = std::max(max_len, n);
  if (path.empty()) {
    fs::create_directories(a.dir);
    path = (fs::path(a.dir) / (a.shape + "-ctx32k-q8_0.gguf")).string();
    if (!fs::exists(path)) {
      std::fprintf(stderr, "generating a random-weight '%s' model with a 32K context at %s ...\n", a.shape.c_str(),
                   path.c_str());
      MakeModelOptions mo;
      mo.shape = a.shape;
      mo.type = GgmlType::Q8_0;
      mo.context_length = 32768;
      make_random_model(mo, path);
    }
  }
  *model_out = path;
  auto model = Model::load(path);
  const ModelConfig& c = model->config();
  if (c.n_ctx_train > 0 && max_len + 1 > c.n_ctx_train)
    throw Error("bench cluster: --history " + std::to_string(max_len) + " exceeds the model's context (" +
                std::to_string(c.n_ctx_train) + ")");
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> pick(3, int32_t(c.n_vocab) - 1);
  std::vector<PromotionRow> rows;
  for (int n : a.history) {
    EngineOptions eo;
    eo.threads = a.promotion_threads;
    eo.kv_type = a.kv_type;
    const KvShape shape{int(c.n_layer), int(c.n_kv_head), int(c.head_dim), eo.page_size};
    eo.kv_memory_bytes = int64_t(shape.bytes_per_token()) * (2 * int64_t(n) + 256);
    GenerateRequest req;
    for (int i = 0; i < n; ++i) req.prompt.push_back(pick(rng));
    req.max_tokens = 1;
    req.stop_at_eog = false;
    PromotionRow row;
    row.tokens = n;
    row.entry_mb = double(shape.bytes_per_token()) * n / 1e6;
    {
      Engine cold(*model, eo);
      row.recompute_ms = cold.generate(req).ttft_ms;
    }
    EngineOptions with = eo;
    with.tiers.redis_url = fresh_db(redis_base, 5);
    {
      Engine writer(*model, with);
      writer.generate(req);
      writer.flush_tiers();
    }
    {
      Engine reader(*model, with);  // another server: memory empty, Redis has the history
      const GenerateResult g = reader.generate(req);
      row.promote_ms = g.ttft_ms;
      row.promoted = g.n_promoted;
    }
    std::printf("  %6d tokens: recompute %9.1f ms, promote %8.1f ms (%lld tokens from Redis)\n", n,
                row.recompute_ms, row.promote_ms, (long long)row.promoted);
    std::fflush(stdout);
    rows.push_back(row);
  }
  return rows;
}

std::string default_trace_model(const std::string& dir) {
  fs::create_directories(dir);
  const fs::path path = fs::path(dir) / "small-shape-q8_0.gguf";
  if (!fs::exists(path)) {
    std::fprintf(stderr, "generating a random-weight 'small' model at %s ...\n", path.c_str());
    MakeModelOptions mo;
    mo.shape = "small";
    mo.type = GgmlType::Q8_0;
    make_random_model(mo, path.string());
  }
  return path.string();
}

int run_bench_cluster(const ClusterArgs& a) {
  ::signal(SIGPIPE, SIG_IGN);
  std::unique_ptr<LocalRedis> local;
  std::string redis = a.redis_url;
  if (redis.empty()) {
    local = std::make_unique<LocalRedis>();
    if (local->running()) redis = local->url();
  }
  if (redis.empty()) std::printf("(no --redis and no redis-server found: Redis rows skipped)\n");
  json out = {{"bench", "cluster"}, {"redis", redis.empty() ? json(nullptr) : json(redis)}};
  int errors = 0;
  if (a.trace) {
    const std::string model = a.model.empty() ? default_trace_model(a.dir) : a.model;
    std::printf("bench cluster: %d sessions x %d turns, %d clients, %d system prompts of ~%d words, max_tokens %d\n"
                "model %s, servers in this process, --threads %d each\n\n",
                a.sessions, a.turns, a.clients, a.system_prompts, a.system_words, a.max_tokens, model.c_str(),
                a.threads);
    std::vector<TraceResult> runs;
    runs.push_back(run_trace(a, model, "1 server (ideal)", 1, "", true));
    runs.push_back(run_trace(a, model, "round-robin", a.servers, "", false));
    if (!redis.empty()) runs.push_back(run_trace(a, model, "round-robin + Redis", a.servers, fresh_db(redis, 1), false));
    runs.push_back(run_trace(a, model, "affinity", a.servers, "", true));
    if (!redis.empty()) runs.push_back(run_trace(a, model, "affinity + Redis", a.servers, fresh_db(redis, 2), true));
    const double ideal = double(std::max<int64_t>(1, runs[0].computed()));
    std::printf("%-22s %8s %9s %10s %9s %8s %12s %12s %7s %8s\n", "run", "requests", "computed", "vs ideal",
                "hit rate", "req/s", "TTFT p50 ms", "TTFT p99 ms", "errors", "spliced");
    for (const TraceResult& r : runs) {
      const double hit = r.prompt_tokens ? double(r.cached_tokens) / double(r.prompt_tokens) : 0;
      std::printf("%-22s %8lld %9lld %9.2fx %8.1f%% %8.2f %12.1f %12.1f %7lld %7.1f%%\n", r.label.c_str(),
                  (long long)r.requests, (long long)r.computed(), double(r.computed()) / ideal, 100 * hit,
                  r.elapsed_s > 0 ? double(r.requests) / r.elapsed_s : 0, r.percentile(0.5), r.percentile(0.99),
                  (long long)r.errors,
                  r.replies_resent ? 100.0 * double(r.replies_spliced) / double(r.replies_resent) : 0.0);
      out["trace"].push_back({{"label", r.label}, {"servers", r.servers}, {"redis", r.redis},
                              {"affinity", r.affinity}, {"requests", r.requests}, {"errors", r.errors},
                              {"prompt_tokens", r.prompt_tokens}, {"cached_tokens", r.cached_tokens},
                              {"computed_tokens", r.computed()}, {"computed_vs_ideal", double(r.computed()) / ideal},
                              {"hit_rate", r.prompt_tokens ? double(r.cached_tokens) / double(r.prompt_tokens) : 0.0},
                              {"replies_resent", r.replies_resent}, {"replies_spliced", r.replies_spliced},
                              {"requests_per_s", r.elapsed_s > 0 ? double(r.requests) / r.elapsed_s : 0},
                              {"ttft_p50_ms", r.percentile(0.5)}, {"ttft_p99_ms", r.percentile(0.99)},
                              {"first_error", r.first_error.empty() ? json(nullptr) : json(r.first_error)}});
      if (!r.first_error.empty()) std::printf("  %s: first error: %s\n", r.label.c_str(), r.first_error.c_str());
      errors += int(r.errors);
    }
    out["sessions"] = a.sessions;
    out["turns"] = a.turns;
    out["clients"] = a.clients;
    out["model"] = model;
    std::printf("(spliced: resent replies the server knew the generated ids of; the others were re-tokenized)\n\n");
  }
  if (a.promotion && !a.history.empty() && !redis.empty()) {
    std::printf("promotion from Redis vs recomputation (TTFT of the same prompt, --threads %d):\n",
                a.promotion_threads);
    std::string pmodel;
    const std::vector<PromotionRow> rows = run_promotion(a, redis, &pmodel);
    std::printf("%8s %14s %12s %10s %10s\n", "tokens", "recompute ms", "promote ms", "speed-up", "entry MB");
    for (const PromotionRow& p : rows) {
      std::printf("%8d %14.1f %12.1f %9.1fx %10.1f\n", p.tokens, p.recompute_ms, p.promote_ms,
                  p.promote_ms > 0 ? p.recompute_ms / p.promote_ms : 0, p.entry_mb);
      out["promotion"].push_back({{"tokens", p.tokens}, {"recompute_ms", p.recompute_ms},
                                  {"promote_ms", p.promote_ms}, {"promoted_tokens", p.promoted},
                                  {"speedup", p.promote_ms > 0 ? p.recompute_ms / p.promote_ms : 0},
                                  {"entry_mb", p.entry_mb}});
    }
    out["promotion_model"] = pmodel;
  }
  if (!a.json_out.empty()) std::ofstream(a.json_out) << out.dump(2) << "\n";
  return errors ? 1 : 0;
}

}  // namespace

Run add_bench_cluster(CLI::App& bench) {
  auto a = std::make_shared<ClusterArgs>();
  CLI::App* c = bench.add_subcommand(
      "cluster", "Several servers and one Redis under a multi-session chat trace (round-robin or affinity, with "
                 "or without Redis: computed tokens vs ideal, hit rate, TTFT, requests/s), and the cost of a "
                 "promotion from Redis vs recomputation");
  c->add_option("-m,--model", a->model, "GGUF model for the trace (default: a generated 'small'-shape model)")
      ->check(CLI::ExistingFile);
  const char* home = std::getenv("HOME");
  a->dir = std::string(home ? home : "/tmp") + "/.cache/promptcache";
  c->add_option("--dir", a->dir, "Where generated models are kept")->capture_default_str();
  c->add_option("--chat-template-file", a->chat_template_file,
                "Chat template (default: the model's; ChatML for a model without one)")
      ->check(CLI::ExistingFile);
  c->add_option("--redis", a->redis_url, "Redis URL (default: start redis-server on a free loopback port)");
  c->add_option("--servers", a->servers, "Servers in the cluster runs")->capture_default_str()->check(CLI::Range(2, 16));
  c->add_option("--sessions", a->sessions, "Chat sessions")->capture_default_str()->check(CLI::Range(1, 10000));
  c->add_option("--turns", a->turns, "Turns per session")->capture_default_str()->check(CLI::Range(1, 1000));
  c->add_option("--clients", a->clients, "Concurrent clients")->capture_default_str()->check(CLI::Range(1, 1024));
  c->add_option("--system-prompts", a->system_prompts, "Distinct system prompts the sessions share")
      ->capture_default_str()->check(CLI::Range(1, 1000));
  c->add_option("--system-words", a->system_words, "Words per system prompt")
      ->capture_default_str()->check(CLI::Range(1, 100000));
  c->add_option("--max-tokens", a->max_tokens, "Tokens generated per turn")
      ->capture_default_str()->check(CLI::Range(1, 100000));
  add_kv_type_option(*c, &a->kv_type);
  c->add_option("-t,--threads", a->threads, "Compute threads of each server")
      ->capture_default_str()->check(CLI::Range(1, 256));
  c->add_option("--kv-memory", a->kv_memory, "KV memory of each server")->capture_default_str();
  c->add_flag("!--no-trace", a->trace, "Skip the trace runs");
  c->add_flag("!--no-promotion", a->promotion, "Skip the promotion rows");
  c->add_option("--history", a->history, "History lengths of the promotion rows")
      ->capture_default_str()->delimiter(',')->check(CLI::Range(16, 1 << 20));
  c->add_option("--promotion-model", a->promotion_model,
                "GGUF model for the promotion rows (default: a generated --shape model, 32K context)")
      ->check(CLI::ExistingFile);
  c->add_option("--shape", a->shape, "Shape of the generated promotion model")->capture_default_str();
  c->add_option("--promotion-threads", a->promotion_threads, "Compute threads of the promotion rows")
      ->capture_default_str()->check(CLI::Range(1, 256));
  c->add_option("--json", a->json_out, "Also write the results as JSON to this file");
  return [a] { return run_bench_cluster(*a); };
}

}  // namespace pc::cli
