// Remote tier: entries in a Redis-compatible server shared by several promptcache
// servers (hiredis, synchronous, one connection).
//
//   key   "pc:kv:" + key_hex(entry_key(ns, shape, tokens))     (tier/entry_key.h)
//   value the entry bytes (tier/entry.h), SET with EX ttl_seconds
//
// A hit re-arms the TTL (EXPIRE ... GT, pipelined with the GET: it only extends, so an
// entry put with a longer lifetime keeps its own), so entries in use stay and idle ones
// expire; capacity and LRU beyond that are the Redis server's (maxmemory and
// maxmemory-policy allkeys-lru are the recommended setting). A chain walk pipelines the
// GETs of its links in batches and stops at the first link missing; a link that fails
// validation is DELeted and the walk stops there (the caller recomputes from it).
// has() pipelines one EXISTS per key.
//
// Connection, faults, back-off, bounded replies and SIGPIPE: tier/redis_connection.h
// (one RedisConnection of its own).
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
// Untrusted replies: a GET of an entry reads at most entry_max_bytes for the tokens
// asked, a GET of a value at most the caller's max_bytes, anything else a status or
// integer line (tier/redis_connection.h drops a connection that breaks a bound).
//
// Thread-safe: calls serialize on one mutex (meant to be driven from a TierWorker).
//
// stats(): connected, ttl_seconds; entries, bytes and capacity unknown (-1: the
// server's); errors = failed connects and commands; counters "unavailable" (calls
// answered kUnavailable: no connection to be had), "connects" (successful connections,
// the first one included), "replies_refused" (replies past their bounds),
// "reply_timeouts" (replies not complete by their deadline).
#pragma once
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "tier/entry.h"
#include "tier/entry_key.h"
#include "tier/kv_tier.h"
#include "tier/redis_connection.h"
#include "tier/tier_result.h"

namespace pc {

using RedisTierOptions = RedisOptions;

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
  TierChain read_chain(const KvNamespace& ns, const KvShape& shape, std::span<const int32_t> tokens,
                       std::span<const ChainLink> links) override;
  TierLookup get_state(const KvNamespace& ns, const KvShape& shape, const LinkPos& link,
                       std::span<const int32_t> tokens, uint64_t state_bytes) override;
  std::vector<char> has(std::span<const uint64_t> keys) override;
  TierStatus erase(const KvNamespace& ns, const KvShape& shape, std::span<const int32_t> tokens);

  // Opaque values and the generation marker: the connection's (tier/redis_connection.h).
  TierStatus set_value(const std::string& name, std::span<const uint8_t> bytes, int64_t ttl_seconds = 0) {
    return conn_.set_value(name, bytes, ttl_seconds);
  }
  TierStatus get_value(const std::string& name, std::vector<uint8_t>* bytes, uint64_t max_bytes) {
    return conn_.get_value(name, bytes, max_bytes);
  }
  TierStatus erase_value(const std::string& name) { return conn_.erase_value(name); }
  static constexpr size_t kMinBytesPerMs = RedisConnection::kMinBytesPerMs;

  const char* name() const override { return "redis"; }
  TierStats stats() const override;
  bool reachable() const override { return conn_.reachable(); }
  uint64_t generation() override { return conn_.generation(); }
  static constexpr const char* kGenerationKey = RedisConnection::kGenerationKey;
  const RedisTierOptions& options() const { return conn_.options(); }
  static std::string key_name(uint64_t key);  // "pc:kv:<hex>"

 private:
  using Reply = RedisConnection::Reply;
  // One entry's lookup (get, get_state): fetch, a lost connection as unavailable, counted.
  TierLookup lookup(const std::string& name, const KvNamespace& ns, const KvShape& shape, const LinkPos& link,
                    std::span<const int32_t> tokens, uint64_t state_bytes);
  // GET (+ EXPIRE to re-arm the TTL) and validate; DELs an invalid entry.
  TierLookup fetch(RedisConnection::Session& s, const std::string& name, const KvNamespace& ns, const KvShape& shape,
                   const LinkPos& link, std::span<const int32_t> tokens, bool* transport_error,
                   uint64_t state_bytes = 0);
  // Validates a GET's reply as `link` of ns with `tokens`; an invalid entry is DELeted
  // now, or its name appended to deferred_del when a pipeline's replies are pending.
  TierLookup take(RedisConnection::Session& s, RedisConnection::Reply value, const std::string& name,
                  const KvNamespace& ns, const KvShape& shape, const LinkPos& link, std::span<const int32_t> tokens,
                  bool* transport_error, std::vector<std::string>* deferred_del, uint64_t state_bytes = 0);

  RedisConnection conn_;
  mutable std::mutex mu_;  // the counters below
  TierTraffic stats_;  // corrupt_deleted: invalid entries DELeted
};

}  // namespace pc
