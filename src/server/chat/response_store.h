// Stored responses of POST /v1/responses (store: true), found by tenant and id for
// previous_response_id, GET /v1/responses/{id} and DELETE.
//
//   put    memory (LRU, at most max_bytes) ──► Redis SET "pc:resp:<hex>" (with --redis)
//   get    memory ── miss ──► Redis GET (kept in memory once found)
//   erase  memory and Redis DEL
//
// The key is the tenant and the id: a tenant reads and deletes its own responses only
// (an id another tenant stored is a miss). In Redis the name is "pc:resp:" +
// key_hex(XXH3_64(model fingerprint, key)); the value (stored_response.h) holds the key
// and is checked whole on load: a value that is not intact is DELeted and counted, and
// the request goes on as if there were none. A load reads at most
// stored_response_max_bytes. Redis failures never fail a request: a put is lost, a get
// misses. Puts are synchronous, so a response is readable from another server of the
// cluster by the time its request is answered. Entries expire after --redis-ttl.
// Thread-safe.
#pragma once
#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "server/chat/stored_response.h"

namespace pc {
class RedisConnection;
}  // namespace pc

namespace pc::server {

struct ResponseStoreStats {
  int64_t entries = 0, bytes = 0;  // in memory
  int64_t corrupt = 0;             // Redis values found not intact (DELeted)
};

class ResponseStore {
 public:
  explicit ResponseStore(int64_t max_bytes = int64_t(256) << 20);
  ~ResponseStore();
  // Keeps responses in Redis too (throws pc::Error for a malformed URL). n_vocab and
  // max_tokens bound what a loaded value may hold (stored_response.h).
  void open_redis(const std::string& url, int ttl_seconds, std::string model_fingerprint, int64_t n_vocab,
                  int64_t max_tokens);

  // False when the response is too large to keep (stored_response_json).
  bool put(const std::string& tenant, const std::string& id, const StoredResponse& r);
  std::optional<StoredResponse> get(const std::string& tenant, const std::string& id);
  // True when it was found (in memory or Redis) and removed.
  bool erase(const std::string& tenant, const std::string& id);

  ResponseStoreStats stats() const;
  static std::string key_of(const std::string& tenant, const std::string& id);  // tenant \x1f id
  static std::string redis_name(const std::string& fingerprint, const std::string& key);  // "pc:resp:<hex>"

 private:
  struct Entry {
    std::string key;
    StoredResponse value;
    int64_t bytes = 0;
  };
  void keep(const std::string& key, StoredResponse r, int64_t bytes);  // memory only
  int64_t max_bytes_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // most recent first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  int64_t bytes_ = 0;
  std::unique_ptr<RedisConnection> redis_;
  std::string fingerprint_;
  int64_t n_vocab_ = 0, max_tokens_ = 0;
  std::atomic<int64_t> corrupt_{0};
};

}  // namespace pc::server
