// Prometheus metrics of the server (prometheus-cpp registry, text exposition).
// Counters and histograms are thread-safe; gauges of the KV cache are set by the
// engine thread after each step.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "engine/cache_admin.h"

namespace prometheus {
class Registry;
class Counter;
class Gauge;
class Histogram;
template <typename T> class Family;
}  // namespace prometheus

namespace pc {
struct CacheStats;
}  // namespace pc

namespace pc::server {

// One namespace's share of the prefix cache (tier "memory").
// Per tenant: entries (prefix-tree leaves as /v1/cache/entries lists them, or tier
// entries) and bytes of the distinct pages / entries they hold.
using NamespaceUsage = NamespaceBytes;

class Metrics {
 public:
  Metrics();
  ~Metrics();

  std::string render() const;  // Prometheus text format

  void count_request(const std::string& route, int status);
  void count_tokens(int64_t prompt, int64_t cached, int64_t computed, int64_t generated);
  // Why a chat request did not hit all history, and the prompt tokens that cost.
  void count_miss(const std::string& reason, int64_t tokens = 0);
  void count_disconnect();
  void observe_ttft(double seconds);
  void observe_itl(double seconds);
  void observe_queue_wait(double seconds);
  void set_queue(size_t queued, size_t running);
  void set_cache(const CacheStats& stats);
  // promptcache_cache_{bytes,entries}{namespace,tier}; namespaces that are gone
  // lose their series. The label is namespace_label(ns), never the namespace itself.
  void set_namespaces(const std::map<CacheScope, NamespaceUsage>& usage, const std::string& tier = "memory");
  // A namespace's label value: "ns-" + 12 hex digits of a hash keyed with a secret
  // drawn at startup, so that /metrics shows neither tenants nor cache salts (and a
  // salt cannot be confirmed by hashing a guess). Stable while the process runs; the
  // cache API gives each namespace's label (metrics_label).
  std::string namespace_label(const CacheScope& scope) const;
  // Each tier's counters, promptcache_tier_ops{tier,op} (null: no tiers configured).
  void set_tiers(const std::optional<TierReport>& tiers);

 private:
  std::shared_ptr<prometheus::Registry> reg_;
  prometheus::Family<prometheus::Counter>* requests_;
  prometheus::Family<prometheus::Counter>* tokens_;
  prometheus::Family<prometheus::Counter>* misses_;
  prometheus::Family<prometheus::Counter>* miss_tokens_;
  prometheus::Counter* disconnects_;
  prometheus::Histogram* ttft_;
  prometheus::Histogram* itl_;
  prometheus::Histogram* queue_wait_;
  prometheus::Gauge* queued_;
  prometheus::Gauge* running_;
  prometheus::Gauge* hit_rate_;
  prometheus::Family<prometheus::Gauge>* cache_bytes_;
  prometheus::Family<prometheus::Gauge>* kv_bytes_per_token_;  // {kv_type}
  prometheus::Family<prometheus::Gauge>* tier_tokens_;         // {tier}
  prometheus::Family<prometheus::Gauge>* tier_io_bytes_;       // {tier, dir}
  prometheus::Gauge* cache_entries_;
  prometheus::Gauge* cache_tokens_;
  prometheus::Gauge* cache_evicted_;
  prometheus::Gauge* cache_snapshots_;       // recurrent-state snapshots (hybrid models)
  prometheus::Gauge* cache_snapshot_bytes_;  // KV-memory bytes they occupy
  prometheus::Counter* prompt_tokens_;
  prometheus::Counter* cached_tokens_;
  prometheus::Family<prometheus::Gauge>* ns_bytes_;
  prometheus::Family<prometheus::Gauge>* ns_entries_;
  std::mutex ns_mu_;
  std::map<std::string, std::set<std::string>> ns_seen_;  // tier → labels with series
  std::string label_secret_;  // namespace_label's key (random bytes)
  prometheus::Family<prometheus::Gauge>* tier_ops_;
  prometheus::Family<prometheus::Gauge>* redis_up_;  // one series, added at the first Redis figures
};

}  // namespace pc::server
