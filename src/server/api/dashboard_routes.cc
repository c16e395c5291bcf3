// The cache dashboard and the JSON routes it reads, each scoped as the cache API is
// (Server::State::Scope: a tenant's own namespaces, or all for the admin tenant and
// for a server without keys):
//   GET  /dashboard                            the page (dashboard_page.cc), public
//   GET  /v1/cache/namespaces                  per namespace: memory/tier/module use, schemas
//   POST /v1/cache/entries/{id}/pin|unpin|evict  one entry by its listing id
//   GET  /v1/cache/history?seconds=N           per-second figures of recent requests
//   GET  /v1/cache/requests?limit=N            the last requests and their reuse
#include <set>

#include "engine/cache_admin.h"
#include "server/api/api_error.h"
#include "server/api/openai.h"
#include "server/state.h"

namespace pc::server {

const char* dashboard_page();  // dashboard_page.cc

namespace {

// An integer query parameter in [lo, hi]; `fallback` when absent; 400 naming it otherwise.
int int_param(const HttpRequest& req, const char* name, int fallback, int lo, int hi) {
  if (!req.has_param(name)) return fallback;
  const std::string v = req.get_param_value(name);
  const std::string why = std::string("'") + name + "' must be an integer in [" + std::to_string(lo) + ", " +
                          std::to_string(hi) + "]";
  if (v.empty() || v.size() > 9 || v.find_first_not_of("0123456789") != std::string::npos) throw bad_field(name, why);
  const int n = std::stoi(v);
  if (n < lo || n > hi) throw bad_field(name, why);
  return n;
}

void namespaces(Server::State& st, const HttpRequest& req, HttpResponse& res) {
  const Server::State::Scope scope = st.scope_of(req);
  std::map<std::string, json> out;
  auto slot = [&](const std::string& ns) -> json& {
    json& j = out[ns];
    if (j.is_null())
      j = {{"namespace", ns}, {"metrics_label", st.metrics.namespace_label(ns)},
           {"memory", {{"entries", 0}, {"bytes", 0}}}, {"modules", {{"entries", 0}, {"tokens", 0}, {"bytes", 0}}},
           {"tiers", json::object()}, {"schemas", json::array()}};
    return j;
  };
  if (!scope.all) slot(scope.tenant);
  st.scheduler->call([&](Engine& e) {
    CacheAdmin& cache = e.cache();
    for (const auto& [ns, u] : namespace_usage(e)) {
      const std::string own = ns.substr(0, ns.find('\x1f'));  // derived namespaces count as their own
      if (!scope.sees(own)) continue;
      json& m = slot(own)["memory"];
      m["entries"] = m["entries"].get<int64_t>() + u.entries;
      m["bytes"] = m["bytes"].get<int64_t>() + u.bytes;
    }
    for (const std::string& ns : cache.tenants()) {
      if (!scope.sees(ns)) continue;
      for (const ModuleEntryView& v : cache.module_entries(ns)) {
        json& m = slot(ns)["modules"];
        m["entries"] = m["entries"].get<int64_t>() + 1;
        m["tokens"] = m["tokens"].get<int64_t>() + v.tokens;
        m["bytes"] = m["bytes"].get<int64_t>() + v.bytes;
      }
    }
    for (const auto& [tier, usage] : tier_usage(e))
      for (const auto& [ns, u] : usage)
        if (scope.sees(ns)) slot(ns)["tiers"][tier] = {{"entries", u.entries}, {"bytes", u.bytes}};
  });
  {
    std::lock_guard lk(st.schemas_mu);
    for (const auto& [ns, schemas] : st.schemas) {
      if (!scope.sees(ns)) continue;
      for (const auto& [name, e] : schemas) slot(ns)["schemas"].push_back(name);
    }
  }
  json list = json::array();
  for (auto& [ns, j] : out) list.push_back(std::move(j));
  send_json(res, 200, {{"object", "list"}, {"tenant", scope.tenant}, {"all", scope.all}, {"namespaces", list}});
}

// POST /v1/cache/entries/{id}/{op}; body {"namespace": NS} optional (default: the
// caller's namespaces, searched in order).
void entry_op(Server::State& st, const HttpRequest& req, HttpResponse& res) {
  const Server::State::Scope scope = st.scope_of(req);
  const std::string id = req.matches[1];
  const std::string op_name = req.matches[2];
  const CacheAdmin::EntryOp op = op_name == "pin"     ? CacheAdmin::EntryOp::kPin
                                 : op_name == "unpin" ? CacheAdmin::EntryOp::kUnpin
                                                      : CacheAdmin::EntryOp::kEvict;
  const json body = req.body.empty() ? json::object() : parse_body(req.body);
  std::optional<std::string> wanted;
  if (auto n = body.find("namespace"); n != body.end() && !n->is_null()) {
    if (!n->is_string()) throw bad_field("namespace", "'namespace' must be a string", "invalid_type");
    if (!scope.sees(*n))
      throw ApiError(403, "invalid_request_error", "namespace '" + n->get<std::string>() + "' is not yours",
                     "namespace", "forbidden_namespace");
    wanted = n->get<std::string>();
  }
  CacheAdmin::EntryResult result = CacheAdmin::EntryResult::kNotFound;
  std::string found_ns;
  size_t freed = 0;
  st.scheduler->call([&](Engine& e) {
    std::vector<std::string> candidates;
    if (wanted) candidates.push_back(*wanted);
    else
      for (const std::string& ns : e.cache().tenants())
        if (scope.sees(ns)) candidates.push_back(ns);
    for (const std::string& ns : candidates) {
      result = e.cache().entry_op(ns, id, op, &freed);
      if (result != CacheAdmin::EntryResult::kNotFound) {
        found_ns = ns;
        return;
      }
    }
  });
  if (result == CacheAdmin::EntryResult::kNotFound)
    throw ApiError(404, "invalid_request_error",
                   op == CacheAdmin::EntryOp::kUnpin ? "no pinned entry '" + id + "' in your namespaces"
                                                     : "no entry '" + id + "' in your namespaces",
                   "id", "entry_not_found");
  if (result == CacheAdmin::EntryResult::kRefused)
    throw ApiError(409, "invalid_request_error", "entry '" + id + "' is pinned or in use; unpin it first", "id",
                   "entry_pinned");
  json out = {{"id", id}, {"namespace", found_ns}, {"op", op_name}};
  if (op == CacheAdmin::EntryOp::kEvict) out["freed_bytes"] = freed;
  send_json(res, 200, out);
}

void history(Server::State& st, const HttpRequest& req, HttpResponse& res) {
  const Server::State::Scope scope = st.scope_of(req);
  const int seconds = int_param(req, "seconds", 300, 1, int(RequestLog::kMaxAge));
  send_json(res, 200, st.requests.history([&](const std::string& ns) { return scope.sees(ns); }, seconds));
}

void requests(Server::State& st, const HttpRequest& req, HttpResponse& res) {
  const Server::State::Scope scope = st.scope_of(req);
  const int limit = int_param(req, "limit", 50, 1, 500);
  json data = json::array();
  for (const RequestRecord& r : st.requests.last([&](const std::string& ns) { return scope.sees(ns); }, size_t(limit)))
    data.push_back(record_json(r));
  send_json(res, 200, {{"object", "list"}, {"data", data}});
}

}  // namespace

void add_dashboard_routes(Server::State& st) {
  auto route = [&st](auto fn) { return guarded(st, fn); };
  add_route(st, "GET", "/dashboard", [](const HttpRequest&, HttpResponse& res) {
    res.status = 200;
    res.set_content(dashboard_page(), "text/html; charset=utf-8");
  });
  add_route(st, "GET", "/v1/cache/namespaces", route(namespaces));
  add_route(st, "POST", R"(/v1/cache/entries/([^/]+)/(pin|unpin|evict))", route(entry_op));
  add_route(st, "GET", "/v1/cache/history", route(history));
  add_route(st, "GET", "/v1/cache/requests", route(requests));
}

}  // namespace pc::server
