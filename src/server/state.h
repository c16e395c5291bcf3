// Everything the route handlers share (internal to src/server).
#pragma once
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "server/http/http.h"
#include "server/http/http_server.h"

#include "engine/engine.h"
#include "model/model.h"
#include "server/chat/conversation.h"
#include "server/metrics.h"
#include "server/chat/reply_store.h"
#include "server/chat/response_store.h"
#include "server/request_log.h"
#include "server/scheduler.h"
#include "server/server.h"
#include "server/chat/tool_calls.h"
#include "server/chat/volatile_rules.h"
#include "template/chat_template.h"

namespace pc::pml {
class Encoder;
struct SchemaLayout;
}  // namespace pc::pml

namespace pc::server {

// A PML schema registered with PUT /v1/schemas/{name}.
struct SchemaEntry {
  std::string source;                               // the PML text as given
  std::shared_ptr<const pml::SchemaLayout> layout;  // shared with running jobs
  int64_t created = 0;                              // unix seconds
};

struct Server::State {
  ServerOptions opt;
  std::unique_ptr<Model> model;
  double load_seconds = 0;  // Model::load: reading the file, repacking the weights
  std::string model_id;
  std::optional<ChatTemplate> chat_template;   // none: chat routes answer 400
  std::string chat_template_origin;            // "gguf", "file", "builtin:NAME"; "" = none
  ToolFormat tool_format = ToolFormat::kNone;  // how the template renders tool calls
  ThinkTags think_tags;                        // the tags its model thinks in (none: empty)
  VolatileRules volatile_rules;                // --volatile-rules: nonces normalised before rendering
  std::map<std::string, std::string> api_keys; // key → tenant
  int64_t n_ctx = 0;                           // context length (tokens)
  int64_t kv_tokens = 0;                       // KV capacity (tokens)
  Metrics metrics;
  std::unique_ptr<RedisReplyStore> shared_replies;  // with --redis: memory's replies in Redis
  ConversationMemory memory;
  StructureMemory structure;  // recent chat requests' parts, for miss reasons
  ResponseStore responses;    // /v1/responses with store: true (and Redis with --redis)
  ReusePolicy reuse_default;  // a request's cache_reuse / cache_reuse_budget when it gives none
  std::unique_ptr<Engine> engine;
  std::unique_ptr<Scheduler> scheduler;
  std::unique_ptr<HttpServer> http;
  // Every route served (add_route), for OPTIONS and 405: registered before listening,
  // read-only after.
  struct Route {
    std::string method;
    std::regex pattern;
  };
  std::vector<Route> routes;
  // A completion prompt of more bytes than this has more tokens than the context: the
  // context times the longest token's text (no token covers more bytes than its text).
  int64_t max_prompt_bytes = 0;

  std::atomic<bool> draining{false};       // Server::begin_drain
  std::atomic<int64_t> generations{0};     // generation requests in flight (track_generation)
  // Counts one generation request in flight until the returned token is released
  // (Generation::in_flight: when the response, a stream included, is written).
  // *over_bound: the tenant (CacheScope::tenant) now has more than max_tenant_requests in flight.
  std::shared_ptr<void> track_generation(const std::string& tenant, bool* over_bound);
  int64_t max_tenant_requests = 0;  // --tenant-max-requests resolved (0: no bound)
  std::mutex tenant_mu;
  std::map<std::string, int64_t> tenant_generations;  // under tenant_mu: in flight per tenant

  LogLevel log_level = LogLevel::kInfo;  // --log-level
  RequestLog requests;                   // recent generation requests, per-tenant totals

  std::unique_ptr<pml::Encoder> pml_encoder;  // the tokenizer and the chat template's role markers
  std::mutex schemas_mu;
  std::map<CacheScope, std::map<std::string, SchemaEntry>> schemas;  // scope → name → schema

  // The request's namespace: API-key tenant and/or cache_salt. Throws ApiError 401
  // when keys are configured and the request has no valid one.
  std::string tenant_of(const HttpRequest& req) const;
  // The key a request presents (Authorization: Bearer, or x-api-key); "" = none.
  static std::string bearer(const HttpRequest& req);
  bool is_admin_key(const HttpRequest& req) const;  // the --admin-tenant's key
  // /metrics: the --metrics-key; without one, anyone without API keys, else the admin.
  bool may_scrape(const HttpRequest& req) const;
  // /health's running/queued/Redis figures (--health-detail).
  bool sees_server_detail(const HttpRequest& req) const;
  // The request's cache scope: its API-key tenant and cache_salt. 400 naming
  // cache_salt when it is longer than kMaxSaltBytes; 401 as tenant_of.
  CacheScope scope_of_request(const HttpRequest& req, const std::string& cache_salt) const;
  static constexpr size_t kMaxSaltBytes = 256;

  // Whom a cache-admin request acts for: one tenant's scopes (every cache_salt of
  // it), or every scope (`all`: no --api-keys, or the --admin-tenant). Throws
  // ApiError 401 as tenant_of does.
  struct Scope {
    std::string tenant;
    bool all = true;
    bool sees(const CacheScope& scope) const { return all || scope.tenant == tenant; }
  };
  Scope scope_of(const HttpRequest& req) const;
  // ApiError 404 model_not_found unless `requested` is "" or this server's model id
  // (any name with --any-model).
  void check_model(const std::string& requested) const;
};

// Registers `handler` for METHOD and PATTERN (a regex over the whole path) and
// remembers the route, so that OPTIONS and a wrong method on a served path get answers.
void add_route(Server::State& st, const std::string& method, const std::string& pattern,
               HttpServer::Handler handler);
// The methods served at `path`, e.g. "GET, POST" ("" = no route).
std::string allowed_methods(const Server::State& st, const std::string& path);

// With --redis: shares the conversation memory's replies through Redis
// (server/chat/reply_store.h), and warns on stderr when Redis cannot be reached at startup
// (the server still starts: it serves from memory and disk and keeps retrying).
void open_shared_tier(Server::State& st);
// "up" or "down" for /health (whether the Redis tier answered its last command);
// nullopt without --redis.
std::optional<std::string> redis_health(const Server::State& st);

// Route registration (one file per group).
void add_generation_routes(Server::State& st);
void add_cache_routes(Server::State& st);
void add_pml_routes(Server::State& st);
void add_llama_routes(Server::State& st);  // llama-server's /tokenize, /props, ...
void add_anthropic_routes(Server::State& st);  // POST /v1/messages
void add_responses_routes(Server::State& st);  // /v1/responses
void add_dashboard_routes(Server::State& st);  // /dashboard and the cache routes it reads

// Entries and bytes of each namespace's prefix tree (engine thread: Scheduler::call).
std::map<CacheScope, NamespaceUsage> namespace_usage(Engine& e);
// The same for the entries (prefixes and module segments) of each tier that can list
// them (KvTier::listable: the disk), by tier name; empty without one.
std::map<std::string, std::map<CacheScope, NamespaceUsage>> tier_usage(Engine& e);

// Runs a handler, turning ApiError / pc::Error / ChatTemplateError / anything else
// into an error response. The one place exceptions become HTTP statuses.
//   kOpenAI     {"error": {"message", "type", "param", "code"}}
//   kAnthropic  {"type": "error", "error": {"type", "message"}} (/v1/messages): type
//               from the status (invalid_request_error, authentication_error,
//               not_found_error, overloaded_error, api_error)
enum class ErrorStyle { kOpenAI, kAnthropic };
void guard(HttpResponse& res, const std::function<void()>& handler, ErrorStyle style = ErrorStyle::kOpenAI);

// A route handler that calls fn(st, req, res) inside guard(). It keeps a pointer to
// the state, not a reference into the caller's frame.
template <class Fn>
HttpServer::Handler guarded(Server::State& st, Fn fn) {
  Server::State* state = &st;
  return [state, fn](const HttpRequest& req, HttpResponse& res) { guard(res, [&] { fn(*state, req, res); }); };
}
void send_json(HttpResponse& res, int status, const nlohmann::json& j);

}  // namespace pc::server
