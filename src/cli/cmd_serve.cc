// `promptcache serve`: the OpenAI-compatible HTTP server (src/server).
#include <CLI/CLI.hpp>
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <thread>

#include "cli/commands.h"
#include "cli/kv_type_flag.h"
#include "cli/repack_flag.h"
#include "cli/tier_flags.h"
#include "cli/units.h"
#include "engine/approximate/recompute_policy.h"
#include "common/error.h"
#include "kernels/cpu.h"
#include "server/server.h"
#include "template/builtin_templates.h"

namespace pc::cli {

namespace {

struct ServeArgs {
  server::ServerOptions opt;
  std::string kv_memory = "1GiB";
  std::string reuse_mode = "exact";
  std::string reuse_policy = recompute_policy_name(ReusePolicy{}.policy);
  std::string drain_timeout = "30s";
  std::string header_timeout = "10s";
  std::string body_timeout = "60s";
  std::string max_body_size = "32MiB";
  std::string max_body_memory = "256MiB";
  std::string max_tenant_schema_bytes = "4MiB";
  TierArgs tiers;
  int64_t seed = -1;  // --seed; -1 = a random seed per request
};

// --temp, --top-p, --top-k, --seed, -n/--n-predict: the sampling defaults a request
// gets for the fields it leaves out, as llama-server's flags of the same names.
void add_sampling_defaults(CLI::App& app, ServeArgs& a) {
  server::RequestDefaults& d = a.opt.defaults;
  app.add_option("--temp", d.temperature,
                 "Temperature of a request that sets none (0 = greedy; the request's "
                 "'temperature' overrides it)")
      ->capture_default_str()->check(CLI::Range(0.0, 2.0));
  app.add_option("--top-p", d.top_p, "top_p of a request that sets none (1 = off)")
      ->capture_default_str()
      ->check([](const std::string& v) {
        const double x = std::strtod(v.c_str(), nullptr);
        return x > 0 && x <= 1 ? std::string() : "--top-p must be in (0, 1], got " + v;
      });
  app.add_option("--top-k", d.top_k, "top_k of a request that sets none (0 = off)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--seed", a.seed,
                 "Sampling seed of a request that sets none (-1 = a random seed per request)")
      ->capture_default_str()->check(CLI::Range(int64_t(-1), INT64_MAX));
  app.add_option("-n,--n-predict", d.n_predict,
                 "max_tokens of a request that sets none (-1 = chat: up to the context, "
                 "completions: 16); always capped by the context")
      ->capture_default_str()->check(CLI::Range(-1, INT32_MAX));
}

// SIGTERM and SIGINT write a byte here; the shutdown thread reads it. A pipe, because
// a signal handler may do little more than write(2).
int g_signal_pipe[2] = {-1, -1};
constexpr char kSignalled = 'S';
constexpr char kServerEnded = 'E';  // listen() returned: the shutdown thread leaves

void on_signal(int) {
  const int saved = errno;
  const char c = kSignalled;
  const ssize_t n = ::write(g_signal_pipe[1], &c, 1);
  (void)n;
  errno = saved;
}

// The next byte from the signal pipe within timeout_ms (-1: no limit); 0 when none.
char next_event(int timeout_ms) {
  pollfd p{g_signal_pipe[0], POLLIN, 0};
  const int r = ::poll(&p, 1, timeout_ms);
  if (r <= 0) return 0;
  char c = 0;
  return ::read(g_signal_pipe[0], &c, 1) == 1 ? c : 0;
}

// Shutdown on the first signal: drain (the server answers what it has, /health says
// 503 so balancers move new sessions away), then stop. A second signal, or the drain
// timeout, ends the requests still running at once. Returns true when nothing was cut.
bool shutdown_on_signal(server::Server& srv, int64_t drain_timeout_ms) {
  if (next_event(-1) != kSignalled) return true;
  const auto start = std::chrono::steady_clock::now();
  srv.begin_drain();
  std::fprintf(stderr,
               "promptcache: draining: %lld generation requests in flight; new ones get 503 "
               "(a second signal stops at once, --drain-timeout %.1fs)\n",
               static_cast<long long>(srv.generations_in_flight()), double(drain_timeout_ms) / 1000);
  for (;;) {
    if (srv.generations_in_flight() == 0) {
      srv.stop();
      return true;
    }
    const int64_t waited = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::steady_clock::now() - start).count();
    if (waited >= drain_timeout_ms) {
      std::fprintf(stderr, "promptcache: drain timeout: cancelling %lld generation requests\n",
                   static_cast<long long>(srv.generations_in_flight()));
      break;
    }
    const char c = next_event(int(std::min<int64_t>(50, drain_timeout_ms - waited)));
    if (c == kServerEnded) return true;
    if (c == kSignalled) {
      std::fprintf(stderr, "promptcache: second signal: cancelling %lld generation requests\n",
                   static_cast<long long>(srv.generations_in_flight()));
      break;
    }
  }
  srv.abort();
  return false;
}

int run_serve(ServeArgs& a) {
  a.opt.kv_memory_bytes = parse_bytes(a.kv_memory);
  if (a.seed >= 0) a.opt.defaults.seed = uint64_t(a.seed);
  const int64_t drain_timeout_ms = parse_duration_ms(a.drain_timeout);
  a.opt.header_timeout_ms = parse_duration_ms(a.header_timeout);
  a.opt.body_timeout_ms = parse_duration_ms(a.body_timeout);
  a.opt.max_body_bytes = parse_bytes(a.max_body_size);
  a.opt.body_memory_bytes = parse_bytes(a.max_body_memory);
  a.opt.max_tenant_schema_bytes = parse_bytes(a.max_tenant_schema_bytes);
  if (a.opt.header_timeout_ms <= 0 || a.opt.body_timeout_ms <= 0)
    throw Error("--header-timeout and --body-timeout must be more than 0");
  a.opt.tiers = tier_options(a.tiers);
  a.opt.reuse.mode = a.reuse_mode == "approximate" ? CacheReuse::kApproximate : CacheReuse::kExact;
  a.opt.reuse.policy = *parse_recompute_policy(a.reuse_policy);
  // (A large model takes seconds: say what is being loaded before it is.)
  std::error_code size_error;
  const auto model_bytes = std::filesystem::file_size(a.opt.model_path, size_error);
  if (!size_error)
    std::fprintf(stderr, "promptcache: loading %s (%s)\n", a.opt.model_path.c_str(),
                 format_bytes(int64_t(model_bytes)).c_str());
  std::fflush(stderr);
  server::Server srv(a.opt);
  const int port = srv.bind();
  std::signal(SIGPIPE, SIG_IGN);
  // Non-blocking: a burst of signals can never block the handler on a full pipe.
  if (::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) throw Error("cannot create the signal pipe");
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  bool clean = true;
  std::thread shutdown([&] { clean = shutdown_on_signal(srv, drain_timeout_ms); });
  std::fprintf(stderr, "promptcache: weights (--repack %s): %s\n", Model::weight_layout_name(a.opt.weights),
               srv.model().weight_layouts().c_str());
  std::fprintf(stderr, "promptcache: listening on http://%s:%d (%d threads, kernels %s)\n", a.opt.host.c_str(), port,
               a.opt.threads, cpu_level_name(cpu_level()).c_str());
  std::fflush(stderr);
  const bool ok = srv.listen();
  const char end = kServerEnded;
  if (::write(g_signal_pipe[1], &end, 1) != 1) std::abort();  // the thread would never leave
  shutdown.join();
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  if (!ok) return 1;
  if (clean && srv.draining()) {
    srv.flush_tiers();
    std::fprintf(stderr, "promptcache: drained; tier writes flushed; exiting\n");
  }
  return clean ? 0 : 1;
}

}  // namespace

Run add_serve(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  server::ServerOptions& o = a->opt;
  app.description(
      "Serve the OpenAI-compatible API (/v1/completions, /v1/chat/completions, /v1/models;\n"
      "streaming, logprobs), the PML API (PUT/GET/DELETE /v1/schemas/{name}, GET /v1/schemas,\n"
      "POST /v1/pml/completions), the cache API (/v1/cache/stats, entries, pin, unpin, ttl,\n"
      "evict, namespaces, history, requests, entries/{id}/pin|unpin|evict), /health, /metrics,\n"
      "the /dashboard page, and llama-server's /tokenize, /detokenize, /apply-template and\n"
      "/props, reusing cached KV across requests. See docs/api.md.");
  app.add_option("-m,--model", o.model_path, "GGUF model file")->required()->check(CLI::ExistingFile);
  app.add_flag("--mmap", o.mmap, kMmapHelp);
  add_repack_options(app, &o.weights);
  app.add_option("--alias", o.model_alias, "Model id in the API (default: the file name without .gguf)");
  app.add_flag("--test-hooks", o.test_hooks,
               "For tests only: accept the request field test_forced_reply (the reply text the "
               "model is made to generate); without this flag such requests are 400");
  add_sampling_defaults(app, *a);
  app.add_option("--volatile-rules", o.volatile_rules,
                 "Per-request nonces clients put in prompts, normalised before rendering so sessions "
                 "share their prompt: 'default' (Claude Code's billing header; docs/api.md), 'off', "
                 "or a JSON rules file")
      ->capture_default_str();
  app.add_option_function<std::string>(
         "--reasoning-format",
         [&o](const std::string& v) {
           const auto f = server::parse_reasoning_format(v);
           if (!f) throw CLI::ValidationError("--reasoning-format", "must be none, deepseek or auto, got " + v);
           o.reasoning_format = *f;
         },
         "Thinking in a reply (<think>...</think> of Qwen3, DeepSeek-R1): 'deepseek' or 'auto' "
         "(default) return it apart (message.reasoning_content, Anthropic thinking blocks), "
         "'none' leaves it in the content; a request's reasoning_format overrides it");
  app.add_flag("--any-model", o.any_model,
               "Answer requests for any 'model' name with this model (default: another name is "
               "404 model_not_found)");
  app.add_option("--host", o.host, "Address to listen on")->capture_default_str();
  app.add_option("--port", o.port, "Port to listen on (0 = any free port)")
      ->capture_default_str()->check(CLI::Range(0, 65535));
  app.add_option("-c,--ctx-size", o.ctx_size,
                 "Positions one request (prompt + reply) may use: at most the model's context "
                 "(0 = the model's context; the KV memory may allow fewer)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--parallel", o.parallel, "Sequences generating at once (continuous batching; also -np)")
      ->capture_default_str()->check(CLI::Range(1, 4096));
  app.add_option("--queue", o.queue, "Requests that may wait for a free sequence; more get 503")
      ->capture_default_str()->check(CLI::Range(0, 1 << 20));
  app.add_option("-t,--threads", o.threads, kThreadsHelp)
      ->capture_default_str()->check(CLI::Range(1, 256));
  app.add_option("--kv-memory", a->kv_memory, "KV cache memory (e.g. 512MiB, 4GiB)")->capture_default_str();
  add_kv_type_option(app, &o.kv_type);
  app.add_option("--batch-tokens", o.max_batch_tokens, "Tokens per forward step (prompt chunks + decodes)")
      ->capture_default_str()->check(CLI::Range(1, 1 << 20));
  add_tier_options(app, a->tiers);
  app.add_option("--drain-timeout", a->drain_timeout,
                 "On SIGTERM/SIGINT, how long requests in flight may run on while /health answers "
                 "503 and new requests are refused (e.g. 30s, 2m; 0 = stop at once); a second "
                 "signal stops at once")
      ->capture_default_str();
  app.add_flag("!--no-prefix-cache", o.prefix_cache, "Do not reuse or keep prompt KV (for comparisons)");
  app.add_option("--cache-reuse-default", a->reuse_mode,
                 "KV reuse of chat requests that do not say (cache_reuse): 'exact' (a hit never "
                 "changes the answer) or 'approximate' (moved parts reused with K rotated, part "
                 "recomputed; see docs/api.md)")
      ->capture_default_str()->check(CLI::IsMember({"exact", "approximate"}));
  app.add_option("--cache-reuse-policy", a->reuse_policy,
                 "Which approximately reused tokens are recomputed when a request does not say "
                 "(cache_reuse_policy): 'prefix' (each moved block's first tokens), 'deviation' "
                 "(those whose layer-1 KV deviates most, found by a layer-0 check pass) or 'impact' "
                 "(that deviation weighted by the last prompt token's attention); see docs/api.md")
      ->capture_default_str()->check(CLI::IsMember({"prefix", "deviation", "impact"}));
  app.add_option("--cache-reuse-budget", o.reuse.budget,
                 "Share (0-1) of approximately reused tokens recomputed by the policy "
                 "(cache_reuse_budget); 1 = exact result")
      ->capture_default_str()->check(CLI::Range(0.0, 1.0));
  app.add_option("--tenant-kv-share", o.tenant_kv_share,
                 "Share (0-1) of the KV memory one API tenant's pinned entries and retained "
                 "prefixes may hold: a pin beyond it is 429 tenant_quota_exceeded, a lifetime "
                 "beyond it goes to the tiers. Each tenant's context_length is then the memory "
                 "the others' bounds leave, so no tenant's pins show in another's. Default: with "
                 "API keys --retention-share divided by the number of tenants; without, no bound")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--tenant-max-requests", o.tenant_max_requests,
                 "Generation requests one API tenant may have running or queued at once; more "
                 "are 429 tenant_quota_exceeded, so one tenant cannot fill the queue for all. "
                 "0 = no bound. Default: with API keys half of --parallel + --queue; without, none")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--tenant-max-schemas", o.max_tenant_schemas,
                 "PML schemas one tenant (API key; all its cache_salt namespaces together) may "
                 "store; beyond it PUT /v1/schemas is 429 tenant_quota_exceeded")
      ->capture_default_str()->check(CLI::Range(0, 1 << 20));
  app.add_option("--tenant-max-schema-modules", o.max_tenant_schema_modules,
                 "Modules (counting each schema's text) one tenant's stored schemas may hold in all")
      ->capture_default_str()->check(CLI::Range(int64_t(0), int64_t(1) << 30));
  app.add_option("--tenant-max-schema-bytes", a->max_tenant_schema_bytes,
                 "PML source bytes one tenant's stored schemas may hold in all (e.g. 4MiB, the default; a "
         "compiled schema keeps about 90 times its source in memory)")
      ->capture_default_str();
  app.add_option("--retention-share", o.retention_share,
                 "Share (0-1) of the KV memory that prefixes under a lifetime (cache_control ttl, "
                 "prompt_cache_retention) may hold; beyond it the disk/Redis tiers keep them")
      ->capture_default_str()->check(CLI::Range(0.0, 1.0));
  app.add_option("--test-time-scale", o.test_time_scale,
                 "For tests only: multiplies every requested lifetime (0.01 makes \"5m\" 3 s)")
      ->capture_default_str()->check(CLI::Range(1e-6, 1.0));
  app.add_option("--chat-template-file", o.chat_template_file,
                 "Jinja chat template (default: tokenizer.chat_template in the GGUF)")
      ->check(CLI::ExistingFile);
  app.add_option("--chat-template", o.chat_template_name,
                 "Built-in chat template for a model whose GGUF has none (the model's own, or "
                 "--chat-template-file, wins); without one such a model's chat requests are 400 "
                 "no_chat_template")
      ->check(CLI::IsMember(builtin_chat_template_names()));
  app.add_option("--cors-origin", o.cors_origin,
                 "Send Access-Control-Allow-Origin: ORIGIN (e.g. https://app.example or *) and "
                 "answer CORS preflights (default: no CORS headers)");
  app.add_option("--api-keys", o.api_keys_file,
                 "File of 'KEY TENANT' lines: requests need 'Authorization: Bearer KEY'; the "
                 "tenant selects the cache namespace")
      ->check(CLI::ExistingFile);
  app.add_option("--api-key", o.api_keys,
                 "An API key of the default tenant (repeatable; as llama-server's --api-key): "
                 "requests need 'Authorization: Bearer KEY'; with --api-keys, besides that file's")
      ->allow_extra_args(false);
  app.add_option("--admin-tenant", o.admin_tenant,
                 "With --api-keys: the tenant whose cache-admin calls (stats, entries, pin, unpin, "
                 "ttl, evict, history, requests) act on every namespace; other tenants act on "
                 "their own");
  app.add_option("--metrics-key", o.metrics_key,
                 "/metrics answers only 'Authorization: Bearer KEY' (default: public without API "
                 "keys; with API keys, only the --admin-tenant's key)");
  app.add_option("--health-detail", o.health_detail,
                 "full: /health shows running/queued requests and Redis state to anyone; status: "
                 "only status and model, except to the admin tenant's or the metrics key "
                 "(default: status when API keys are set, so tenants cannot watch each other's "
                 "load; full otherwise)")
      ->check(CLI::IsMember({"full", "status"}));
  app.add_option("--log-level", o.log_level,
                 "error, warn, info (startup summary and one line per request; monitoring reads "
                 "such as /health, /metrics and cache GETs at debug) or debug")
      ->capture_default_str()->check(CLI::IsMember({"error", "warn", "info", "debug"}));
  app.add_option("--http-threads", o.http_threads,
                 "Threads that run request handlers (a whole generation holds one while it "
                 "waits; 0 = parallel + queue + 8)")
      ->capture_default_str()->check(CLI::Range(0, 65536));
  app.add_option("--header-timeout", a->header_timeout,
                 "A request's headers must arrive within this time of the connection opening or "
                 "the previous answer (else 408; an idle keep-alive connection closes)")
      ->capture_default_str();
  app.add_option("--body-timeout", a->body_timeout,
                 "A request's body must arrive within this time of its headers (else 408)")
      ->capture_default_str();
  app.add_option("--max-body-size", a->max_body_size,
                 "Largest request body (e.g. 32MiB); a larger Content-Length is 413 before any of it is read")
      ->capture_default_str();
  app.add_option("--max-body-memory", a->max_body_memory,
                 "Memory that the bodies of requests being read and handled take together; a body "
                 "that does not fit waits (up to --body-timeout, then 503) for others to finish")
      ->capture_default_str();
  app.add_option("--max-connections", o.max_connections,
                 "Open client connections; beyond it a new connection closes the oldest idle one of "
                 "the address holding the most, or is refused with 503")
      ->capture_default_str()->check(CLI::Range(16, 1 << 20));
  app.add_option("--max-client-connections", o.max_client_connections,
                 "Connections one client address may hold (more are refused with 503; raise it "
                 "behind a load balancer; 0 = --max-connections)")
      ->capture_default_str()->check(CLI::Range(0, 1 << 20));
  return [a] { return run_serve(*a); };
}

}  // namespace pc::cli
