// Remote tier: entries in a Redis-compatible server shared by several promptcache
// servers (hiredis, synchronous, one connection).
//
//   key   "pc:kv:" + key_hex(entry_key(ns, shape, tokens))     (tier/entry_key.h)
//   value the entry bytes (tier/entry.h), SET with EX ttl_seconds
//
// A hit re-arms the TTL (EXPIRE, pipelined with the GET), so entries in use stay and
// idle ones expire; capacity and LRU beyond that are the Redis server's (maxmemory and
// maxmemory-policy allkeys-lru are the recommended setting). Longest-prefix lookup
// pipelines one EXISTS per candidate length, then GETs the longest present entry; an
// entry that fails validation is DELeted and the next shorter one is tried.
//
// Faults. Every network operation has a timeout (connect and per socket read/write),
// so no call blocks for long. A failed connection or command frees the connection,
// counts an error and starts a back-off (doubling from backoff_min_ms to
// backoff_max_ms): calls during the back-off return kUnavailable at once without
// touching the network; the first call after it reconnects. Nothing throws after
// construction.
//
// Writing to a socket the server closed raises SIGPIPE; the constructor ignores SIGPIPE
// process-wide when it still has its default action (as servers do).
//
// Generation. generation() reads the marker key "pc:generation" (no TTL), first SET NX
// to a random 16-hex-digit value when missing, so every server behind one Redis reads
// the same value until Redis loses its keys (a restart without persistence, FLUSHALL),
// and a new value after that: KvTiers compares it to the one it saw last and writes its
// resident entries again (engine/kv_tiers.h). Evicting the marker (allkeys-lru under
// memory pressure) reads as a loss too, which costs a rewrite and nothing else.
//
// Other values. set_value / get_value store opaque bytes under a caller's key name
// (the shared reply memory, server/chat/reply_store.h: "pc:reply:<hex>"), with the same
// TTL rules as entries (a hit re-arms it).
//
// Untrusted replies. Redis is a peer, not trusted memory: every reply is read within
// bounds fixed by the command (tier/redis_reply.h): a GET of an entry at most
// entry_max_bytes for the tokens asked, a GET of a value at most the caller's
// max_bytes, anything else a status or integer line; no arrays. A reply breaking a
// bound, or not complete by command_timeout_ms + its size at kMinBytesPerMs, drops the
// connection and counts an error (and "replies_refused" or "reply_timeouts"); the
// call answers kUnavailable and the back-off starts, as for any failed command.
//
// Thread-safe: calls serialize on one mutex (meant to be driven from a TierWorker).
//
// stats(): connected, ttl_seconds; entries, bytes and capacity unknown (-1: the
// server's); errors = failed connects and commands; counters "unavailable" (calls
// answered kUnavailable: no connection to be had), "connects" (successful connections,
// the first one included), "replies_refused" (replies past their bounds),
// "reply_timeouts" (replies not complete by their deadline).
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "tier/entry.h"
#include "tier/entry_key.h"
#include "tier/kv_tier.h"
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

struct RedisTierOptions {
  std::string url = "redis://127.0.0.1:6379/0";
  int ttl_seconds = 3600;
  int connect_timeout_ms = 200;
  int command_timeout_ms = 200;  // per socket read/write, not per command
  int backoff_min_ms = 100;
  int backoff_max_ms = 2000;
};

class RedisTier final : public KvTier {
 public:
  // Parses the URL (throws pc::Error when invalid) and tries to connect; an
  // unreachable server is not an error here (calls report kUnavailable).
  RedisTier(const std::string& url, int ttl_seconds);
  explicit RedisTier(RedisTierOptions opt);
  ~RedisTier() override;
  RedisTier(const RedisTier&) = delete;
  RedisTier& operator=(const RedisTier&) = delete;

  // SET key value EX ttl. kInvalid when the bytes are not an entry.
  TierStatus put(std::span<const uint8_t> entry_bytes, int64_t keep_seconds = 0) override;
  TierLookup get(const KvNamespace& ns, const KvShape& shape, std::span<const int32_t> tokens) override;
  TierLookup longest_prefix(const KvNamespace& ns, const KvShape& shape, std::span<const int32_t> tokens,
                            int32_t min_length = 1) override;
  TierStatus erase(const KvNamespace& ns, const KvShape& shape, std::span<const int32_t> tokens);

  // Opaque bytes under `name`, SET with EX ttl_seconds (the tier's when <= 0).
  TierStatus set_value(const std::string& name, std::span<const uint8_t> bytes, int64_t ttl_seconds = 0);
  // kOk with *bytes filled, kMiss, or kUnavailable (also when the value is longer than
  // max_bytes: the connection is dropped); a hit re-arms the tier's TTL.
  TierStatus get_value(const std::string& name, std::vector<uint8_t>* bytes, uint64_t max_bytes);

  // DEL `name`: kOk, kMiss (there was none) or kUnavailable.
  TierStatus erase_value(const std::string& name);

  // The slowest transfer rate a reply's deadline allows for (bytes per millisecond).
  static constexpr size_t kMinBytesPerMs = 64 * 1024;

  const char* name() const override { return "redis"; }
  TierStats stats() const override;
  bool reachable() const override { return up_.load(std::memory_order_relaxed); }
  uint64_t generation() override;
  static constexpr const char* kGenerationKey = "pc:generation";
  const RedisTierOptions& options() const { return opt_; }
  static std::string key_name(uint64_t key);  // "pc:kv:<hex>"

 private:
  using Clock = std::chrono::steady_clock;
  struct ReplyFree {
    void operator()(redisReply* r) const;
  };
  using Reply = std::unique_ptr<redisReply, ReplyFree>;
  // The next reply, within `limits` and its deadline; null on a failure (the caller
  // then calls fail(), which drops the connection).
  Reply read(const ReplyLimits& limits);
  Reply call(std::initializer_list<std::pair<const char*, size_t>> args, const ReplyLimits& limits);
  // GET `name` (at most max_bytes) and EXPIRE it to the TTL, pipelined; the GET's reply.
  Reply get_and_rearm(const std::string& name, uint64_t max_bytes);
  bool ensure_connected();
  void fail(const char* what);
  void disconnect();
  TierLookup fetch(const std::string& name, const KvNamespace& ns, const KvShape& shape,
                   std::span<const int32_t> tokens, bool* transport_error);

  RedisTierOptions opt_;
  RedisUrl url_;
  mutable std::mutex mu_;
  redisContext* ctx_ = nullptr;
  std::unique_ptr<ReplyBudget> budget_;  // the reader's (bound_reader); lives as long as this
  Clock::time_point next_attempt_{};
  int backoff_ms_ = 0;
  std::string last_error_;
  struct Counters {
    int64_t hits = 0, misses = 0;
    int64_t puts = 0, put_failures = 0;
    int64_t errors = 0;           // failed connects and commands
    int64_t unavailable = 0;      // calls answered kUnavailable
    int64_t connects = 0;         // successful connections
    int64_t corrupt_deleted = 0;  // invalid entries DELeted
    int64_t refused = 0;          // replies past their bounds (tier/redis_reply.h)
    int64_t timeouts = 0;         // replies not complete by their deadline
    bool connected = false;
  };
  Counters stats_;
  std::atomic<bool> up_{false};  // stats_.connected, readable without mu_
};

}  // namespace pc
