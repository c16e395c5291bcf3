// Cache admin: GET /v1/cache/stats, GET /v1/cache/entries, POST /v1/cache/pin,
// /v1/cache/unpin, /v1/cache/ttl, /v1/cache/evict. Everything touching the index
// runs on the engine thread (Scheduler::call). With API keys, a caller sees, counts
// and acts on its own tenant's namespaces only (Server::State::Scope); the
// --admin-tenant, and every caller of a server without keys, on all of them.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>

#include "engine/cache_admin.h"
#include "server/api/api_error.h"
#include "server/chat/chat_request.h"
#include "server/api/openai.h"
#include "server/chat/reply_store.h"
#include "server/state.h"

namespace pc::server {

namespace {

json pool_json(const PoolView& p) {
  const int64_t b = p.page_bytes;
  return {{"page_size", p.page_size},
          {"page_bytes", b},
          {"kv_type", p.kv_type},
          {"bytes_per_token", {{p.kv_type, p.bytes_per_token()}}},
          {"pages", {{"capacity", p.pages}, {"in_use", p.pages_in_use},
                     {"cached", p.pages_cached}, {"free", p.pages_free}}},
          {"bytes", {{"capacity", b * p.pages}, {"in_use", b * p.pages_in_use},
                     {"cached", b * p.pages_cached}, {"free", b * p.pages_free}}}};
}

// The engine's counters, then one object per tier under its name ("disk", "redis").
// Sizes a tier cannot know (-1) are left out; "hits" is the engine's count of entries
// that tier supplied.
json tiers_json(const TierReport& t) {
  const TierCounters& s = t.totals;
  json out = {{"lookups", s.lookups}, {"misses", s.misses}, {"promoted_tokens", s.promoted_tokens},
              {"module_loads", s.module_loads}, {"block_loads", s.block_loads}, {"writes", s.writes}, {"write_failures", s.write_failures},
              {"writes_skipped", s.writes_skipped}, {"writes_deferred", s.writes_deferred},
              {"tier_resets", s.tier_resets}, {"rewritten", s.rewritten},
              {"written_bytes", s.written_bytes}, {"links_present", s.links_present},
              {"links_read", s.links_read}, {"states_written", s.states_written},
              {"state_bytes_written", s.state_bytes_written}, {"states_read", s.states_read},
              {"state_bytes_read", s.state_bytes_read}, {"errors", s.errors},
              {"in_flight", t.writes_in_flight}};
  const std::vector<TierStats>& tiers = t.tiers;
  json order = json::array();
  for (size_t i = 0; i < tiers.size(); ++i) {
    const TierStats& ts = tiers[i];
    json o = {{"connected", ts.connected}, {"hits", s.hits[i]}, {"misses", ts.misses}, {"puts", ts.puts},
              {"put_failures", ts.put_failures}, {"errors", ts.errors}, {"corrupt_deleted", ts.corrupt_deleted}};
    if (ts.entries >= 0) o["entries"] = ts.entries;
    if (ts.bytes >= 0) o["bytes"] = ts.bytes;
    if (ts.tokens >= 0) o["tokens"] = ts.tokens;
    o["bytes_written"] = ts.bytes_written;
    o["bytes_read"] = ts.bytes_read;
    if (ts.capacity_bytes >= 0) o["capacity"] = ts.capacity_bytes;
    if (ts.ttl_seconds >= 0) o["ttl_seconds"] = ts.ttl_seconds;
    for (const auto& [name, v] : ts.counters) o[name] = v;
    for (const auto& [name, v] : ts.info) o[name] = v;
    order.push_back(ts.name);
    out[ts.name] = std::move(o);
  }
  out["order"] = std::move(order);
  return out;
}

json totals_json(const TenantTotals& t) {
  return {{"requests", t.requests}, {"prompt_tokens", t.prompt_tokens}, {"cached_tokens", t.cached_tokens},
          {"approximate_tokens", t.approximate_tokens}, {"computed_tokens", t.computed_tokens},
          {"generated_tokens", t.generated_tokens}, {"misses", t.misses},
          {"hit_rate", t.prompt_tokens ? double(t.cached_tokens) / double(t.prompt_tokens) : 0.0}};
}

// A tenant's own figures: its requests since start, and what its namespaces hold in
// memory, in the module store and in each listable tier, against the capacities.
// Nothing another tenant does moves them.
json tenant_stats(Server::State& st, const Server::State::Scope& scope) {
  json out = {{"tenant", scope.tenant}, {"engine", totals_json(st.requests.totals(scope.tenant))}};
  st.scheduler->call([&](Engine& e) {
    CacheAdmin& cache = e.cache();
    NamespaceUsage mem;
    for (const auto& [ns, u] : namespace_usage(e))
      if (scope.sees(ns)) {
        mem.entries += u.entries;
        mem.bytes += u.bytes;
      }
    const PoolView pool = cache.stats().pool;
    out["index"] = {{"entries", mem.entries}, {"bytes", mem.bytes}};
    out["memory"] = {{"bytes", {{"capacity", pool.page_bytes * pool.pages}, {"cached", mem.bytes}}}};
    json modules = {{"entries", 0}, {"tokens", 0}, {"bytes", 0}};
    for (const CacheScope& ns : cache.scopes()) {
      if (!scope.sees(ns)) continue;
      for (const ModuleEntryView& m : cache.module_entries(ns)) {
        modules["entries"] = modules["entries"].get<int64_t>() + 1;
        modules["tokens"] = modules["tokens"].get<int64_t>() + m.tokens;
        modules["bytes"] = modules["bytes"].get<int64_t>() + m.bytes;
      }
    }
    out["modules"] = modules;
    if (const std::optional<TierReport> t = cache.tier_report()) {
      json tiers = {{"order", json::array()}};
      for (const TierStats& ts : t->tiers) {
        tiers["order"].push_back(ts.name);
        json o = {{"connected", ts.connected}};
        if (ts.capacity_bytes >= 0) o["capacity"] = ts.capacity_bytes;
        tiers[ts.name] = o;
      }
      for (const auto& [tier, usage] : tier_usage(e)) {
        NamespaceUsage sum;
        for (const auto& [ns, u] : usage)
          if (scope.sees(ns)) {
            sum.entries += u.entries;
            sum.bytes += u.bytes;
          }
        tiers[tier]["entries"] = sum.entries;
        tiers[tier]["bytes"] = sum.bytes;
      }
      out["tiers"] = tiers;
    }
  });
  return out;
}

void stats(Server::State& st, const HttpRequest& req, HttpResponse& res) {
  const Server::State::Scope scope = st.scope_of(req);
  if (!scope.all) return send_json(res, 200, tenant_stats(st, scope));
  json out;
  st.scheduler->call([&](Engine& e) {
    const CacheStats c = e.cache().stats();
    const PrefixCounters& r = c.prefix;
    const EngineStats& s = c.engine;
    const ModuleCounters& m = c.modules;
    out["memory"] = pool_json(c.pool);
    out["index"] = {{"entries", r.entries}, {"tokens", r.tokens}, {"bytes", r.bytes},
                    {"hits", r.hits}, {"misses", r.misses}, {"hit_tokens", r.hit_tokens},
                    {"evicted", r.evicted}, {"metadata_bytes", r.metadata_bytes},
                    {"retained", r.retained}, {"retained_pages", r.retained_pages},
                    {"retention_refused", r.retention_refused},
                    {"retentions_ended", r.retention_overridden},
                    {"state_snapshots", r.snapshots}, {"state_snapshot_bytes", r.snapshot_bytes}};
    out["modules"] = {{"entries", m.entries}, {"tokens", m.tokens}, {"bytes", m.bytes},
                      {"hits", m.hits}, {"misses", m.misses}, {"evicted", m.evicted}};
    out["engine"] = {{"requests", s.requests}, {"prompt_tokens", s.prompt_tokens},
                     {"cached_tokens", s.cached_tokens}, {"computed_tokens", s.computed_tokens},
                     {"generated_tokens", s.generated_tokens}, {"preemptions", s.preemptions},
                     {"module_encodes", s.module_encodes},
                     {"hit_rate", s.prompt_tokens ? double(s.cached_tokens) / s.prompt_tokens : 0.0}};
    if (const std::optional<TierReport> t = e.cache().tier_report()) out["tiers"] = tiers_json(*t);
    // Read between the same two steps as the memory figures above, so that a
    // finished sequence is never counted running while its pages show freed, or
    // the other way round.
    out["sequences"] = {{"running", st.scheduler->running()}, {"queued", st.scheduler->queued()}};
  });
  out["conversation_memory"] = {{"replies", st.memory.size()}, {"tokens", st.memory.tokens()}};
  if (st.shared_replies) {
    const ReplyStoreStats r = st.shared_replies->stats();
    out["conversation_memory"]["shared"] = {{"lookups", r.lookups}, {"hits", r.hits}, {"stores", r.stores},
                                            {"failures", r.failures}, {"dropped", r.dropped},
                                            {"resets", r.resets}, {"corrupt", r.corrupt}};
  }
  out["requests"] = totals_json(st.requests.all_totals());
  send_json(res, 200, out);
}

json ttl_json(const std::optional<double>& t) { return t ? json(*t) : json(nullptr); }

// Lists each visible namespace's entries: prefix entries in memory, modules in
// memory, and entries of the tiers that can list theirs.
void entries(Server::State& st, const HttpRequest& req, HttpResponse& res) {
  const Server::State::Scope scope = st.scope_of(req);
  // The namespaces that hold something: the caller's own (even empty) and every one
  // with entries in memory or a listable tier. Nothing is kept per namespace besides.
  std::set<CacheScope> all = {CacheScope(scope.all ? "" : scope.tenant)};
  json out = {{"object", "list"}, {"namespaces", json::array()}};
  st.scheduler->call([&](Engine& e) {
    CacheAdmin& cache = e.cache();
    for (const CacheScope& t : cache.scopes()) all.insert(t);
    for (const auto& [tier, usage] : tier_usage(e))
      for (const auto& [ns, u] : usage) all.insert(ns);
    for (const CacheScope& ns : all) {
      if (!scope.sees(ns)) continue;
      json list = json::array();
      for (const PrefixEntryView& v : cache.prefix_entries(ns))
        list.push_back({{"id", v.id},
                        {"tokens", v.tokens},
                        {"leaf_tokens", v.leaf_tokens},
                        {"bytes", v.bytes},
                        {"tier", "memory"},
                        {"age_seconds", v.age_seconds},
                        {"idle_seconds", v.idle_seconds},
                        {"hits", v.hits},
                        {"leaf_hits", v.leaf_hits},
                        {"pinned", v.pinned},
                        {"in_use", v.in_use},
                        {"ttl_seconds", ttl_json(v.ttl_seconds)},
                        {"retention", v.expires_at ? json{{"tokens", v.retained_tokens},
                                                          {"expires_at", *v.expires_at},
                                                          {"seconds", v.retention_seconds}}
                                                   : json(nullptr)},
                        {"expires_at", ttl_json(v.expires_at)}});
      json modules = json::array();
      for (const ModuleEntryView& m : cache.module_entries(ns))
        modules.push_back({{"id", m.id}, {"path", m.path}, {"shift", m.shift}, {"tokens", m.tokens}, {"bytes", m.bytes},
                           {"hits", m.hits}, {"pinned", m.pinned}, {"ttl_seconds", ttl_json(m.ttl_seconds)}});
      for (const TierEntryView& t : cache.tier_entries(ns))
        list.push_back({{"id", t.id}, {"tokens", t.tokens}, {"bytes", t.bytes}, {"tier", t.tier},
                        {"kind", t.kind},
                        {"expires_at", ttl_json(t.expires_at)}});
      out["namespaces"].push_back({{"namespace", scope_name(ns)}, {"metrics_label", st.metrics.namespace_label(ns)},
                                   {"entries", list}, {"modules", modules}});
    }
  });
  send_json(res, 200, out);
}

// Token ids named by a pin/unpin body: "prompt" (text or ids, as /v1/completions) or
// "messages" (rendered as /v1/chat/completions would, generation prompt included).
std::vector<int32_t> body_tokens(Server::State& st, const json& body, const CacheScope& ns) {
  if (auto p = body.find("prompt"); p != body.end()) {
    if (p->is_string()) return encode_piece(st.model->tokenizer(), p->get<std::string>(), true);
    if (p->is_array()) {
      std::vector<int32_t> ids;
      const int64_t V = st.model->tokenizer().n_vocab();
      for (const json& t : *p) {
        if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= V)
          throw bad_field("prompt", "token ids must be integers in [0, " + std::to_string(V) + ")");
        ids.push_back(t.get<int32_t>());
      }
      return ids;
    }
    throw bad_field("prompt", "'prompt' must be a string or an array of token ids");
  }
  if (auto m = body.find("messages"); m != body.end()) {
    if (!st.chat_template) throw bad_field("messages", "the model has no chat template");
    check_messages(body);
    check_tools(body);
    check_prompt_bytes(*m, st.max_prompt_bytes, st.n_ctx, "messages");
    return build_chat_prompt(*st.chat_template, st.model->tokenizer(), st.memory, ns,
                             parse_tool_arguments(template_messages(*m)), chat_extra(body), st.tool_format)
        .ids;
  }
  throw bad_field("prompt", "give 'prompt' or 'messages'", "missing_required_parameter");
}

// The namespace a pin/unpin/ttl body names: the caller's (with its cache_salt), or
// with "namespace" any namespace the caller's scope sees (the admin tenant: any).
CacheScope target_namespace(Server::State& st, const HttpRequest& req, const json& body) {
  std::string salt;
  if (auto s = body.find("cache_salt"); s != body.end() && !s->is_null()) {
    if (!s->is_string()) throw bad_field("cache_salt", "'cache_salt' must be a string", "invalid_type");
    salt = *s;
  }
  auto n = body.find("namespace");
  if (n == body.end() || n->is_null()) return st.scope_of_request(req, salt);
  if (!n->is_string()) throw bad_field("namespace", "'namespace' must be a string", "invalid_type");
  if (!salt.empty()) throw bad_field("namespace", "give 'namespace' or 'cache_salt', not both");
  // A name is looked up, never parsed: the caller's own scope without a salt, or a
  // scope the caches hold that the caller sees.
  const Server::State::Scope scope = st.scope_of(req);
  const std::string name = *n;
  if (scope_name(CacheScope(scope.tenant)) == name) return CacheScope(scope.tenant);
  std::optional<CacheScope> found;
  st.scheduler->call([&](Engine& e) {
    for (const CacheScope& c : e.cache().scopes())
      if (scope.sees(c) && scope_name(c) == name) found = c;
  });
  if (found) return *found;
  if (scope.all)
    throw ApiError(404, "invalid_request_error", "no cached entries in namespace '" + name + "'", "namespace",
                   "not_cached");
  throw ApiError(403, "invalid_request_error", "namespace '" + name + "' is not yours", "namespace",
                 "forbidden_namespace");
}

void pin(Server::State& st, const HttpRequest& req, HttpResponse& res, bool on) {
  const json body = parse_body(req.body);
  const CacheScope ns = target_namespace(st, req, body);
  const std::vector<int32_t> ids = body_tokens(st, body, ns);
  if (ids.empty()) throw bad_field("prompt", "the prompt is empty");
  bool ok = false;
  st.scheduler->call([&](Engine& e) {
    ok = on ? e.cache().pin(ns, ids) : e.cache().unpin(ns, ids);
  });
  if (!ok)
    throw ApiError(404, "invalid_request_error",
                   on ? "that prompt is not cached (run it first)" : "no pin ends at that prompt",
                   "prompt", "not_cached");
  send_json(res, 200, {{"pinned", on}, {"tokens", ids.size()}, {"namespace", scope_name(ns)}});
}

// POST /v1/cache/ttl: the entry ending exactly at the prompt expires after
// ttl_seconds (0 clears it); the engine thread drops expired entries within a
// quarter second, or at once when it needs pages.
void ttl(Server::State& st, const HttpRequest& req, HttpResponse& res) {
  const json body = parse_body(req.body);
  const CacheScope ns = target_namespace(st, req, body);
  auto t = body.find("ttl_seconds");
  if (t == body.end() || t->is_null())
    throw bad_field("ttl_seconds", "'ttl_seconds' is required", "missing_required_parameter");
  if (!t->is_number() || !std::isfinite(t->get<double>()) || t->get<double>() < 0 ||
      t->get<double>() > 1e9)
    throw bad_field("ttl_seconds", "'ttl_seconds' must be a number of seconds in [0, 1e9] (0 clears the TTL)");
  const double seconds = t->get<double>();
  const std::vector<int32_t> ids = body_tokens(st, body, ns);
  if (ids.empty()) throw bad_field("prompt", "the prompt is empty");
  using Clock = CacheAdmin::Clock;
  const auto at = seconds == 0 ? Clock::time_point::max()
                               : Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                    std::chrono::duration<double>(seconds));
  bool ok = false;
  st.scheduler->call([&](Engine& e) { ok = e.cache().set_expiry(ns, ids, at); });
  if (!ok)
    throw ApiError(404, "invalid_request_error", "that prompt is not cached (run it first)", "prompt",
                   "not_cached");
  send_json(res, 200, {{"ttl_seconds", seconds == 0 ? json(nullptr) : json(seconds)},
                       {"tokens", ids.size()}, {"namespace", scope_name(ns)}});
}

// Everything (scope.all), or only the caller's namespaces.
void evict(Server::State& st, const HttpRequest& req, HttpResponse& res) {
  const Server::State::Scope scope = st.scope_of(req);
  const json body = req.body.empty() ? json::object() : parse_body(req.body);
  int64_t bytes = -1;
  if (auto b = body.find("bytes"); b != body.end() && !b->is_null()) {
    if (!b->is_number_integer() || b->get<int64_t>() < 0)
      throw bad_field("bytes", "'bytes' must be a non-negative integer");
    bytes = b->get<int64_t>();
  }
  size_t freed = 0;
  int64_t ended = 0;
  json after;
  st.scheduler->call([&](Engine& e) {
    const PoolView before = e.cache().stats().pool;
    const size_t want = bytes < 0 ? size_t(before.pages) * size_t(before.page_bytes) : size_t(bytes);
    if (scope.all) {
      freed = e.cache().evict(want, &ended);
      after = pool_json(e.cache().stats().pool);
    } else {
      freed = e.cache().evict_scopes([&](const CacheScope& ns) { return scope.sees(ns); }, want, &ended);
    }
  });
  json out = {{"freed_bytes", freed}, {"retentions_ended", ended}};
  if (scope.all) out["memory"] = after;  // the pool is shared: only the admin sees it
  send_json(res, 200, out);
}

}  // namespace

void add_cache_routes(Server::State& st) {
  auto route = [&st](auto fn) { return guarded(st, fn); };
  add_route(st, "GET", "/v1/cache/stats", route(stats));
  add_route(st, "GET", "/v1/cache/entries", route(entries));
  add_route(st, "POST", "/v1/cache/pin", route([](Server::State& s, const HttpRequest& q,
                                         HttpResponse& r) { pin(s, q, r, true); }));
  add_route(st, "POST", "/v1/cache/unpin", route([](Server::State& s, const HttpRequest& q,
                                           HttpResponse& r) { pin(s, q, r, false); }));
  add_route(st, "POST", "/v1/cache/evict", route(evict));
  add_route(st, "POST", "/v1/cache/ttl", route(ttl));
}

std::map<std::string, std::map<CacheScope, NamespaceUsage>> tier_usage(Engine& e) { return e.cache().tier_usage(); }

std::map<CacheScope, NamespaceUsage> namespace_usage(Engine& e) { return e.cache().memory_usage(); }

}  // namespace pc::server
