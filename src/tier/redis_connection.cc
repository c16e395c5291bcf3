#include "tier/redis_connection.h"

#include <hiredis/hiredis.h>
#include <signal.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <random>
#include <string_view>
#include <thread>

#include "common/error.h"
#include "tier/entry_key.h"

namespace pc {

namespace {

timeval to_timeval(int ms) {
  timeval tv;
  tv.tv_sec = ms / 1000;
  tv.tv_usec = (ms % 1000) * 1000;
  return tv;
}

int parse_int(const std::string& s, const char* what, const std::string& url) {
  if (s.empty() || s.size() > 9 || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
    throw Error("redis URL " + url + ": bad " + what + " '" + s + "'");
  return std::stoi(s);
}

void ignore_sigpipe_once() {
  struct sigaction old;
  if (::sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL && !(old.sa_flags & SA_SIGINFO))
    ::signal(SIGPIPE, SIG_IGN);
}

// The generation marker's value (16 hex digits, or whatever another client SET there).
constexpr ReplyLimits kMarkerReply{256, 0, 0, 4096};

ReplyLimits value_limits(uint64_t max_bytes) {
  return ReplyLimits{size_t(max_bytes), 0, 0, size_t(max_bytes) + 4096};
}

}  // namespace

RedisUrl parse_redis_url(const std::string& url) {
  RedisUrl u;
  std::string rest = url;
  const std::string scheme = "redis://";
  if (rest.compare(0, scheme.size(), scheme) == 0) rest = rest.substr(scheme.size());
  else if (rest.find("://") != std::string::npos) throw Error("redis URL " + url + ": only redis:// is supported");
  if (const size_t at = rest.rfind('@'); at != std::string::npos) {
    std::string auth = rest.substr(0, at);
    rest = rest.substr(at + 1);
    const size_t colon = auth.find(':');
    u.password = colon == std::string::npos ? auth : auth.substr(colon + 1);  // user is ignored
  }
  if (const size_t slash = rest.find('/'); slash != std::string::npos) {
    const std::string db = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
    if (!db.empty()) u.db = parse_int(db, "database number", url);
  }
  if (const size_t colon = rest.rfind(':'); colon != std::string::npos) {
    u.port = parse_int(rest.substr(colon + 1), "port", url);
    rest = rest.substr(0, colon);
  }
  if (!rest.empty()) u.host = rest;
  if (u.port <= 0 || u.port > 65535) throw Error("redis URL " + url + ": port out of range");
  return u;
}

void RedisConnection::ReplyFree::operator()(redisReply* r) const {
  if (r) freeReplyObject(r);
}

RedisConnection::Arg RedisConnection::arg(const char* s) { return {s, std::strlen(s)}; }

struct RedisConnection::Watch {
  std::thread thread;
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
};

RedisConnection::RedisConnection(RedisOptions opt)
    : opt_(std::move(opt)), url_(parse_redis_url(opt_.url)), budget_(std::make_unique<ReplyBudget>()) {
  if (opt_.ttl_seconds <= 0) throw Error("redis: the TTL must be positive");
  ignore_sigpipe_once();
  std::lock_guard<std::mutex> lock(mu_);
  ensure_connected();
}

RedisConnection::~RedisConnection() {
  stop_watch();
  std::lock_guard<std::mutex> lock(mu_);
  disconnect();
}

void RedisConnection::disconnect() {
  if (ctx_) redisFree(ctx_);
  ctx_ = nullptr;
  stats_.connected = false;
  up_.store(false);
}

bool RedisConnection::ensure_connected() {
  if (ctx_) return true;
  if (Clock::now() < next_attempt_) return false;
  ctx_ = redisConnectWithTimeout(url_.host.c_str(), url_.port, to_timeval(opt_.connect_timeout_ms));
  Session s(*this, std::adopt_lock);
  if (!ctx_ || ctx_->err) {
    s.fail("connect");
    return false;
  }
  if (redisSetTimeout(ctx_, to_timeval(opt_.command_timeout_ms)) != REDIS_OK) {
    s.fail("set timeout");
    return false;
  }
  bound_reader(ctx_->reader, budget_.get());
  if (!url_.password.empty()) {
    Reply r = s.call({arg("AUTH"), arg(url_.password)});
    if (!r || r->type == REDIS_REPLY_ERROR) {
      s.fail("AUTH");
      return false;
    }
  }
  if (url_.db != 0) {
    const std::string db = std::to_string(url_.db);
    Reply r = s.call({arg("SELECT"), arg(db)});
    if (!r || r->type == REDIS_REPLY_ERROR) {
      s.fail("SELECT");
      return false;
    }
  }
  backoff_ms_ = 0;
  ++stats_.connects;
  stats_.connected = true;
  up_.store(true);
  return true;
}

RedisConnection::Session::Session(RedisConnection& c) : c_(c), lock_(c.mu_) {
  ok_ = c_.ensure_connected();
  if (!ok_) ++c_.stats_.unavailable;
}

RedisConnection::Session::Session(RedisConnection& c, std::adopt_lock_t) : c_(c), ok_(true) {}

void RedisConnection::Session::append(std::initializer_list<Arg> args) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const Arg& a : args) {
    argv.push_back(a.first);
    lens.push_back(a.second);
  }
  redisAppendCommandArgv(c_.ctx_, int(argv.size()), argv.data(), lens.data());
}

RedisConnection::Reply RedisConnection::Session::read(const ReplyLimits& limits) {
  // A slow peer gets command_timeout_ms per socket read and, for the whole reply, that
  // plus the time a large value takes at kMinBytesPerMs.
  const auto deadline = Clock::now() + std::chrono::milliseconds(c_.opt_.command_timeout_ms) +
                        std::chrono::milliseconds(limits.max_bulk / kMinBytesPerMs);
  void* raw = nullptr;
  const ReplyRead r = read_reply(c_.ctx_, c_.budget_.get(), limits, deadline, &raw);
  if (r == ReplyRead::kOk) return Reply(static_cast<redisReply*>(raw));
  if (r == ReplyRead::kTooLarge) ++c_.stats_.refused;
  if (r == ReplyRead::kTimeout) ++c_.stats_.timeouts;
  return nullptr;
}

RedisConnection::Reply RedisConnection::Session::call(std::initializer_list<Arg> args, const ReplyLimits& limits) {
  append(args);
  return read(limits);
}

RedisConnection::Reply RedisConnection::Session::get_and_rearm(const std::string& name, uint64_t max_bytes) {
  append_get_and_rearm(name);
  return read_rearmed(max_bytes);
}

void RedisConnection::Session::append_get_and_rearm(const std::string& name) {
  const std::string ttl = std::to_string(c_.opt_.ttl_seconds);
  append({arg("GET"), arg(name)});
  append({arg("EXPIRE"), arg(name), arg(ttl), arg("GT")});
}

RedisConnection::Reply RedisConnection::Session::read_rearmed(uint64_t max_bytes) {
  Reply value = read(value_limits(max_bytes));
  Reply expire = value ? read(kRedisSmallReply) : nullptr;
  return expire ? std::move(value) : Reply();
}

// Drops the connection, counts the error and schedules the next attempt.
void RedisConnection::Session::fail(const char* what) {
  RedisConnection& c = c_;
  c.last_error_ = std::string(what) + (c.ctx_ && c.ctx_->err ? std::string(": ") + c.ctx_->errstr : "");
  ++c.stats_.errors;
  c.disconnect();
  c.backoff_ms_ = c.backoff_ms_ == 0 ? c.opt_.backoff_min_ms : std::min(2 * c.backoff_ms_, c.opt_.backoff_max_ms);
  c.next_attempt_ = Clock::now() + std::chrono::milliseconds(c.backoff_ms_);
  ok_ = false;
}

void RedisConnection::Session::error_reply(const char* what, const redisReply& r) {
  ++c_.stats_.errors;
  c_.last_error_ = std::string(what) + ": " + std::string(r.str ? r.str : "", r.str ? r.len : 0);
}

const std::string& RedisConnection::Session::last_error() const { return c_.last_error_; }

TierStatus RedisConnection::set_value(const std::string& name, std::span<const uint8_t> bytes, int64_t ttl_seconds) {
  const std::string ttl = std::to_string(ttl_seconds > 0 ? ttl_seconds : int64_t(opt_.ttl_seconds));
  Session s = session();
  if (!s.ok()) return TierStatus::kUnavailable;
  Reply r = s.call({arg("SET"), arg(name), {reinterpret_cast<const char*>(bytes.data()), bytes.size()},
                    arg("EX"), arg(ttl)});
  if (!r) {
    s.fail("SET");
    return TierStatus::kUnavailable;
  }
  if (r->type == REDIS_REPLY_ERROR) {  // e.g. OOM: the connection is fine
    s.error_reply("SET", *r);
    return TierStatus::kIoError;
  }
  return TierStatus::kOk;
}

TierStatus RedisConnection::get_value(const std::string& name, std::vector<uint8_t>* bytes, uint64_t max_bytes) {
  Session s = session();
  if (!s.ok()) return TierStatus::kUnavailable;
  Reply value = s.get_and_rearm(name, max_bytes);
  if (!value) {
    s.fail("GET");
    return TierStatus::kUnavailable;
  }
  if (value->type != REDIS_REPLY_STRING) return TierStatus::kMiss;
  bytes->assign(value->str, value->str + value->len);
  return TierStatus::kOk;
}

TierStatus RedisConnection::erase_value(const std::string& name) {
  Session s = session();
  if (!s.ok()) return TierStatus::kUnavailable;
  Reply r = s.call({arg("DEL"), arg(name)});
  if (!r) {
    s.fail("DEL");
    return TierStatus::kUnavailable;
  }
  return r->type == REDIS_REPLY_INTEGER && r->integer > 0 ? TierStatus::kOk : TierStatus::kMiss;
}

uint64_t RedisConnection::generation() {
  Session s = session();
  if (!s.ok()) return 0;
  std::random_device rd;
  const std::string fresh = key_hex((uint64_t(rd()) << 32 | rd()) | 1);
  Reply set = s.call({arg("SET"), arg(kGenerationKey), arg(fresh), arg("NX")});
  Reply get = set ? s.call({arg("GET"), arg(kGenerationKey)}, kMarkerReply) : nullptr;
  if (!set || !get) {
    s.fail("generation");
    return 0;
  }
  if (get->type != REDIS_REPLY_STRING) return 0;
  uint64_t g = 0;
  if (!parse_key_hex(std::string_view(get->str, get->len), &g) || g == 0)
    g = std::hash<std::string_view>{}(std::string_view(get->str, get->len)) | 1;
  return g;
}

void RedisConnection::watch(std::chrono::milliseconds every, std::function<void()> on_change) {
  if (watch_) return;
  watch_ = std::make_unique<Watch>();
  Watch* w = watch_.get();
  w->thread = std::thread([this, w, every, on_change = std::move(on_change)] {
    uint64_t seen = 0;
    std::unique_lock lk(w->mu);
    while (!w->cv.wait_for(lk, every, [w] { return w->stop; })) {
      lk.unlock();
      const uint64_t g = generation();
      if (g != 0 && seen != 0 && g != seen && on_change) on_change();
      if (g != 0) seen = g;
      lk.lock();
    }
  });
}

void RedisConnection::stop_watch() {
  if (!watch_) return;
  {
    std::lock_guard lk(watch_->mu);
    watch_->stop = true;
  }
  watch_->cv.notify_all();
  if (watch_->thread.joinable()) watch_->thread.join();
  watch_.reset();
}

RedisConnection::Counters RedisConnection::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace pc
