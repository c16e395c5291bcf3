// The PML API: PUT/GET/DELETE /v1/schemas/{name}, GET /v1/schemas and
// POST /v1/pml/completions (docs/pml.md, docs/api.md).
//
// Schemas live per namespace, like the prefix cache: the API key's tenant and an
// optional cache_salt (query parameter here, body field for completions). They
// are compiled (tokenized and laid out) on the HTTP thread when PUT; a completion
// plans its prompt against the namespace's schema there too, and the engine
// thread runs the plan (Engine::add_plan), encoding modules missing from the
// module store on first use.
#include <chrono>

#include "common/error.h"
#include "engine/cache_admin.h"
#include "pml/compiled_plan.h"
#include "pml/pml.h"
#include "server/api/api_error.h"
#include "server/malloc_policy.h"
#include "server/generation.h"
#include "server/api/openai.h"
#include "server/state.h"

namespace pc::server {

namespace {

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch()).count();
}

// 400 for PML text that does not parse or plan; the message names line and
// column, and the error object carries them as numbers too.
void send_pml_error(HttpResponse& res, const pml::PmlError& e, const std::string& param) {
  json err = error_json(e.what(), "invalid_request_error", param, "invalid_pml");
  err["error"]["line"] = e.loc().line;
  err["error"]["column"] = e.loc().column;
  send_json(res, 400, err);
}

// Namespace of a schema route: the tenant and the optional ?cache_salt=.
CacheScope schema_namespace(Server::State& st, const HttpRequest& req) {
  return st.scope_of_request(req, req.get_param_value("cache_salt"));
}

json layout_json(const pml::SchemaLayout& L) {
  auto path_of = [&](int m) { return m < 0 ? json(nullptr) : json(L.modules[m].path); };
  json modules = json::array();
  for (size_t i = 0; i < L.modules.size(); ++i) {
    const pml::ModuleLayout& m = L.modules[i];
    json params = json::array();
    for (const pml::Param& p : m.params)
      params.push_back({{"name", p.name}, {"slot", p.slot}, {"length", p.length},
                        {"placeholder_tokens", p.end - p.begin}});
    modules.push_back({{"path", m.path},
                       {"name", m.name},
                       {"root", i == 0},
                       {"parent", path_of(m.parent)},
                       {"start", m.start},
                       {"length", m.length},
                       {"tokens", m.tokens.size()},
                       {"cache", m.cache},
                       {"union", m.union_index >= 0 ? json(m.union_index) : json(nullptr)},
                       {"params", params}});
  }
  json unions = json::array();
  for (const pml::UnionLayout& u : L.unions) {
    json members = json::array();
    for (int m : u.members) members.push_back(L.modules[m].path);
    unions.push_back({{"parent", path_of(u.parent)}, {"start", u.start}, {"length", u.length},
                      {"members", members}});
  }
  return {{"name", L.name}, {"digest", L.digest_hex()}, {"positions", L.length},
          {"modules", modules}, {"unions", unions}};
}

json summary_json(const std::string& name, const SchemaEntry& e) {
  return {{"name", name}, {"object", "schema"}, {"created", e.created},
          {"modules", e.layout->modules.size() - 1}, {"positions", e.layout->length},
          {"digest", e.layout->digest_hex()}};
}

// The body of a PUT: the PML text itself, or {"schema": "<schema ...>"}.
std::string schema_text(const HttpRequest& req) {
  const size_t first = req.body.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) throw bad_field("schema", "the body is empty; send the PML text of a <schema>");
  if (req.body[first] != '{') return req.body;
  const json body = parse_body(req.body);
  auto it = body.find("schema");
  if (it == body.end() || !it->is_string())
    throw bad_field("schema", "a JSON body needs a string 'schema' with the PML text", "missing_required_parameter");
  return it->get<std::string>();
}

// Drops from the module store the modules of `gone` that no schema left in the
// namespace still has (module digests are content hashes, so two schemas may
// share an entry). Runs on the engine thread; returns the entries dropped.
int64_t drop_modules(Server::State& st, const CacheScope& ns, const pml::SchemaLayout& gone) {
  std::set<uint64_t> keep;
  {
    std::lock_guard lk(st.schemas_mu);
    if (auto it = st.schemas.find(ns); it != st.schemas.end())
      for (const auto& [name, e] : it->second)
        for (const pml::ModuleLayout& m : e.layout->modules) keep.insert(m.digest);
  }
  std::set<uint64_t> drop;
  for (const pml::ModuleLayout& m : gone.modules)
    if (!keep.count(m.digest)) drop.insert(m.digest);
  int64_t dropped = 0;
  st.scheduler->call([&](Engine& engine) { dropped = engine.cache().drop_modules(ns, drop); });
  return dropped;
}

// What a tenant's stored schemas hold, besides the one named `name` in `ns` (which a
// PUT replaces). Caller holds schemas_mu.
struct SchemaUsage {
  int64_t schemas = 0, modules = 0, bytes = 0;
};
SchemaUsage tenant_schema_usage(const Server::State& st, const Server::State::Scope& tenant, const CacheScope& ns,
                                const std::string& name) {
  SchemaUsage u;
  for (const auto& [space, named] : st.schemas) {
    if (!tenant.sees(space)) continue;
    for (const auto& [n, e] : named) {
      if (space == ns && n == name) continue;
      ++u.schemas;
      u.modules += int64_t(e.layout->modules.size());
      u.bytes += int64_t(e.source.size());
    }
  }
  return u;
}

// 429 naming the bound a stored schema would take the tenant past.
void check_schema_quota(const Server::State& st, const SchemaUsage& u, int64_t modules, int64_t bytes) {
  const ServerOptions& o = st.opt;
  auto over = [](const std::string& what, int64_t have, int64_t limit, const std::string& flag) {
    return ApiError(429, "rate_limit_error",
                    "storing this schema would take the tenant's " + what + " to " + std::to_string(have) +
                        "; the bound is " + std::to_string(limit) + " (" + flag +
                        "); delete schemas with DELETE /v1/schemas/{name}",
                    "schema", "tenant_quota_exceeded");
  };
  if (u.schemas + 1 > o.max_tenant_schemas)
    throw over("stored schemas", u.schemas + 1, o.max_tenant_schemas, "--tenant-max-schemas");
  if (u.bytes + bytes > o.max_tenant_schema_bytes)
    throw over("schema source bytes", u.bytes + bytes, o.max_tenant_schema_bytes, "--tenant-max-schema-bytes");
  if (u.modules + modules > o.max_tenant_schema_modules)
    throw over("schema modules", u.modules + modules, o.max_tenant_schema_modules, "--tenant-max-schema-modules");
}

void put_schema(Server::State& st, const HttpRequest& req, HttpResponse& res) {
  const Server::State::Scope tenant{st.tenant_of(req), false};
  const std::string name = req.matches[1];
  const CacheScope ns = schema_namespace(st, req);
  const std::string text = schema_text(req);
  {
    // The source bytes are checked before compiling, which costs ~90x them.
    std::lock_guard lk(st.schemas_mu);
    check_schema_quota(st, tenant_schema_usage(st, tenant, ns, name), 0, int64_t(text.size()));
  }
  SchemaEntry entry;
  entry.source = text;
  entry.created = unix_now();
  try {
    entry.layout = std::make_shared<const pml::SchemaLayout>(
        pml::compile_schema(text, *st.pml_encoder, "schema '" + name + "'"));
  } catch (const pml::PmlError& e) {
    return send_pml_error(res, e, "schema");
  }
  if (entry.layout->name != name)
    throw bad_field("schema", "the schema is named '" + entry.layout->name + "' but the URL names '" +
                                  name + "'; they must agree");
  std::shared_ptr<const pml::SchemaLayout> replaced;
  {
    std::lock_guard lk(st.schemas_mu);
    check_schema_quota(st, tenant_schema_usage(st, tenant, ns, name), int64_t(entry.layout->modules.size()),
                       int64_t(text.size()));
    auto& slot = st.schemas[ns][name];
    replaced = slot.layout;
    slot = entry;
  }
  // A replaced schema's modules that the new one lacks would only age out.
  if (replaced) drop_modules(st, ns, *replaced);
  json out = summary_json(name, entry);
  out["namespace"] = scope_name(ns);
  out["layout"] = layout_json(*entry.layout);
  if (req.get_param_value("preload") == "true" || req.get_param_value("preload") == "1") {
    int64_t encoded = 0;
    st.scheduler->call([&](Engine& e) { encoded = e.preload(pml::module_set(*entry.layout), ns); });
    out["preloaded_tokens"] = encoded;
  }
  const bool was_replaced = replaced != nullptr;
  replaced.reset();
  send_json(res, was_replaced ? 200 : 201, out);
  release_free_memory();  // compiling left garbage about the size of the layout
}

// The schema, or 404 naming what to do.
SchemaEntry find_schema(Server::State& st, const CacheScope& ns, const std::string& name) {
  std::lock_guard lk(st.schemas_mu);
  auto n = st.schemas.find(ns);
  if (n != st.schemas.end()) {
    auto it = n->second.find(name);
    if (it != n->second.end()) return it->second;
  }
  throw ApiError(404, "invalid_request_error",
                 "no schema '" + name + "'" + (scope_name(ns).empty() ? "" : " in namespace '" + scope_name(ns) + "'") +
                     "; register it with PUT /v1/schemas/" + name,
                 "schema", "schema_not_found");
}

void get_schema(Server::State& st, const HttpRequest& req, HttpResponse& res) {
  st.tenant_of(req);
  const std::string name = req.matches[1];
  const CacheScope ns = schema_namespace(st, req);
  const SchemaEntry e = find_schema(st, ns, name);
  json out = summary_json(name, e);
  out["namespace"] = scope_name(ns);
  out["source"] = e.source;
  out["layout"] = layout_json(*e.layout);
  send_json(res, 200, out);
}

void list_schemas(Server::State& st, const HttpRequest& req, HttpResponse& res) {
  st.tenant_of(req);
  const CacheScope ns = schema_namespace(st, req);
  json data = json::array();
  {
    std::lock_guard lk(st.schemas_mu);
    // find, not []: listing a namespace must not create state for it.
    if (auto it = st.schemas.find(ns); it != st.schemas.end())
      for (const auto& [name, e] : it->second) data.push_back(summary_json(name, e));
  }
  send_json(res, 200, {{"object", "list"}, {"namespace", scope_name(ns)}, {"data", data}});
}

void delete_schema(Server::State& st, const HttpRequest& req, HttpResponse& res) {
  st.tenant_of(req);
  const std::string name = req.matches[1];
  const CacheScope ns = schema_namespace(st, req);
  int64_t dropped = 0;
  {
    const SchemaEntry e = find_schema(st, ns, name);
    {
      std::lock_guard lk(st.schemas_mu);
      auto it = st.schemas.find(ns);
      if (it != st.schemas.end() && it->second.erase(name) && it->second.empty()) st.schemas.erase(it);
    }
    // Running requests keep their own references to the pages; only the store's go.
    dropped = drop_modules(st, ns, *e.layout);
  }
  release_free_memory();  // the compiled layout (~90x its source) is gone unless a job holds it
  send_json(res, 200, {{"name", name}, {"object", "schema"}, {"deleted", true},
                       {"modules_dropped", dropped}});
}

// Positions (the model's context) and KV slots the plan and its reply need.
void fit_plan(const Server::State& st, const pml::PromptPlan& plan, Generation& g) {
  int32_t& max = g.params.gen.max_tokens;
  const int64_t n = plan.n_tokens();
  const int64_t kv = st.scheduler->admission_tokens(g.scope.tenant);
  const int64_t room = std::min(st.n_ctx - plan.next_pos, kv - n);
  if (room <= 0)
    throw ApiError(400, "invalid_request_error",
                   "the PML prompt needs " + std::to_string(n) + " tokens up to position " +
                       std::to_string(plan.next_pos) + "; the context holds " +
                       std::to_string(std::min(st.n_ctx, kv)),
                   "prompt", "context_length_exceeded");
  if (max <= room) return;
  max = int32_t(room);  // cut to the context's end (fit_context)
  if (g.params.max_tokens_given) g.max_tokens_capped = max;
}

void pml_completion(Server::State& st, const HttpRequest& req, HttpResponse& res) {
  const json body = parse_body(req.body);
  st.tenant_of(req);
  auto g = std::make_shared<Generation>();
  g->params = parse_common(body, /*chat=*/false, st.opt.defaults, req.body);
  st.check_model(g->params.model);
  auto p = body.find("prompt");
  if (p == body.end() || !p->is_string())
    throw bad_field("prompt", "'prompt' must be the PML text of a <prompt schema=\"...\">",
                    p == body.end() ? "missing_required_parameter" : "invalid_type");
  // A module's KV cannot stand in for the recurrent state before it (the engine refuses
  // such plans too): say so before anything is planned, as a 400.
  if (st.model->config().n_recurrent > 0)
    throw ApiError(400, "invalid_request_error",
                   "PML modules are not available for " + st.model->config().arch_name +
                       ": a module's KV cannot stand in for the state of the model's recurrent layers",
                   "prompt", "unsupported_for_model");
  g->scope = st.scope_of_request(req, g->params.cache_salt);
  // Exact unless the request asks: modules then attend to the modules before them
  // through the recompute policy (docs/api.md "Approximate reuse").
  ReusePolicy exact = st.reuse_default;
  exact.mode = CacheReuse::kExact;
  g->params.gen.reuse = parse_reuse(body, exact);
  // Blocks are a chat prompt's request parts and content chunks; a PML prompt's reusable
  // units are its modules, which the usage reports (module hits and misses).
  if (g->params.gen.reuse.report_blocks)
    throw bad_field("cache_reuse_blocks",
                    "'cache_reuse_blocks' lists the blocks of a chat request's prompt; a PML prompt is "
                    "made of modules, reported in usage.promptcache (module_hits, module_misses)");
  pml::PromptPlan plan;
  std::shared_ptr<const pml::SchemaLayout> layout;
  try {
    const pml::PromptDoc doc = pml::parse_prompt(p->get<std::string>(), "prompt");
    layout = find_schema(st, g->scope, doc.schema).layout;
    plan = pml::plan_prompt(doc, *layout, *st.pml_encoder);
  } catch (const pml::PmlError& e) {
    return send_pml_error(res, e, "prompt");
  }
  if (plan.items.empty() || plan.items.back().kind != pml::PlanItem::Kind::kTokens)
    throw bad_field("prompt", "the PML prompt must end with text after its last import (e.g. "
                              "<user>...</user> or <assistant/>): its last token is computed "
                              "to produce the next token's logits");
  fit_plan(st, plan, *g);
  g->params.gen.scope = g->scope;
  g->prompt_tokens = plan.n_tokens();
  g->pml = true;
  g->meta = new_meta(st.model_id, /*chat=*/false);
  g->job = std::make_shared<Job>(g->params.gen, g->params.stops, st.model->tokenizer());
  g->job->schema = std::move(layout);
  g->job->plan = std::make_shared<const pml::PromptPlan>(std::move(plan));
  submit(st, *g);
  respond(st, std::move(g), req, res);
}

}  // namespace

void add_pml_routes(Server::State& st) {
  auto route = [&st](auto fn) { return guarded(st, fn); };
  // Names as PML allows them (docs/pml.md); anything else is no route.
  const char* named = R"(/v1/schemas/([^/?#]+))";
  add_route(st, "PUT", named, route(put_schema));
  add_route(st, "GET", named, route(get_schema));
  add_route(st, "DELETE", named, route(delete_schema));
  add_route(st, "GET", "/v1/schemas", route(list_schemas));
  add_route(st, "POST", "/v1/pml/completions", route(pml_completion));
}

}  // namespace pc::server
