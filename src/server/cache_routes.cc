// Cache admin: GET /v1/cache/stats, GET /v1/cache/entries, POST /v1/cache/pin,
// /v1/cache/unpin, /v1/cache/evict. Everything touching the index runs on the
// engine thread (Scheduler::call). With API keys, a caller sees and pins only its
// own tenant's namespaces.
#include <algorithm>
#include <stdexcept>

#include "kv/page_pool.h"
#include "kv/radix_index.h"
#include "server/api_error.h"
#include "server/openai.h"
#include "server/state.h"

namespace pc::server {

namespace {

bool visible(const std::string& ns, const std::string& tenant, bool keys) {
  return !keys || ns == tenant || ns.rfind(tenant + "/salt:", 0) == 0;
}

json pool_json(const PagePool& p) {
  return {{"page_size", p.page_size()},
          {"page_bytes", p.page_bytes()},
          {"pages", {{"capacity", p.n_pages()}, {"in_use", p.n_in_use()},
                     {"cached", p.n_cached()}, {"free", p.n_free()}}},
          {"bytes", {{"capacity", p.bytes_capacity()}, {"in_use", p.bytes_in_use()},
                     {"cached", p.bytes_cached()}, {"free", p.bytes_free()}}}};
}

void stats(Server::State& st, const httplib::Request& req, httplib::Response& res) {
  st.tenant_of(req);
  json out;
  st.scheduler->call([&](Engine& e) {
    const RadixStats r = e.index().stats();
    const EngineStats& s = e.stats();
    out["memory"] = pool_json(e.page_pool());
    out["index"] = {{"entries", r.entries}, {"tokens", r.tokens}, {"bytes", r.bytes},
                    {"hits", r.hits}, {"misses", r.misses}, {"hit_tokens", r.hit_tokens},
                    {"evicted", r.evicted}, {"metadata_bytes", e.index().metadata_bytes()}};
    out["engine"] = {{"requests", s.requests}, {"prompt_tokens", s.prompt_tokens},
                     {"cached_tokens", s.cached_tokens}, {"computed_tokens", s.computed_tokens},
                     {"generated_tokens", s.generated_tokens},
                     {"hit_rate", s.prompt_tokens ? double(s.cached_tokens) / s.prompt_tokens : 0.0}};
  });
  out["sequences"] = {{"running", st.scheduler->running()}, {"queued", st.scheduler->queued()}};
  out["conversation_memory"] = {{"replies", st.memory.size()}, {"tokens", st.memory.tokens()}};
  send_json(res, 200, out);
}

// Lists each visible namespace's tree. The index has no iteration API yet, so nodes
// are found by id (node() throws for a dead id) and a namespace's root by a
// one-token match (which never matches, so it only reports the root).
// TODO(kv): replace with RadixIndex::roots() / children() when the index has them.
void entries(Server::State& st, const httplib::Request& req, httplib::Response& res) {
  const std::string tenant = st.tenant_of(req);
  const bool keys = !st.api_keys.empty();
  std::vector<std::string> all, names;
  {
    std::lock_guard lk(st.ns_mu);
    all.assign(st.namespaces.begin(), st.namespaces.end());
  }
  if (std::find(all.begin(), all.end(), "") == all.end()) all.insert(all.begin(), "");
  for (const std::string& ns : all)
    if (visible(ns, tenant, keys)) names.push_back(ns);
  json out = {{"object", "list"}, {"namespaces", json::array()}};
  st.scheduler->call([&](Engine& e) {
    RadixIndex& idx = e.index();
    const size_t page_bytes = e.page_pool().page_bytes();
    std::map<int32_t, std::string> root_ns;  // root id → namespace
    for (const std::string& ns : all) {  // every root, to know when all nodes were seen
      const int32_t probe[1] = {0};
      const PrefixMatch m = idx.match_prefix(e.ns(ns), probe);
      if (m.node >= 0) root_ns[m.node] = ns;
    }
    const RadixStats rs = idx.stats();
    // Every live node: entries + the roots of all namespaces (ours are all known).
    std::map<int32_t, RadixIndex::NodeView> nodes;
    int64_t want = rs.entries + int64_t(root_ns.size()), misses = 0;
    for (int32_t id = 0; int64_t(nodes.size()) < want && misses < 1000000; ++id) {
      try {
        nodes.emplace(id, idx.node(id));
      } catch (const std::logic_error&) {
        ++misses;
      }
    }
    std::map<std::string, json> per_ns;
    for (const auto& [id, v] : nodes) {
      if (v.parent < 0 || !v.leaf) continue;
      int64_t depth = 0, pins = v.pins;
      int32_t top = id;
      for (int32_t n = id; n >= 0; n = nodes.count(n) ? nodes.at(n).parent : -1) {
        top = n;
        if (nodes.count(n)) {
          depth += int64_t(nodes.at(n).tokens.size());
          pins += nodes.at(n).pins;
        }
      }
      auto r = root_ns.find(top);
      if (r == root_ns.end()) continue;  // another tenant's tree
      std::set<int32_t> pages;
      for (int32_t n = id; n >= 0 && nodes.count(n); n = nodes.at(n).parent)
        for (const PageSlice& s : nodes.at(n).slices) pages.insert(s.page);
      per_ns[r->second].push_back({{"id", id}, {"tokens", depth}, {"leaf_tokens", v.tokens.size()},
                                   {"bytes", pages.size() * page_bytes}, {"pinned", pins > 0},
                                   {"in_use", v.lock_ref > 0}, {"tier", "memory"}});
    }
    for (const std::string& ns : names) {
      json list = per_ns.count(ns) ? per_ns[ns] : json::array();
      out["namespaces"].push_back({{"namespace", ns}, {"entries", list}});
    }
  });
  send_json(res, 200, out);
}

// Token ids named by a pin/unpin body: "prompt" (text or ids, as /v1/completions) or
// "messages" (rendered as /v1/chat/completions would, generation prompt included).
std::vector<int32_t> body_tokens(Server::State& st, const json& body, const std::string& ns) {
  if (auto p = body.find("prompt"); p != body.end()) {
    if (p->is_string()) return encode_piece(st.model->tokenizer(), p->get<std::string>(), true);
    if (p->is_array()) {
      std::vector<int32_t> ids;
      for (const json& t : *p) {
        if (!t.is_number_integer()) throw bad_field("prompt", "token ids must be integers");
        ids.push_back(t.get<int32_t>());
      }
      return ids;
    }
    throw bad_field("prompt", "'prompt' must be a string or an array of token ids");
  }
  if (auto m = body.find("messages"); m != body.end()) {
    if (!st.chat_template) throw bad_field("messages", "the model has no chat template");
    if (!m->is_array()) throw bad_field("messages", "'messages' must be an array");
    return build_chat_prompt(*st.chat_template, st.model->tokenizer(), st.memory, ns, *m,
                             body.value("chat_template_kwargs", json::object())).ids;
  }
  throw bad_field("prompt", "give 'prompt' or 'messages'", "missing_required_parameter");
}

void pin(Server::State& st, const httplib::Request& req, httplib::Response& res, bool on) {
  const json body = parse_body(req.body);
  std::string salt;
  if (auto s = body.find("cache_salt"); s != body.end() && s->is_string()) salt = *s;
  const std::string ns = st.namespace_of(req, salt);
  const std::vector<int32_t> ids = body_tokens(st, body, ns);
  if (ids.empty()) throw bad_field("prompt", "the prompt is empty");
  bool ok = false;
  st.scheduler->call([&](Engine& e) {
    ok = on ? e.index().pin(e.ns(ns), ids) : e.index().unpin(e.ns(ns), ids);
  });
  if (!ok)
    throw ApiError(404, "invalid_request_error",
                   on ? "that prompt is not cached (run it first)" : "no pin ends at that prompt",
                   "prompt", "not_cached");
  send_json(res, 200, {{"pinned", on}, {"tokens", ids.size()}, {"namespace", ns}});
}

void evict(Server::State& st, const httplib::Request& req, httplib::Response& res) {
  st.tenant_of(req);
  const json body = req.body.empty() ? json::object() : parse_body(req.body);
  int64_t bytes = -1;
  if (auto b = body.find("bytes"); b != body.end() && !b->is_null()) {
    if (!b->is_number_integer() || b->get<int64_t>() < 0)
      throw bad_field("bytes", "'bytes' must be a non-negative integer");
    bytes = b->get<int64_t>();
  }
  size_t freed = 0;
  json after;
  st.scheduler->call([&](Engine& e) {
    freed = e.index().evict(bytes < 0 ? e.page_pool().bytes_capacity() : size_t(bytes));
    after = pool_json(e.page_pool());
  });
  send_json(res, 200, {{"freed_bytes", freed}, {"memory", after}});
}

}  // namespace

void add_cache_routes(Server::State& st) {
  auto route = [&st](auto fn) {
    return [&st, fn](const httplib::Request& req, httplib::Response& res) {
      guard(res, [&] { fn(st, req, res); });
    };
  };
  st.http.Get("/v1/cache/stats", route(stats));
  st.http.Get("/v1/cache/entries", route(entries));
  st.http.Post("/v1/cache/pin", route([](Server::State& s, const httplib::Request& q,
                                         httplib::Response& r) { pin(s, q, r, true); }));
  st.http.Post("/v1/cache/unpin", route([](Server::State& s, const httplib::Request& q,
                                           httplib::Response& r) { pin(s, q, r, false); }));
  st.http.Post("/v1/cache/evict", route(evict));
}

}  // namespace pc::server
