// One connection to a Redis-compatible server (hiredis, synchronous): connecting,
// timeouts, reconnecting with back-off, bounded replies, opaque values and the
// generation marker. The KV tier (tier/redis_tier.h) and the shared reply memory
// (server/chat/reply_store.h) each own one — a reply lookup never waits behind a large
// KV transfer — and build their commands on it.
//
// Faults. Every network operation has a timeout (connect and per socket read/write),
// so no call blocks for long. A failed connection or command frees the connection,
// counts an error and starts a back-off (doubling from backoff_min_ms to
// backoff_max_ms): calls during the back-off answer "unavailable" at once without
// touching the network; the first call after it reconnects. Nothing throws after
// construction.
//
// Writing to a socket the server closed raises SIGPIPE; the constructor ignores SIGPIPE
// process-wide when it still has its default action (as servers do).
//
// Untrusted replies. Redis is a peer, not trusted memory: every reply is read within
// bounds the command fixes (tier/redis_reply.h). A reply breaking a bound, or not
// complete by command_timeout_ms + its size at kMinBytesPerMs, drops the connection and
// counts an error (and `refused` or `timeouts`).
//
// Generation. generation() reads the marker key "pc:generation" (no TTL), first SET NX
// to a random 16-hex-digit value when missing, so every server behind one Redis reads
// the same value until Redis loses its keys (a restart without persistence, FLUSHALL),
// and a new value after that. Evicting the marker reads as a loss too.
//
// Thread-safe: commands serialize on one mutex (a Session holds it).
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "tier/redis_reply.h"
#include "tier/tier_result.h"

struct redisContext;
struct redisReply;

namespace pc {

struct RedisUrl {
  std::string host = "127.0.0.1";
  int port = 6379;
  int db = 0;
  std::string password;  // "" = no AUTH
};
// Parses "redis://[:password@]host[:port][/db]" (the scheme is optional). Throws
// pc::Error with a message naming the problem.
RedisUrl parse_redis_url(const std::string& url);

struct RedisOptions {
  std::string url = "redis://127.0.0.1:6379/0";
  int ttl_seconds = 3600;        // values' and entries' TTL (a hit re-arms it)
  int connect_timeout_ms = 200;
  int command_timeout_ms = 200;  // per socket read/write, not per command
  int backoff_min_ms = 100;
  int backoff_max_ms = 2000;
};

// Bounds of the small replies every command has (a status, integer or error).
inline constexpr ReplyLimits kRedisSmallReply{1024, 0, 0, 4096};

class RedisConnection {
 public:
  struct ReplyFree {
    void operator()(redisReply* r) const;
  };
  using Reply = std::unique_ptr<redisReply, ReplyFree>;
  using Arg = std::pair<const char*, size_t>;
  static Arg arg(const std::string& s) { return {s.data(), s.size()}; }
  static Arg arg(const char* s);

  // The slowest transfer rate a reply's deadline allows for (bytes per millisecond).
  static constexpr size_t kMinBytesPerMs = 64 * 1024;
  static constexpr const char* kGenerationKey = "pc:generation";

  // Parses the URL (throws pc::Error when invalid, or for a TTL <= 0) and tries to
  // connect; an unreachable server is not an error here.
  explicit RedisConnection(RedisOptions opt);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // The connection held for a sequence of commands (pipelined or not). ok() is false
  // when there is no connection to be had (counted as unavailable); a null reply means
  // the command failed: call fail(), which drops the connection and starts the back-off.
  class Session {
   public:
    bool ok() const { return ok_; }
    void append(std::initializer_list<Arg> args);
    Reply read(const ReplyLimits& limits);
    Reply call(std::initializer_list<Arg> args, const ReplyLimits& limits = kRedisSmallReply);
    // GET `name` (at most max_bytes) and EXPIRE it to the TTL, pipelined; the GET's reply.
    // The EXPIRE has GT: it only ever extends, so a value put with a lifetime longer
    // than the TTL keeps its own (Redis >= 7.0; an older server answers the EXPIRE with
    // an error, which is ignored: its values keep the TTL they were put with).
    Reply get_and_rearm(const std::string& name, uint64_t max_bytes);
    // The same in two halves, for pipelining several: append the commands, then read.
    void append_get_and_rearm(const std::string& name);
    Reply read_rearmed(uint64_t max_bytes);
    void fail(const char* what);
    // An error reply on a healthy connection (e.g. OOM): counted, the connection kept.
    void error_reply(const char* what, const redisReply& r);
    const std::string& last_error() const;

   private:
    friend class RedisConnection;
    explicit Session(RedisConnection& c);            // locks, connects if it can
    Session(RedisConnection& c, std::adopt_lock_t);  // inside ensure_connected (locked)
    RedisConnection& c_;
    std::unique_lock<std::mutex> lock_;
    bool ok_ = false;
  };
  Session session() { return Session(*this); }

  // Opaque bytes under `name`, SET with EX ttl (the connection's when <= 0).
  TierStatus set_value(const std::string& name, std::span<const uint8_t> bytes, int64_t ttl_seconds = 0);
  // kOk with *bytes filled, kMiss, or kUnavailable (also when the value is longer than
  // max_bytes: the connection is dropped); a hit re-arms the TTL.
  TierStatus get_value(const std::string& name, std::vector<uint8_t>* bytes, uint64_t max_bytes);
  // DEL `name`: kOk, kMiss (there was none) or kUnavailable.
  TierStatus erase_value(const std::string& name);
  // The generation marker (see above); 0 when Redis cannot be read.
  uint64_t generation();

  // Reads generation() every `every` on a thread of its own (started once) and calls
  // on_change there when it differs from the last value read; stopped by the destructor.
  void watch(std::chrono::milliseconds every, std::function<void()> on_change);
  void stop_watch();  // waits for a running on_change; a no-op without a watch

  bool reachable() const { return up_.load(std::memory_order_relaxed); }
  const RedisOptions& options() const { return opt_; }

  struct Counters {
    int64_t errors = 0;       // failed connects and commands, error replies
    int64_t unavailable = 0;  // calls answered unavailable: no connection to be had
    int64_t connects = 0;     // successful connections, the first one included
    int64_t refused = 0;      // replies past their bounds
    int64_t timeouts = 0;     // replies not complete by their deadline
    bool connected = false;
  };
  Counters counters() const;

 private:
  using Clock = std::chrono::steady_clock;
  bool ensure_connected();  // under mu_
  void disconnect();        // under mu_

  RedisOptions opt_;
  RedisUrl url_;
  mutable std::mutex mu_;
  redisContext* ctx_ = nullptr;
  std::unique_ptr<ReplyBudget> budget_;  // the reader's (bound_reader); lives as long as this
  Clock::time_point next_attempt_{};
  int backoff_ms_ = 0;
  std::string last_error_;
  Counters stats_;
  std::atomic<bool> up_{false};  // stats_.connected, readable without mu_
  struct Watch;
  std::unique_ptr<Watch> watch_;
};

}  // namespace pc
