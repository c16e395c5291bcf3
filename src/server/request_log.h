// What the server remembers about recent generation requests, for the cache API's
// history and request list (GET /v1/cache/history, /v1/cache/requests), the
// per-tenant figures of GET /v1/cache/stats, and the per-request log line.
//
//   RequestLog   a ring of the last kCapacity finished generation requests (never
//                more than kMaxAge old), and per-tenant totals since start. Bounded:
//                one record per request, one total per tenant (API-key tenants are
//                a fixed set; a cache_salt never makes an entry of its own).
//   RequestTrace one HTTP request's log line, written when the last owner lets go
//                (the route wrapper, and a generation until its stream is written).
#pragma once
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kv/kv_namespace.h"

namespace pc::server {

enum class LogLevel { kError, kWarn, kInfo, kDebug };
// "error", "warn", "info", "debug"; false for anything else.
bool parse_log_level(const std::string& name, LogLevel* out);
// One line to stderr ("promptcache: " + line) when `level` is at or above `threshold`.
void log_line(LogLevel threshold, LogLevel level, const std::string& line);

// One finished generation request.
struct RequestRecord {
  double time = 0;             // unix seconds it finished
  std::string tenant;          // API-key tenant ("" without keys)
  CacheScope scope;            // its cache scope (tenant and cache_salt)
  std::string route;           // e.g. "/v1/chat/completions"
  std::string finish_reason;   // stop, length, tool_calls, ...
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;       // reused exactly
  int64_t approximate_tokens = 0;  // reused approximately (moved blocks)
  int64_t recomputed_tokens = 0;   // approximately reused tokens recomputed
  int64_t computed_tokens = 0;     // computed (the rest of the prompt, plus modules encoded)
  int64_t generated_tokens = 0;
  double ttft_seconds = -1;        // arrival to first token (-1: none generated)
  double total_seconds = 0;        // arrival to the end of generation
  std::string miss_reason;         // "" = none (chat requests: why history did not hit)
  int64_t miss_tokens = 0;
};

// Since-start totals of one tenant.
struct TenantTotals {
  int64_t requests = 0, prompt_tokens = 0, cached_tokens = 0, approximate_tokens = 0,
          computed_tokens = 0, generated_tokens = 0;
  std::map<std::string, int64_t> misses;  // reason → requests
};

class RequestLog {
 public:
  static constexpr size_t kCapacity = 4096;
  static constexpr double kMaxAge = 900;  // seconds a record is kept at most

  void add(RequestRecord r);
  // Records `visible` accepts (by namespace), newest first, at most `limit`.
  std::vector<RequestRecord> last(const std::function<bool(const CacheScope&)>& visible, size_t limit) const;
  // Per-second figures of the records `visible` accepts over the last `seconds`:
  // {"window_seconds", "now", "totals": {...}, "seconds": [{"t", "requests",
  // "prompt_tokens", "cached_tokens", "approximate_tokens", "computed_tokens",
  // "generated_tokens", "hit_rate", "ttft_p50", "ttft_p95", "misses": {reason: n}}]}
  // (seconds with no request left out; TTFT in seconds, null when none).
  nlohmann::json history(const std::function<bool(const CacheScope&)>& visible, int seconds) const;
  // Totals of one tenant, and of all of them.
  TenantTotals totals(const std::string& tenant) const;
  TenantTotals all_totals() const;

 private:
  mutable std::mutex mu_;
  std::deque<RequestRecord> ring_;
  std::map<std::string, TenantTotals> totals_;
};

nlohmann::json record_json(const RequestRecord& r);

// The log line of one HTTP request. Generation requests fill in their token counts
// (finish_generation); the line is written when the last shared owner releases it.
class RequestTrace {
 public:
  using Clock = std::chrono::steady_clock;
  RequestTrace(LogLevel threshold, std::string method, std::string path);
  ~RequestTrace();
  RequestTrace(const RequestTrace&) = delete;
  RequestTrace& operator=(const RequestTrace&) = delete;

  void set_status(int status) { status_ = status; }
  const std::string& path() const { return path_; }
  void set_generation(const RequestRecord& r);

  // The trace of the request this HTTP thread is running a handler for (add_route
  // sets it for the handler's duration), or null.
  static std::shared_ptr<RequestTrace> current();
  struct Scope {
    explicit Scope(std::shared_ptr<RequestTrace> t);
    ~Scope();
  };

 private:
  LogLevel threshold_;
  std::string method_, path_;
  Clock::time_point start_ = Clock::now();
  int status_ = 0;
  bool generation_ = false;
  RequestRecord gen_;
};

}  // namespace pc::server
