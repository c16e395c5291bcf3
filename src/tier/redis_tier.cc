#include "tier/redis_tier.h"

#include <hiredis/hiredis.h>
#include <signal.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "tier/redis_reply.h"

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

void append(redisContext* c, std::initializer_list<std::pair<const char*, size_t>> args) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const auto& a : args) {
    argv.push_back(a.first);
    lens.push_back(a.second);
  }
  redisAppendCommandArgv(c, int(argv.size()), argv.data(), lens.data());
}

// A status, integer or error reply (SET, EXPIRE, EXISTS, DEL, AUTH, SELECT).
constexpr ReplyLimits kSmallReply{1024, 0, 0, 4096};
// The generation marker's value (16 hex digits, or whatever another client SET there).
constexpr ReplyLimits kMarkerReply{256, 0, 0, 4096};

ReplyLimits value_limits(uint64_t max_bytes) {
  return ReplyLimits{size_t(max_bytes), 0, 0, size_t(max_bytes) + 4096};
}

std::pair<const char*, size_t> arg(const std::string& s) { return {s.data(), s.size()}; }
std::pair<const char*, size_t> arg(const char* s) { return {s, std::strlen(s)}; }

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

void RedisTier::ReplyFree::operator()(redisReply* r) const {
  if (r) freeReplyObject(r);
}

RedisTier::Reply RedisTier::read(const ReplyLimits& limits) {
  // A slow peer gets command_timeout_ms per socket read and, for the whole reply, that
  // plus the time a large value takes at kMinBytesPerMs.
  const auto deadline = Clock::now() + std::chrono::milliseconds(opt_.command_timeout_ms) +
                        std::chrono::milliseconds(limits.max_bulk / kMinBytesPerMs);
  void* raw = nullptr;
  const ReplyRead r = read_reply(ctx_, budget_.get(), limits, deadline, &raw);
  if (r == ReplyRead::kOk) return Reply(static_cast<redisReply*>(raw));
  if (r == ReplyRead::kTooLarge) ++stats_.refused;
  if (r == ReplyRead::kTimeout) ++stats_.timeouts;
  return nullptr;
}

RedisTier::Reply RedisTier::call(std::initializer_list<std::pair<const char*, size_t>> args,
                                 const ReplyLimits& limits) {
  append(ctx_, args);
  return read(limits);
}

RedisTier::Reply RedisTier::get_and_rearm(const std::string& name, uint64_t max_bytes) {
  const std::string ttl = std::to_string(opt_.ttl_seconds);
  append(ctx_, {arg("GET"), arg(name)});
  append(ctx_, {arg("EXPIRE"), arg(name), arg(ttl)});
  Reply value = read(value_limits(max_bytes));
  Reply expire = value ? read(kSmallReply) : nullptr;
  return expire ? std::move(value) : Reply();
}

std::string RedisTier::key_name(uint64_t key) { return "pc:kv:" + key_hex(key); }

RedisTier::RedisTier(const std::string& url, int ttl_seconds)
    : RedisTier(RedisTierOptions{url, ttl_seconds}) {}

RedisTier::RedisTier(RedisTierOptions opt)
    : opt_(std::move(opt)), url_(parse_redis_url(opt_.url)), budget_(std::make_unique<ReplyBudget>()) {
  if (opt_.ttl_seconds <= 0) throw Error("redis tier: the TTL must be positive");
  ignore_sigpipe_once();
  std::lock_guard<std::mutex> lock(mu_);
  ensure_connected();
}

RedisTier::~RedisTier() { disconnect(); }

void RedisTier::disconnect() {
  if (ctx_) redisFree(ctx_);
  ctx_ = nullptr;
  stats_.connected = false;
  up_.store(false);
}

// Drops the connection, counts the error and schedules the next attempt.
void RedisTier::fail(const char* what) {
  last_error_ = std::string(what) + (ctx_ && ctx_->err ? std::string(": ") + ctx_->errstr : "");
  ++stats_.errors;
  disconnect();
  backoff_ms_ = backoff_ms_ == 0 ? opt_.backoff_min_ms : std::min(2 * backoff_ms_, opt_.backoff_max_ms);
  next_attempt_ = Clock::now() + std::chrono::milliseconds(backoff_ms_);
}

bool RedisTier::ensure_connected() {
  if (ctx_) return true;
  if (Clock::now() < next_attempt_) return false;
  ctx_ = redisConnectWithTimeout(url_.host.c_str(), url_.port, to_timeval(opt_.connect_timeout_ms));
  if (!ctx_ || ctx_->err) {
    fail("connect");
    return false;
  }
  if (redisSetTimeout(ctx_, to_timeval(opt_.command_timeout_ms)) != REDIS_OK) {
    fail("set timeout");
    return false;
  }
  bound_reader(ctx_->reader, budget_.get());
  if (!url_.password.empty()) {
    Reply r = call({arg("AUTH"), arg(url_.password)}, kSmallReply);
    if (!r || r->type == REDIS_REPLY_ERROR) {
      fail("AUTH");
      return false;
    }
  }
  if (url_.db != 0) {
    const std::string db = std::to_string(url_.db);
    Reply r = call({arg("SELECT"), arg(db)}, kSmallReply);
    if (!r || r->type == REDIS_REPLY_ERROR) {
      fail("SELECT");
      return false;
    }
  }
  backoff_ms_ = 0;
  ++stats_.connects;
  stats_.connected = true;
  up_.store(true);
  return true;
}

TierStatus RedisTier::put(std::span<const uint8_t> entry_bytes, int64_t keep_seconds) {
  Decoded<EntryInfo> h = parse_entry_header(entry_bytes, entry_bytes.size());
  if (!h.ok()) return TierStatus::kInvalid;
  const std::string name = key_name(entry_key(h.value.ns, h.value.shape, h.value.tokens));
  const std::string ttl = std::to_string(std::max<int64_t>(opt_.ttl_seconds, keep_seconds));
  std::lock_guard<std::mutex> lock(mu_);
  if (!ensure_connected()) {
    ++stats_.unavailable;
    ++stats_.put_failures;
    return TierStatus::kUnavailable;
  }
  Reply r = call({arg("SET"), arg(name),
                           {reinterpret_cast<const char*>(entry_bytes.data()), entry_bytes.size()},
                           arg("EX"), arg(ttl)},
               kSmallReply);
  if (!r) {
    fail("SET");
    ++stats_.put_failures;
    return TierStatus::kUnavailable;
  }
  if (r->type == REDIS_REPLY_ERROR) {  // e.g. OOM: the connection is fine
    ++stats_.errors;
    ++stats_.put_failures;
    last_error_ = std::string("SET: ") + r->str;
    return TierStatus::kIoError;
  }
  ++stats_.puts;
  return TierStatus::kOk;
}

// GET (+ EXPIRE to re-arm the TTL) and validate; DELs an invalid entry.
TierLookup RedisTier::fetch(const std::string& name, const KvNamespace& ns, const KvShape& shape,
                            std::span<const int32_t> tokens, bool* transport_error) {
  TierLookup out;
  Reply value = get_and_rearm(name, entry_max_bytes(ns, shape, tokens.size()));
  if (!value) {
    *transport_error = true;
    out.status = TierStatus::kUnavailable;
    return out;
  }
  if (value->type != REDIS_REPLY_STRING) {  // expired between EXISTS and GET, or an error
    out.status = TierStatus::kMiss;
    return out;
  }
  std::vector<uint8_t> bytes(value->str, value->str + value->len);
  value.reset();
  Decoded<Entry> d = deserialize_entry(std::move(bytes), EntryExpect{ns.model, ns.kv_type, shape});
  if (d.ok() && (d.value.info.ns != ns || !std::ranges::equal(d.value.info.tokens, tokens))) {
    d.error = EntryError::kWrongTokens;
    d.message = to_string(EntryError::kWrongTokens);
  }
  if (!d.ok()) {
    Reply del = call({arg("DEL"), arg(name)}, kSmallReply);
    if (!del) *transport_error = true;
    ++stats_.corrupt_deleted;
    out.status = TierStatus::kMiss;
    out.message = "redis: deleted " + name + ": " + d.message;
    return out;
  }
  out.status = TierStatus::kOk;
  out.length = int32_t(tokens.size());
  out.entry = std::move(d.value);
  return out;
}

TierLookup RedisTier::get(const KvNamespace& ns, const KvShape& shape, std::span<const int32_t> tokens) {
  const std::string name = key_name(entry_key(ns, shape, tokens));
  std::lock_guard<std::mutex> lock(mu_);
  TierLookup r;
  if (!ensure_connected()) {
    ++stats_.unavailable;
    r.status = TierStatus::kUnavailable;
    return r;
  }
  bool transport_error = false;
  r = fetch(name, ns, shape, tokens, &transport_error);
  if (transport_error) {
    fail("GET");
    r.status = TierStatus::kUnavailable;
    r.message = last_error_;
    return r;
  }
  ++(r.hit() ? stats_.hits : stats_.misses);
  return r;
}

TierLookup RedisTier::longest_prefix(const KvNamespace& ns, const KvShape& shape, std::span<const int32_t> tokens,
                                     int32_t min_length) {
  const std::vector<PrefixKey> keys = prefix_keys(ns, shape, tokens, min_length);
  std::vector<std::string> names;
  names.reserve(keys.size());
  for (const PrefixKey& k : keys) names.push_back(key_name(k.key));
  std::lock_guard<std::mutex> lock(mu_);
  TierLookup r;
  if (!ensure_connected()) {
    ++stats_.unavailable;
    r.status = TierStatus::kUnavailable;
    return r;
  }
  if (keys.empty()) {
    ++stats_.misses;
    return r;
  }
  for (const std::string& n : names) {
    const char* argv[] = {"EXISTS", n.c_str()};
    const size_t lens[] = {6, n.size()};
    redisAppendCommandArgv(ctx_, 2, argv, lens);
  }
  std::vector<char> present(names.size(), 0);
  for (size_t i = 0; i < names.size(); ++i) {
    Reply rep = read(kSmallReply);
    if (!rep) {
      fail("EXISTS");
      r.status = TierStatus::kUnavailable;
      r.message = last_error_;
      return r;
    }
    present[i] = rep->type == REDIS_REPLY_INTEGER && rep->integer > 0;
  }
  for (size_t i = 0; i < names.size(); ++i) {
    if (!present[i]) continue;
    bool transport_error = false;
    TierLookup c = fetch(names[i], ns, shape, tokens.first(size_t(keys[i].length)), &transport_error);
    if (transport_error) {
      fail("GET");
      r.status = TierStatus::kUnavailable;
      r.message = last_error_;
      return r;
    }
    if (c.hit()) {
      r = std::move(c);
      break;
    }
    if (!c.message.empty()) r.message = c.message;
  }
  ++(r.hit() ? stats_.hits : stats_.misses);
  return r;
}

TierStatus RedisTier::erase(const KvNamespace& ns, const KvShape& shape, std::span<const int32_t> tokens) {
  return erase_value(key_name(entry_key(ns, shape, tokens)));  // a KV entry is a value under its key
}

TierStatus RedisTier::set_value(const std::string& name, std::span<const uint8_t> bytes, int64_t ttl_seconds) {
  const std::string ttl = std::to_string(ttl_seconds > 0 ? ttl_seconds : int64_t(opt_.ttl_seconds));
  std::lock_guard<std::mutex> lock(mu_);
  if (!ensure_connected()) {
    ++stats_.unavailable;
    return TierStatus::kUnavailable;
  }
  Reply r = call({arg("SET"), arg(name), {reinterpret_cast<const char*>(bytes.data()), bytes.size()},
                  arg("EX"), arg(ttl)},
                 kSmallReply);
  if (!r) {
    fail("SET");
    return TierStatus::kUnavailable;
  }
  if (r->type == REDIS_REPLY_ERROR) {
    ++stats_.errors;
    last_error_ = std::string("SET: ") + r->str;
    return TierStatus::kIoError;
  }
  return TierStatus::kOk;
}

TierStatus RedisTier::get_value(const std::string& name, std::vector<uint8_t>* bytes, uint64_t max_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!ensure_connected()) {
    ++stats_.unavailable;
    return TierStatus::kUnavailable;
  }
  Reply value = get_and_rearm(name, max_bytes);
  if (!value) {
    fail("GET");
    return TierStatus::kUnavailable;
  }
  if (value->type != REDIS_REPLY_STRING) return TierStatus::kMiss;
  bytes->assign(value->str, value->str + value->len);
  return TierStatus::kOk;
}

TierStatus RedisTier::erase_value(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!ensure_connected()) {
    ++stats_.unavailable;
    return TierStatus::kUnavailable;
  }
  Reply r = call({arg("DEL"), arg(name)}, kSmallReply);
  if (!r) {
    fail("DEL");
    return TierStatus::kUnavailable;
  }
  return r->type == REDIS_REPLY_INTEGER && r->integer > 0 ? TierStatus::kOk : TierStatus::kMiss;
}

uint64_t RedisTier::generation() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!ensure_connected()) {
    ++stats_.unavailable;
    return 0;
  }
  std::random_device rd;
  const std::string fresh = key_hex((uint64_t(rd()) << 32 | rd()) | 1);
  Reply set = call({arg("SET"), arg(kGenerationKey), arg(fresh), arg("NX")}, kSmallReply);
  Reply get = set ? call({arg("GET"), arg(kGenerationKey)}, kMarkerReply) : nullptr;
  if (!set || !get) {
    fail("generation");
    return 0;
  }
  if (get->type != REDIS_REPLY_STRING) return 0;
  uint64_t g = 0;
  if (!parse_key_hex(std::string_view(get->str, get->len), &g) || g == 0)
    g = std::hash<std::string_view>{}(std::string_view(get->str, get->len)) | 1;
  return g;
}

TierStats RedisTier::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  const Counters& c = stats_;
  TierStats s;
  s.name = name();
  s.connected = c.connected;
  s.ttl_seconds = opt_.ttl_seconds;
  s.hits = c.hits;
  s.misses = c.misses;
  s.puts = c.puts;
  s.put_failures = c.put_failures;
  s.errors = c.errors;
  s.corrupt_deleted = c.corrupt_deleted;
  s.counters = {{"unavailable", c.unavailable},
                {"connects", c.connects},
                {"replies_refused", c.refused},
                {"reply_timeouts", c.timeouts}};
  return s;
}

}  // namespace pc
