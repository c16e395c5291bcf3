#include "server/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <xxhash.h>

#include <cstdio>
#include <random>
#include <sstream>

#include "engine/cache_admin.h"

namespace pc::server {

namespace {
using namespace prometheus;

// Latency buckets in seconds, 1 ms .. 30 s.
Histogram::BucketBoundaries latency_buckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
}
}  // namespace

Metrics::Metrics() : reg_(std::make_shared<Registry>()) {
  std::random_device rd;
  label_secret_.resize(XXH3_SECRET_SIZE_MIN + 64);
  for (char& c : label_secret_) c = char(rd());
  requests_ = &BuildCounter().Name("promptcache_requests_total")
                   .Help("HTTP requests by route and status").Register(*reg_);
  tokens_ = &BuildCounter().Name("promptcache_tokens_total")
                 .Help("Tokens by kind: prompt, cached (prompt tokens whose KV was reused), "
                       "computed (prompt tokens computed), generated").Register(*reg_);
  prompt_tokens_ = &tokens_->Add({{"kind", "prompt"}});
  cached_tokens_ = &tokens_->Add({{"kind", "cached"}});
  misses_ = &BuildCounter().Name("promptcache_cache_miss_total")
                 .Help("Chat requests whose history did not fully hit, by reason").Register(*reg_);
  miss_tokens_ = &BuildCounter().Name("promptcache_cache_miss_tokens_total")
                      .Help("Prompt tokens computed because history did not fully hit, by reason").Register(*reg_);
  disconnects_ = &BuildCounter().Name("promptcache_client_disconnects_total")
                      .Help("Requests (streamed or whole) cancelled because the client went away").Register(*reg_).Add({});
  ttft_ = &BuildHistogram().Name("promptcache_time_to_first_token_seconds")
               .Help("Request arrival to first generated token").Register(*reg_)
               .Add({}, latency_buckets());
  itl_ = &BuildHistogram().Name("promptcache_inter_token_latency_seconds")
              .Help("Time between consecutive generated tokens of a sequence").Register(*reg_)
              .Add({}, latency_buckets());
  queue_wait_ = &BuildHistogram().Name("promptcache_queue_wait_seconds")
                     .Help("Request arrival to its sequence starting").Register(*reg_)
                     .Add({}, latency_buckets());
  auto& gauges = BuildGauge().Name("promptcache_sequences").Help("Sequences by state").Register(*reg_);
  queued_ = &gauges.Add({{"state", "queued"}});
  running_ = &gauges.Add({{"state", "running"}});
  hit_rate_ = &BuildGauge().Name("promptcache_prefix_hit_rate")
                   .Help("Cached prompt tokens / prompt tokens since start").Register(*reg_).Add({});
  cache_bytes_ = &BuildGauge().Name("promptcache_kv_bytes")
                      .Help("KV page bytes by state (tier memory)").Register(*reg_);
  kv_bytes_per_token_ = &BuildGauge().Name("promptcache_kv_bytes_per_token")
                             .Help("Bytes one cached token's KV takes, by KV type (memory and tier payloads)")
                             .Register(*reg_);
  tier_tokens_ = &BuildGauge().Name("promptcache_tier_tokens")
                      .Help("Tokens whose KV a tier below memory holds (tiers that can know: disk)")
                      .Register(*reg_);
  tier_io_bytes_ = &BuildGauge().Name("promptcache_tier_io_bytes")
                        .Help("Entry bytes each tier below memory wrote and read since start (dir: written, read)")
                        .Register(*reg_);
  auto& idx = BuildGauge().Name("promptcache_prefix_index")
                  .Help("Radix prefix index: entries (nodes), tokens, evicted nodes, recurrent-state snapshots and their bytes").Register(*reg_);
  cache_entries_ = &idx.Add({{"what", "entries"}});
  cache_tokens_ = &idx.Add({{"what", "tokens"}});
  cache_evicted_ = &idx.Add({{"what", "evicted"}});
  cache_snapshots_ = &idx.Add({{"what", "state_snapshots"}});
  cache_snapshot_bytes_ = &idx.Add({{"what", "state_snapshot_bytes"}});
  ns_bytes_ = &BuildGauge().Name("promptcache_cache_bytes")
                   .Help("KV bytes cached per namespace (a keyed hash of tenant/cache_salt) and tier")
                   .Register(*reg_);
  ns_entries_ = &BuildGauge().Name("promptcache_cache_entries")
                     .Help("Cached entries per namespace and tier (memory: prefix-tree leaves; disk: "
                           "entry files, prefixes and module segments)").Register(*reg_);
  tier_ops_ = &BuildGauge().Name("promptcache_tier_ops")
                   .Help("Counters of each tier below memory since start (tier: disk, redis; op: hits, "
                         "misses, puts, put_failures, errors, corrupt_deleted, connected, entries, and the "
                         "tier's own: evicted, io_errors, unavailable, ...; tier \"all\": the engine's "
                         "lookups, promotions and write-through)")
                   .Register(*reg_);
  redis_up_ = &BuildGauge().Name("promptcache_redis_up")
                   .Help("1 when the Redis tier answered its last command, 0 when it is unreachable "
                         "(the server keeps serving from memory and disk); absent without --redis")
                   .Register(*reg_);
}

Metrics::~Metrics() = default;

std::string Metrics::render() const {
  std::ostringstream os;
  TextSerializer().Serialize(os, reg_->Collect());
  return os.str();
}

void Metrics::count_request(const std::string& route, int status) {
  requests_->Add({{"route", route}, {"status", std::to_string(status)}}).Increment();
}

void Metrics::count_tokens(int64_t prompt, int64_t cached, int64_t computed, int64_t generated) {
  prompt_tokens_->Increment(double(prompt));
  cached_tokens_->Increment(double(cached));
  tokens_->Add({{"kind", "computed"}}).Increment(double(computed));
  tokens_->Add({{"kind", "generated"}}).Increment(double(generated));
  const double p = prompt_tokens_->Value();
  hit_rate_->Set(p > 0 ? cached_tokens_->Value() / p : 0.0);
}

void Metrics::count_miss(const std::string& reason, int64_t tokens) {
  misses_->Add({{"reason", reason}}).Increment();
  miss_tokens_->Add({{"reason", reason}}).Increment(double(std::max<int64_t>(0, tokens)));
}

void Metrics::count_disconnect() { disconnects_->Increment(); }
void Metrics::observe_ttft(double s) { ttft_->Observe(s); }
void Metrics::observe_itl(double s) { itl_->Observe(s); }
void Metrics::observe_queue_wait(double s) { queue_wait_->Observe(s); }

void Metrics::set_queue(size_t queued, size_t running) {
  queued_->Set(double(queued));
  running_->Set(double(running));
}

void Metrics::set_cache(const CacheStats& s) {
  const double page = double(s.pool.page_bytes);
  kv_bytes_per_token_->Add({{"kv_type", s.pool.kv_type}}).Set(double(s.pool.bytes_per_token()));
  cache_bytes_->Add({{"tier", "memory"}, {"state", "in_use"}}).Set(page * s.pool.pages_in_use);
  cache_bytes_->Add({{"tier", "memory"}, {"state", "cached"}}).Set(page * s.pool.pages_cached);
  cache_bytes_->Add({{"tier", "memory"}, {"state", "free"}}).Set(page * s.pool.pages_free);
  cache_entries_->Set(double(s.prefix.entries));
  cache_tokens_->Set(double(s.prefix.tokens));
  cache_evicted_->Set(double(s.prefix.evicted));
  cache_snapshots_->Set(double(s.prefix.snapshots));
  cache_snapshot_bytes_->Set(double(s.prefix.snapshot_bytes));
}

std::string Metrics::namespace_label(const CacheScope& scope) const {
  const std::string key = scope_key(scope);
  const uint64_t h = XXH3_64bits_withSecret(key.data(), key.size(), label_secret_.data(), label_secret_.size());
  char buf[24];
  std::snprintf(buf, sizeof buf, "ns-%012llx", static_cast<unsigned long long>(h >> 16));
  return buf;
}

void Metrics::set_namespaces(const std::map<CacheScope, NamespaceUsage>& usage, const std::string& tier) {
  std::map<std::string, NamespaceUsage> by_label;
  for (const auto& [ns, u] : usage) {
    NamespaceUsage& sum = by_label[namespace_label(ns)];
    sum.entries += u.entries;
    sum.bytes += u.bytes;
  }
  std::lock_guard lk(ns_mu_);
  std::set<std::string>& seen = ns_seen_[tier];
  for (const std::string& label : seen) {
    if (by_label.count(label)) continue;
    ns_bytes_->Remove(&ns_bytes_->Add({{"namespace", label}, {"tier", tier}}));
    ns_entries_->Remove(&ns_entries_->Add({{"namespace", label}, {"tier", tier}}));
  }
  seen.clear();
  for (const auto& [label, u] : by_label) {
    ns_bytes_->Add({{"namespace", label}, {"tier", tier}}).Set(double(u.bytes));
    ns_entries_->Add({{"namespace", label}, {"tier", tier}}).Set(double(u.entries));
    seen.insert(label);
  }
}

void Metrics::set_tiers(const std::optional<TierReport>& tiers) {
  if (!tiers) return;
  auto set = [&](const char* tier, const char* op, int64_t v) {
    tier_ops_->Add({{"tier", tier}, {"op", op}}).Set(double(v));
  };
  const TierCounters& t = tiers->totals;
  set("all", "lookups", t.lookups);
  set("all", "misses", t.misses);
  set("all", "promoted_tokens", t.promoted_tokens);
  set("all", "module_loads", t.module_loads);
  set("all", "block_loads", t.block_loads);
  set("all", "writes", t.writes);
  set("all", "write_failures", t.write_failures);
  set("all", "writes_skipped", t.writes_skipped);
  set("all", "writes_deferred", t.writes_deferred);
  set("all", "tier_resets", t.tier_resets);
  set("all", "rewritten", t.rewritten);
  set("all", "written_bytes", t.written_bytes);
  set("all", "links_present", t.links_present);
  set("all", "links_read", t.links_read);
  set("all", "states_written", t.states_written);
  set("all", "state_bytes_written", t.state_bytes_written);
  set("all", "states_read", t.states_read);
  set("all", "state_bytes_read", t.state_bytes_read);
  set("all", "errors", t.errors);
  const std::vector<TierStats>& per_tier = tiers->tiers;
  for (size_t i = 0; i < per_tier.size(); ++i) {
    const TierStats& s = per_tier[i];
    const char* name = s.name.c_str();
    if (s.bytes >= 0) cache_bytes_->Add({{"tier", s.name}, {"state", "cached"}}).Set(double(s.bytes));
    if (s.capacity_bytes >= 0)
      cache_bytes_->Add({{"tier", s.name}, {"state", "capacity"}}).Set(double(s.capacity_bytes));
    if (s.tokens >= 0) tier_tokens_->Add({{"tier", s.name}}).Set(double(s.tokens));
    tier_io_bytes_->Add({{"tier", s.name}, {"dir", "written"}}).Set(double(s.bytes_written));
    tier_io_bytes_->Add({{"tier", s.name}, {"dir", "read"}}).Set(double(s.bytes_read));
    set(name, "hits", t.hits[i]);  // entries this tier supplied to the engine
    set(name, "misses", s.misses);
    if (s.entries >= 0) set(name, "entries", s.entries);
    set(name, "puts", s.puts);
    set(name, "put_failures", s.put_failures);
    set(name, "errors", s.errors);
    set(name, "corrupt_deleted", s.corrupt_deleted);
    set(name, "connected", s.connected ? 1 : 0);
    if (s.name == "redis") redis_up_->Add({}).Set(s.connected ? 1 : 0);
    for (const auto& [op, v] : s.counters) set(name, op.c_str(), v);
  }
}

}  // namespace pc::server
