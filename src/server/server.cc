#include "server/server.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <tuple>

#include "common/error.h"
#include "gguf/gguf.h"
#include "engine/cache_admin.h"
#include "kernels/cpu.h"
#include "model/config_check.h"
#include "pml/encoder.h"
#include "template/builtin_templates.h"
#include "server/api/api_error.h"
#include "server/malloc_policy.h"
#include "server/api/openai.h"
#include "server/state.h"
#include "tokenizer/tokenizer.h"

namespace pc::server {

namespace {

std::string read_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(std::string("cannot open ") + what + " '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// "KEY TENANT" per line; blank lines and # comments skipped.
std::map<std::string, std::string> load_api_keys(const std::string& path) {
  std::map<std::string, std::string> keys;
  std::istringstream in(read_file(path, "API key file"));
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    std::istringstream ls(line);
    std::string key, tenant, extra;
    if (!(ls >> key) || key[0] == '#') continue;
    if (!(ls >> tenant) || (ls >> extra))
      throw Error(path + ":" + std::to_string(n) + ": expected 'KEY TENANT'");
    keys[key] = tenant;
  }
  if (keys.empty()) throw Error(path + ": no API keys");
  return keys;
}

// Route label for metrics (bounded set).
std::string route_label(const HttpRequest& req, int status) {
  static const char* known[] = {"/v1/completions", "/v1/chat/completions", "/v1/models", "/health",
                                "/metrics", "/v1/cache/stats", "/v1/cache/entries",
                                "/v1/cache/pin", "/v1/cache/unpin", "/v1/cache/evict",
                                "/v1/cache/ttl", "/v1/cache/history", "/v1/cache/requests",
                                "/v1/cache/namespaces", "/dashboard", "/v1/schemas", "/v1/pml/completions",
                                "/tokenize", "/detokenize", "/apply-template", "/props",
                                "/completions", "/chat/completions", "/models"};
  for (const char* k : known)
    if (req.path == k) return k;
  if (req.path.rfind("/v1/schemas/", 0) == 0) return "/v1/schemas/{name}";
  if (req.path.rfind("/v1/cache/entries/", 0) == 0) return "/v1/cache/entries/{id}";
  return "other";
}

void add_model_routes(Server::State& st, const std::string& prefix);

void add_misc_routes(Server::State& st) {
  add_route(st, "GET", "/health", [&st](const HttpRequest& req, HttpResponse& res) {
    const bool draining = st.draining.load();
    json body = {{"status", draining ? "draining" : "ok"}, {"model", st.model_id}};
    if (st.sees_server_detail(req)) {
      body["running"] = st.scheduler->running();
      body["queued"] = st.scheduler->queued();
      if (const auto redis = redis_health(st)) body["redis"] = *redis;  // "down" still answers 200
    }
    send_json(res, draining ? 503 : 200, body);
  });
  add_route(st, "GET", "/metrics", [&st](const HttpRequest& req, HttpResponse& res) {
    if (!st.may_scrape(req)) {
      send_json(res, 401,
                error_json(st.opt.metrics_key.empty()
                               ? "/metrics needs the admin tenant's key when API keys are set (--admin-tenant), "
                                 "or a scrape key (--metrics-key)"
                               : "/metrics needs 'Authorization: Bearer KEY' (--metrics-key)",
                           "invalid_request_error", "", "invalid_api_key"));
      return;
    }
    // Per-namespace usage walks the prefix trees: done per scrape, not per step.
    try {
      st.scheduler->call([&](Engine& e) {
        st.metrics.set_namespaces(namespace_usage(e));
        if (const std::optional<TierReport> t = e.cache().tier_report()) {
          for (const auto& [tier, usage] : tier_usage(e)) st.metrics.set_namespaces(usage, tier);
          st.metrics.set_tiers(t);
        }
      });
    } catch (const std::exception&) {
      // Shutting down: the rest is still worth serving.
    }
    res.set_content(st.metrics.render(), "text/plain; version=0.0.4");
  });
  // /models and /models/{id} too, as llama-server serves both spellings.
  for (const char* prefix : {"/v1", ""}) add_model_routes(st, prefix);
}

void add_model_routes(Server::State& st, const std::string& prefix) {
  add_route(st, "GET", prefix + "/models", [&st](const HttpRequest& req, HttpResponse& res) {
    guard(res, [&] {
      const std::string tenant = st.tenant_of(req);
      const json model = {{"id", st.model_id}, {"object", "model"}, {"created", 0},
                          {"owned_by", "promptcache"},
                          // What a request may use: the model's context, or less when the
                          // KV memory (besides pinned entries) holds fewer tokens.
                          {"context_length", std::min(st.n_ctx, st.scheduler->admission_tokens(tenant))},
                          {"n_ctx_train", st.model->config().n_ctx_train}};
      send_json(res, 200, {{"object", "list"}, {"data", json::array({model})}});
    });
  });
  add_route(st, "GET", prefix + R"(/models/(.+))", [&st](const HttpRequest& req, HttpResponse& res) {
    guard(res, [&] {
      st.tenant_of(req);
      st.check_model(req.matches[1]);
      send_json(res, 200, {{"id", st.model_id}, {"object", "model"}, {"created", 0},
                           {"owned_by", "promptcache"}});
    });
  });
}

// The chat template's source and where it came from ("" when the model has none).
std::pair<std::string, std::string> chat_template_source(const ServerOptions& opt, const Model& m) {
  if (!opt.chat_template_file.empty())
    return {read_file(opt.chat_template_file, "chat template file"), "file"};
  std::string source = m.file().get_string("tokenizer.chat_template", "");
  if (!source.empty()) return {source, "gguf"};
  if (opt.chat_template_name.empty()) return {"", ""};
  const std::string* builtin = builtin_chat_template(opt.chat_template_name);
  if (!builtin) {
    std::string names;
    for (const std::string& n : builtin_chat_template_names()) names += (names.empty() ? "" : ", ") + n;
    throw Error("unknown chat template '" + opt.chat_template_name + "' (built-in: " + names + ")");
  }
  return {*builtin, "builtin:" + opt.chat_template_name};
}

void send_error(HttpResponse& res, ErrorStyle style, int status, const std::string& message,
                const std::string& type, const std::string& param, const std::string& code);

// Anthropic's routes answer every error in Anthropic's shape, unknown subpaths and
// methods included (SDKs parse error.type).
ErrorStyle error_style_of(const std::string& path) {
  return path == "/v1/messages" || path.rfind("/v1/messages/", 0) == 0 ? ErrorStyle::kAnthropic
                                                                        : ErrorStyle::kOpenAI;
}

// OPTIONS on a served path (a CORS preflight), and the answer to a method the path
// does not serve. CORS headers themselves are default headers (every response).
void add_method_handling(Server::State& st) {
  st.http->route("OPTIONS", ".*", [&st](const HttpRequest& req, HttpResponse& res) {
    const std::string methods = allowed_methods(st, req.path);
    if (methods.empty()) {
      res.status = 404;  // the error handler answers
      return;
    }
    res.status = 204;
    res.set_header("Allow", methods + ", OPTIONS");
    if (!st.opt.cors_origin.empty()) {
      res.set_header("Access-Control-Allow-Methods", methods + ", OPTIONS");
      const std::string asked = req.get_header_value("Access-Control-Request-Headers");
      res.set_header("Access-Control-Allow-Headers",
                     asked.empty() ? "Authorization, Content-Type, X-Api-Key" : asked);
      res.set_header("Access-Control-Max-Age", "86400");
    }
  });
  st.http->set_error_handler([&st](const HttpRequest& req, HttpResponse& res) {
    if (!res.body.empty()) return;  // a handler already answered
    const ErrorStyle style = error_style_of(req.path);
    if (res.status == 404) {
      const std::string methods = allowed_methods(st, req.path);
      if (!methods.empty() && req.method != "OPTIONS") {
        res.set_header("Allow", methods + ", OPTIONS");
        send_error(res, style, 405, req.method + " is not allowed on " + req.path + " (allowed: " + methods + ")",
                   "invalid_request_error", "", "method_not_allowed");
        return;
      }
      send_error(res, style, 404, "no route " + req.method + " " + req.path, "invalid_request_error", "",
                 "unknown_route");
    } else {
      send_error(res, style, res.status, "HTTP " + std::to_string(res.status), "invalid_request_error", "", "");
    }
  });
  if (!st.opt.cors_origin.empty()) {
    HttpHeaders h = {{"Access-Control-Allow-Origin", st.opt.cors_origin}};
    if (st.opt.cors_origin != "*") h.emplace("Vary", "Origin");
    st.http->set_default_headers(std::move(h));
  }
}

// What this server runs with, once at startup (info).
void log_startup(const Server::State& st) {
  const ServerOptions& o = st.opt;
  const ModelConfig& c = st.model->config();
  std::string tiers = "memory";
  if (!o.tiers.disk_dir.empty()) tiers += ", disk " + o.tiers.disk_dir;
  if (!o.tiers.redis_url.empty()) tiers += ", redis " + o.tiers.redis_url;
  char buf[1024];
  std::snprintf(buf, sizeof buf,
                "model %s (%s, loaded in %.2f s), architecture %s, %lld layers, context %lld tokens, KV capacity "
                "%lld tokens (%.0f MiB, %s), template %s, tiers: %s, threads %d, kernels %s, parallel %d, queue %d, "
                "api keys %s",
                st.model_id.c_str(), o.model_path.c_str(), st.load_seconds, c.arch_name.c_str(),
                static_cast<long long>(c.n_layer),
                static_cast<long long>(st.n_ctx), static_cast<long long>(st.kv_tokens),
                double(o.kv_memory_bytes) / (1 << 20), kv_type_name(o.kv_type),
                st.chat_template_origin.empty() ? "none" : st.chat_template_origin.c_str(), tiers.c_str(), o.threads,
                cpu_level_name(cpu_level()).c_str(), o.parallel, o.queue,
                st.api_keys.empty() ? "off" : (std::to_string(st.api_keys.size()) + " keys").c_str());
  log_line(st.log_level, LogLevel::kInfo, buf);
}

}  // namespace

void add_route(Server::State& st, const std::string& method, const std::string& pattern,
               HttpServer::Handler inner) {
  if (method != "GET" && method != "POST" && method != "PUT" && method != "DELETE")
    throw std::logic_error("add_route: method " + method);
  st.routes.push_back({method, std::regex(pattern)});
  // Every request a route serves gets its log line (RequestTrace): written when the
  // handler returned and, for a stream, once its generation has let go of it.
  auto handler = [&st, inner = std::move(inner)](const HttpRequest& req, HttpResponse& res) {
    auto trace = std::make_shared<RequestTrace>(st.log_level, req.method, req.path);
    {
      const RequestTrace::Scope scope(trace);
      inner(req, res);
    }
    trace->set_status(res.status > 0 ? res.status : 200);
  };
  st.http->route(method, pattern, std::move(handler));
}

std::string allowed_methods(const Server::State& st, const std::string& path) {
  std::string out;
  for (const Server::State::Route& r : st.routes)
    if (std::regex_match(path, r.pattern) && out.find(r.method) == std::string::npos)
      out += (out.empty() ? "" : ", ") + r.method;
  return out;
}

void send_json(HttpResponse& res, int status, const json& j) {
  res.status = status;
  res.set_content(dump(j), "application/json");
}

namespace {

const char* anthropic_error_type(int status) {
  switch (status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 405: return "invalid_request_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503: return "overloaded_error";
    default: return "api_error";
  }
}

void send_error(HttpResponse& res, ErrorStyle style, int status, const std::string& message,
                const std::string& type, const std::string& param, const std::string& code) {
  if (style == ErrorStyle::kOpenAI) return send_json(res, status, error_json(message, type, param, code));
  send_json(res, status, {{"type", "error"}, {"error", {{"type", anthropic_error_type(status)}, {"message", message}}}});
}

}  // namespace

void guard(HttpResponse& res, const std::function<void()>& handler, ErrorStyle style) {
  try {
    handler();
  } catch (const ApiError& e) {
    send_error(res, style, e.status, e.what(), e.type, e.param, e.code);
  } catch (const ChatTemplateError& e) {
    send_error(res, style, 400, std::string("chat template: ") + e.what(), "invalid_request_error", "messages",
               "template_error");
  } catch (const TenantQuotaError& e) {
    send_error(res, style, 429, e.what(), "rate_limit_error", "", "tenant_quota_exceeded");
  } catch (const Error& e) {
    send_error(res, style, 400, e.what(), "invalid_request_error", "", "");
  } catch (const std::exception& e) {
    send_error(res, style, 500, std::string("internal error: ") + e.what(), "server_error", "", "");
  }
}

std::string Server::State::tenant_of(const HttpRequest& req) const {
  if (api_keys.empty()) return "";
  const std::string key = bearer(req);
  auto it = api_keys.find(key);
  if (key.empty() || it == api_keys.end())
    throw ApiError(401, "invalid_request_error",
                   key.empty() ? "You didn't provide an API key (Authorization: Bearer KEY)"
                               : "Incorrect API key provided",
                   "", "invalid_api_key");
  return it->second;
}

std::string Server::State::bearer(const HttpRequest& req) {
  std::string key = req.get_header_value("Authorization");
  if (key.rfind("Bearer ", 0) == 0) key = key.substr(7);
  if (key.empty()) key = req.get_header_value("x-api-key");
  return key;
}

bool Server::State::is_admin_key(const HttpRequest& req) const {
  if (opt.admin_tenant.empty()) return false;
  const auto it = api_keys.find(bearer(req));
  return it != api_keys.end() && it->second == opt.admin_tenant;
}

// Without API keys every client is the operator. With them, the server's load and the
// per-namespace series are the operator's: a tenant must not watch the others' traffic.
bool Server::State::may_scrape(const HttpRequest& req) const {
  if (!opt.metrics_key.empty()) return bearer(req) == opt.metrics_key;
  return api_keys.empty() || is_admin_key(req);
}

bool Server::State::sees_server_detail(const HttpRequest& req) const {
  const bool full = opt.health_detail.empty() ? api_keys.empty() : opt.health_detail == "full";
  return full || is_admin_key(req) || (!opt.metrics_key.empty() && bearer(req) == opt.metrics_key);
}

void Server::State::check_model(const std::string& requested) const {
  if (requested.empty() || requested == model_id || opt.any_model) return;
  throw ApiError(404, "invalid_request_error",
                 "The model '" + requested + "' does not exist (this server has '" + model_id + "')",
                 "model", "model_not_found");
}

CacheScope Server::State::scope_of_request(const HttpRequest& req, const std::string& cache_salt) const {
  std::string tenant = tenant_of(req);
  if (cache_salt.size() > kMaxSaltBytes)
    throw bad_field("cache_salt", "'cache_salt' is " + std::to_string(cache_salt.size()) + " bytes; at most " +
                                      std::to_string(kMaxSaltBytes) + " are allowed");
  return CacheScope(std::move(tenant), cache_salt);
}

Server::State::Scope Server::State::scope_of(const HttpRequest& req) const {
  Scope s;
  s.tenant = tenant_of(req);
  s.all = api_keys.empty() || (!opt.admin_tenant.empty() && s.tenant == opt.admin_tenant);
  return s;
}

const Model& Server::model() const { return *st_->model; }

Server::Server(const ServerOptions& opt) : st_(std::make_unique<State>()) {
  // Two arenas: the engine thread and the handlers do not fight over one lock, and
  // a handler's transient garbage is reused by the next (server/malloc_policy.h).
  limit_malloc_arenas(2);
  State& st = *st_;
  st.opt = opt;
  // -c also picks the RoPE factor set of models whose scaling depends on the context
  // (LongRoPE), as llama.cpp does.
  const auto load_start = std::chrono::steady_clock::now();
  st.model = Model::load(opt.model_path, opt.mmap ? Residency::kMap : Residency::kMemory, opt.ctx_size,
                         opt.weights);
  st.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
  st.model_id = opt.model_alias.empty() ? std::filesystem::path(opt.model_path).stem().string()
                                        : opt.model_alias;
  const Tokenizer& tok = st.model->tokenizer();
  std::string source;
  std::tie(source, st.chat_template_origin) = chat_template_source(opt, *st.model);
  if (!source.empty()) {
    const std::string bos = tok.bos() >= 0 ? tok.token_text(tok.bos()) : "";
    const std::string eos = tok.eos() >= 0 ? tok.token_text(tok.eos()) : "";
    try {
      st.chat_template.emplace(source, bos, eos);
      st.tool_format = detect_tool_format(source);
      st.think_tags = detect_think_tags(source);
    } catch (const ChatTemplateError& e) {
      throw Error(std::string("chat template: ") + e.what());
    }
  }
  st.volatile_rules = VolatileRules::load(opt.volatile_rules);
  // PML role tags use the same template as chat requests.
  st.pml_encoder = std::make_unique<pml::Encoder>(tok, pml::RoleMarkers::from_template_source(source, tok));
  if (!opt.api_keys_file.empty()) st.api_keys = load_api_keys(opt.api_keys_file);
  for (const std::string& key : opt.api_keys)
    if (!st.api_keys.emplace(key, "").second && !st.api_keys[key].empty())
      throw Error("--api-key: the key is also in " + opt.api_keys_file + " with tenant '" + st.api_keys[key] + "'");
  if (!opt.admin_tenant.empty()) {
    if (st.api_keys.empty()) throw Error("--admin-tenant needs --api-keys (without keys every caller acts on all)");
    bool known = false;
    for (const auto& [key, tenant] : st.api_keys) known = known || tenant == opt.admin_tenant;
    if (!known) throw Error("--admin-tenant '" + opt.admin_tenant + "' is no tenant of " + opt.api_keys_file);
  }
  if (!parse_log_level(opt.log_level, &st.log_level))
    throw Error("--log-level must be error, warn, info or debug (not '" + opt.log_level + "')");
  st.n_ctx = context_size(st.model->config(), opt.ctx_size);
  st.reuse_default = opt.reuse;

  EngineOptions eo;
  eo.threads = opt.threads;
  eo.kv_memory_bytes = opt.kv_memory_bytes;
  eo.kv_type = opt.kv_type;
  eo.max_batch_tokens = opt.max_batch_tokens;
  eo.prefix_cache = opt.prefix_cache;
  eo.retention_share = opt.retention_share;
  std::set<std::string> tenants;
  for (const auto& [key, tenant] : st.api_keys) tenants.insert(tenant);
  eo.tenants = std::max<int>(1, int(tenants.size()));
  st.max_tenant_requests = opt.tenant_max_requests >= 0 ? opt.tenant_max_requests
                           : tenants.empty()           ? 0
                                                       : std::max(1, (opt.parallel + opt.queue) / 2);
  eo.tenant_hold_share = opt.tenant_kv_share >= 0 ? opt.tenant_kv_share
                         : tenants.empty()        ? 0.0
                                                  : opt.retention_share / double(eo.tenants);
  eo.tiers = opt.tiers;
  st.engine = std::make_unique<Engine>(*st.model, eo);
  const PoolView pool = st.engine->cache().counters().pool;
  st.kv_tokens = int64_t(pool.pages) * pool.page_size;
  st.scheduler = std::make_unique<Scheduler>(*st.engine, SchedulerOptions{opt.parallel, opt.queue},
                                             st.metrics);
  open_shared_tier(st);

  HttpLimits lim;
  lim.header_timeout_ms = opt.header_timeout_ms;
  lim.body_timeout_ms = opt.body_timeout_ms;
  lim.max_connections = opt.max_connections;
  lim.max_client_connections = opt.max_client_connections;
  lim.max_body_bytes = opt.max_body_bytes;
  lim.body_memory_bytes = opt.body_memory_bytes;
  lim.workers = opt.http_threads > 0 ? opt.http_threads : opt.parallel + opt.queue + 8;
  st.http = std::make_unique<HttpServer>(lim);
  st.http->set_error_writer([](HttpResponse& res, int status, const std::string& message, const std::string& code) {
    send_json(res, status, error_json(message, status >= 500 ? "server_error" : "invalid_request_error", "", code));
  });
  st.http->set_logger([&st](const HttpRequest& req, const HttpResponse& res) {
    st.metrics.count_request(route_label(req, res.status), res.status);
  });
  int64_t longest_token = 1;
  for (int32_t id = 0; id < tok.n_vocab(); ++id)
    longest_token = std::max<int64_t>(longest_token, int64_t(tok.token_text(id).size()));
  st.max_prompt_bytes = st.n_ctx * longest_token;
  add_misc_routes(st);
  add_generation_routes(st);
  add_cache_routes(st);
  add_pml_routes(st);
  add_llama_routes(st);
  add_anthropic_routes(st);
  add_responses_routes(st);
  add_dashboard_routes(st);
  add_method_handling(st);
  log_startup(st);
}

Server::~Server() {
  stop();
  // The HTTP workers first: a handler still streaming holds a Generation whose end
  // touches the state's counters and the scheduler, so every handler finishes (its
  // connection closed by stop()) while both are alive. Then the engine thread.
  st_->http.reset();
  st_->scheduler.reset();  // joins the engine thread before the engine goes
}

int Server::bind() { return st_->http->bind(st_->opt.host, st_->opt.port); }

bool Server::listen() { return st_->http->listen(); }
void Server::stop() { st_->http->stop(); }

void Server::begin_drain() { st_->draining.store(true); }
bool Server::draining() const { return st_->draining.load(); }
int64_t Server::generations_in_flight() const { return st_->generations.load(); }

void Server::abort() {
  st_->scheduler->shutdown();
  // The cancelled requests answer within a wait_delta period (100 ms): give them up to
  // a second so that streams end with their error event rather than mid-chunk
  // (a stream still running when the server stops is cut).
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (st_->generations.load() > 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  st_->http->stop();
}

void Server::flush_tiers() {
  try {
    st_->scheduler->call([](Engine& e) { e.flush_tiers(); });
  } catch (const std::exception&) {
    // The engine thread is gone (abort): ~KvTiers still finishes the queued writes.
  }
}

std::shared_ptr<void> Server::State::track_generation(const std::string& tenant, bool* over_bound) {
  generations.fetch_add(1);
  int64_t mine = 0;
  {
    std::lock_guard lk(tenant_mu);
    mine = ++tenant_generations[tenant];
  }
  if (over_bound) *over_bound = max_tenant_requests > 0 && mine > max_tenant_requests;
  return std::shared_ptr<void>(nullptr, [this, tenant](void*) {
    generations.fetch_sub(1);
    std::lock_guard lk(tenant_mu);
    if (--tenant_generations[tenant] == 0) tenant_generations.erase(tenant);
  });
}

}  // namespace pc::server
