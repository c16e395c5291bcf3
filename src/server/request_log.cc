#include "server/request_log.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace pc::server {

namespace {

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The q-quantile (0..1) of `v` (sorted here), nearest rank; null when empty.
nlohmann::json quantile(std::vector<double>& v, double q) {
  if (v.empty()) return nullptr;
  std::sort(v.begin(), v.end());
  const size_t i = size_t(std::ceil(q * double(v.size()))) - (q > 0 ? 1 : 0);
  return v[std::min(i, v.size() - 1)];
}

thread_local std::shared_ptr<RequestTrace> t_current;

// Monitoring reads (health checks, scrapes, the dashboard's polling) log at debug so
// that they do not bury the requests that do work.
bool monitoring(const std::string& method, const std::string& path) {
  if (method != "GET") return false;
  return path == "/health" || path == "/metrics" || path == "/dashboard" || path == "/v1/models" || path == "/models" ||
         path.rfind("/v1/cache/", 0) == 0;
}

}  // namespace

bool parse_log_level(const std::string& name, LogLevel* out) {
  static const std::pair<const char*, LogLevel> names[] = {
      {"error", LogLevel::kError}, {"warn", LogLevel::kWarn}, {"info", LogLevel::kInfo}, {"debug", LogLevel::kDebug}};
  for (const auto& [n, l] : names)
    if (name == n) {
      *out = l;
      return true;
    }
  return false;
}

void log_line(LogLevel threshold, LogLevel level, const std::string& line) {
  if (int(level) > int(threshold)) return;
  // One write per line: lines of concurrent requests never interleave.
  const std::string out = "promptcache: " + line + "\n";
  std::fwrite(out.data(), 1, out.size(), stderr);
  std::fflush(stderr);
}

void RequestLog::add(RequestRecord r) {
  std::lock_guard lk(mu_);
  TenantTotals& t = totals_[r.tenant];
  ++t.requests;
  t.prompt_tokens += r.prompt_tokens;
  t.cached_tokens += r.cached_tokens;
  t.approximate_tokens += r.approximate_tokens;
  t.computed_tokens += r.computed_tokens;
  t.generated_tokens += r.generated_tokens;
  if (!r.miss_reason.empty()) ++t.misses[r.miss_reason];
  ring_.push_back(std::move(r));
  while (ring_.size() > kCapacity || (!ring_.empty() && ring_.front().time < ring_.back().time - kMaxAge))
    ring_.pop_front();
}

std::vector<RequestRecord> RequestLog::last(const std::function<bool(const CacheScope&)>& visible,
                                            size_t limit) const {
  std::lock_guard lk(mu_);
  std::vector<RequestRecord> out;
  for (auto it = ring_.rbegin(); it != ring_.rend() && out.size() < limit; ++it)
    if (visible(it->scope)) out.push_back(*it);
  return out;
}

nlohmann::json RequestLog::history(const std::function<bool(const CacheScope&)>& visible, int seconds) const {
  struct Bucket {
    int64_t requests = 0, prompt = 0, cached = 0, approximate = 0, computed = 0, generated = 0;
    std::vector<double> ttft;
    std::map<std::string, int64_t> misses;
  };
  const double now = unix_now();
  const int64_t first = int64_t(std::floor(now)) - seconds + 1;
  std::map<int64_t, Bucket> buckets;
  Bucket all;
  {
    std::lock_guard lk(mu_);
    for (auto it = ring_.rbegin(); it != ring_.rend(); ++it) {
      const int64_t t = int64_t(std::floor(it->time));
      if (t < first) break;
      if (!visible(it->scope)) continue;
      for (Bucket* b : {&buckets[t], &all}) {
        ++b->requests;
        b->prompt += it->prompt_tokens;
        b->cached += it->cached_tokens;
        b->approximate += it->approximate_tokens;
        b->computed += it->computed_tokens;
        b->generated += it->generated_tokens;
        if (it->ttft_seconds >= 0) b->ttft.push_back(it->ttft_seconds);
        if (!it->miss_reason.empty()) ++b->misses[it->miss_reason];
      }
    }
  }
  auto figures = [](Bucket& b) {
    return nlohmann::json{{"requests", b.requests},
                          {"prompt_tokens", b.prompt},
                          {"cached_tokens", b.cached},
                          {"approximate_tokens", b.approximate},
                          {"computed_tokens", b.computed},
                          {"generated_tokens", b.generated},
                          {"hit_rate", b.prompt ? nlohmann::json(double(b.cached) / double(b.prompt)) : nlohmann::json(nullptr)},
                          {"ttft_p50", quantile(b.ttft, 0.5)},
                          {"ttft_p95", quantile(b.ttft, 0.95)},
                          {"misses", b.misses}};
  };
  nlohmann::json per_second = nlohmann::json::array();
  for (auto& [t, b] : buckets) {
    nlohmann::json j = figures(b);
    j["t"] = t;
    per_second.push_back(std::move(j));
  }
  nlohmann::json totals = figures(all);
  totals["ttft_p99"] = quantile(all.ttft, 0.99);
  return {{"window_seconds", seconds}, {"now", now}, {"totals", totals}, {"seconds", per_second}};
}

TenantTotals RequestLog::totals(const std::string& tenant) const {
  std::lock_guard lk(mu_);
  auto it = totals_.find(tenant);
  return it == totals_.end() ? TenantTotals{} : it->second;
}

TenantTotals RequestLog::all_totals() const {
  std::lock_guard lk(mu_);
  TenantTotals sum;
  for (const auto& [name, t] : totals_) {
    sum.requests += t.requests;
    sum.prompt_tokens += t.prompt_tokens;
    sum.cached_tokens += t.cached_tokens;
    sum.approximate_tokens += t.approximate_tokens;
    sum.computed_tokens += t.computed_tokens;
    sum.generated_tokens += t.generated_tokens;
    for (const auto& [reason, n] : t.misses) sum.misses[reason] += n;
  }
  return sum;
}

nlohmann::json record_json(const RequestRecord& r) {
  return {{"time", r.time},
          {"namespace", scope_name(r.scope)},
          {"route", r.route},
          {"finish_reason", r.finish_reason},
          {"prompt_tokens", r.prompt_tokens},
          {"cached_tokens", r.cached_tokens},
          {"approximate_tokens", r.approximate_tokens},
          {"recomputed_tokens", r.recomputed_tokens},
          {"computed_tokens", r.computed_tokens},
          {"generated_tokens", r.generated_tokens},
          {"ttft_seconds", r.ttft_seconds >= 0 ? nlohmann::json(r.ttft_seconds) : nlohmann::json(nullptr)},
          {"total_seconds", r.total_seconds},
          {"miss_reason", r.miss_reason.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.miss_reason)},
          {"miss_tokens", r.miss_tokens}};
}

RequestTrace::RequestTrace(LogLevel threshold, std::string method, std::string path)
    : threshold_(threshold), method_(std::move(method)), path_(std::move(path)) {
  if (path_.size() > 200) path_ = path_.substr(0, 200) + "...";
}

void RequestTrace::set_generation(const RequestRecord& r) {
  generation_ = true;
  gen_ = r;
}

RequestTrace::~RequestTrace() {
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start_).count();
  const LogLevel level = status_ >= 500                   ? LogLevel::kError
                         : status_ >= 400                 ? LogLevel::kWarn
                         : monitoring(method_, path_)     ? LogLevel::kDebug
                                                          : LogLevel::kInfo;
  if (int(level) > int(threshold_)) return;
  char buf[512];
  if (generation_) {
    char ttft[32] = "-";
    if (gen_.ttft_seconds >= 0) std::snprintf(ttft, sizeof ttft, "%.1fms", gen_.ttft_seconds * 1000);
    std::snprintf(buf, sizeof buf,
                  "%s %s %d prompt=%lld cached=%lld approximate=%lld computed=%lld generated=%lld ttft=%s "
                  "total=%.1fms",
                  method_.c_str(), path_.c_str(), status_, static_cast<long long>(gen_.prompt_tokens),
                  static_cast<long long>(gen_.cached_tokens), static_cast<long long>(gen_.approximate_tokens),
                  static_cast<long long>(gen_.computed_tokens), static_cast<long long>(gen_.generated_tokens), ttft,
                  ms);
  } else {
    std::snprintf(buf, sizeof buf, "%s %s %d total=%.1fms", method_.c_str(), path_.c_str(), status_, ms);
  }
  log_line(threshold_, level, buf);
}

std::shared_ptr<RequestTrace> RequestTrace::current() { return t_current; }

RequestTrace::Scope::Scope(std::shared_ptr<RequestTrace> t) { t_current = std::move(t); }
RequestTrace::Scope::~Scope() { t_current.reset(); }

}  // namespace pc::server
