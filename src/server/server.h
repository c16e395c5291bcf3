// `promptcache serve`: the OpenAI-compatible HTTP server.
//
//   HTTP workers (http_server.h)          engine thread (Scheduler)
//   ────────────────────────────          ─────────────────────────
//   auth → namespace, parse, template,    queue (bounded) → Engine::add
//   tokenize (conversation splicing)      Engine::step over all running sequences
//   submit Job, stream its text ◄──────── token callbacks, take_finished
//   cache admin → Scheduler::call ──────► runs between steps (no locks in kv/)
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "kernels/cpu_count.h"
#include "model/model.h"
#include "server/api/request_defaults.h"
#include "server/chat/reasoning.h"
#include "tier/tier_options.h"

namespace pc::server {

struct ServerOptions {
  std::string model_path;
  bool mmap = false;                // map the model file rather than copy it (Residency)
  Model::WeightLayout weights = Model::WeightLayout::kFastest;  // --repack
  std::string model_alias;          // id in /v1/models ("" = file name without .gguf)
  std::string host = "127.0.0.1";
  int port = 8080;                  // 0 = any free port
  int parallel = 4;                 // sequences generating at once
  int queue = 64;                   // requests waiting for a sequence slot
  int threads = default_thread_count();  // compute threads (physical cores available)
  int64_t kv_memory_bytes = int64_t(1) << 30;
  KvType kv_type = KvType::kF16;    // --kv-type: how pages store K and V
  int max_batch_tokens = 512;
  bool prefix_cache = true;
  ReusePolicy reuse;                // --cache-reuse-default, --cache-reuse-budget
  double retention_share = 0.5;     // --retention-share: KV share lifetimes may hold in memory
  // --tenant-kv-share: KV share one API tenant's pins and retained prefixes may hold;
  // < 0 = with API keys retention_share / tenants, without them no per-tenant bound.
  double tenant_kv_share = -1;
  // --tenant-max-requests: generation requests one API tenant may have in flight
  // (running + queued); < 0 = with API keys half of parallel + queue, without none.
  int tenant_max_requests = -1;
  double test_time_scale = 1;       // --test-time-scale (tests only): lifetimes are multiplied by it
  TierOptions tiers;                // --disk-cache, --redis (tier/tier_options.h)
  std::string chat_template_file;   // "" = tokenizer.chat_template from the GGUF
  std::string chat_template_name;   // built-in template (builtin_templates.h) for a model
                                    // without one ("" = none: chat requests answer 400)
  std::string cors_origin;          // Access-Control-Allow-Origin ("" = no CORS headers; "*")
  bool any_model = false;           // answer any requested model name (no 404 model_not_found)
  std::string api_keys_file;        // lines "KEY TENANT"; "" = no authentication
  std::vector<std::string> api_keys;  // --api-key: keys of the default tenant "" (besides the file's)
  int64_t ctx_size = 0;             // -c: positions one request may use (0 = the model's context)
  std::string admin_tenant;         // with api keys: the tenant whose cache-admin calls act on all
  std::string metrics_key;          // "" = /metrics is public; else it needs Bearer KEY
  // --health-detail: "full" (/health shows running/queued and Redis state to anyone),
  // "status" (status and model only, except for the admin tenant's or the metrics key),
  // "" = status when API keys are set, full otherwise.
  std::string health_detail;
  std::string log_level = "info";   // error, warn, info (a line per request), debug
  int http_threads = 0;             // handler threads; 0 = parallel + queue + 8
  // The HTTP layer's limits (HttpLimits, http_server.h).
  int64_t header_timeout_ms = 10'000;           // --header-timeout
  int64_t body_timeout_ms = 60'000;             // --body-timeout
  int max_connections = 4096;                   // --max-connections
  int max_client_connections = 1024;            // --max-client-connections (0 = no own cap)
  int64_t max_body_bytes = int64_t(32) << 20;   // --max-body-size
  int64_t body_memory_bytes = int64_t(256) << 20;  // --max-body-memory
  // Per-tenant bounds on stored PML schemas (PUT /v1/schemas): how many, their
  // modules and their source bytes, summed over the tenant's namespaces (salts
  // included). A compiled schema keeps ~90x its source in memory, mostly per module.
  int max_tenant_schemas = 64;                       // --tenant-max-schemas
  int64_t max_tenant_schema_modules = 4096;          // --tenant-max-schema-modules
  int64_t max_tenant_schema_bytes = int64_t(4) << 20;  // --tenant-max-schema-bytes
  bool test_hooks = false;          // accept the test-only request fields (test_forced_reply)
  RequestDefaults defaults;         // --temp, --top-p, --top-k, --seed, -n: what a request leaves out
  // --reasoning-format: whether a reply's thinking is split from its answer
  // (reasoning_content, thinking blocks) or left in the content; a request's
  // reasoning_format overrides it.
  ReasoningFormat reasoning_format = ReasoningFormat::kAuto;
  // --volatile-rules: "off", "default" or a rules file (server/chat/volatile_rules.h).
  std::string volatile_rules = "default";
};

class Server {
 public:
  // Loads the model, chat template and keys; starts the engine thread.
  // Throws pc::Error with a message for the user.
  explicit Server(const ServerOptions& opt);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the listening socket; returns the port (the chosen one for port 0).
  int bind();
  // Serves until stop(). Returns false if the server could not run.
  bool listen();
  // Closes the listening socket; listen() returns once the requests being served
  // are answered. A stream still being written is cut (drain first).
  void stop();

  // Draining, for a shutdown that loses no request: from now on /health answers 503
  // {"status": "draining"} (a balancer's health check moves new sessions away) and
  // new generation requests 503 `server_draining`; requests already submitted run to
  // their end, streams included. Thread-safe, idempotent.
  void begin_drain();
  bool draining() const;
  // Generation requests in flight: submitted and not yet fully answered (a stream
  // counts until its last byte is written). 0 after begin_drain() means stop() cuts
  // nothing.
  int64_t generations_in_flight() const;
  // Ends every queued and running generation now (whole requests answer 503
  // `cancelled`, streams end with an error event; up to 1 s for them to be written),
  // then stop().
  void abort();
  // Waits until the KV tier writes already queued have finished (after listen()).
  void flush_tiers();
  // The model served (its weights' layouts, for the startup log).
  const Model& model() const;

  struct State;

 private:
  std::unique_ptr<State> st_;
};

}  // namespace pc::server
