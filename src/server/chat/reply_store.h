// Shared reply memory: the replies ConversationMemory remembers (server/chat/conversation.h),
// kept in Redis too, so that a session that moves to another server (its server died
// or is draining, the balancer's hash ring changed) still has its replies spliced
// there instead of re-tokenized (`unknown_reply`).
//
//   ConversationMemory::find        local map ── miss ──► ReplyStore::load (Redis GET)
//   ConversationMemory::remember    local map ──────────► ReplyStore::store (queued SET)
//
//   key    "pc:reply:" + key_hex(XXH3_64(model fingerprint, memory key))
//          memory key = namespace (tenant / cache_salt), kind (text or call ids), text
//   value  encode_reply (server/chat/reply_value.h): version, checksum, the key bytes, ids,
//          tail, context, kv_tokens
//
// The key bytes are stored in the value and compared on load, so a 64-bit collision
// or another model's entry reads as a miss. Redis is not trusted: a load reads at most
// reply_value_max_bytes (the model's max_tokens bound ids and context), and a value
// that is not intact (checksum, lengths, a token id outside the vocabulary) is DELeted
// and counted (stats().corrupt); the request then goes on as if nothing was remembered. Entries expire after --redis-ttl; a hit
// re-arms it (RedisTier::get_value).
//
// Failures never fail a request: load answers nullopt when Redis is unreachable (the
// connection's back-off makes that immediate after the first failure); stores run on
// a worker thread of their own (at most kMaxQueued waiting; beyond that one is dropped
// and counted). The connection is this store's own, not the KV tier's, so a reply
// lookup never waits behind a large KV transfer.
//
// Redis restarting empty: watch() starts a thread that reads Redis's generation
// (RedisTier::generation) every second and calls `on_reset` when it changed; the
// server has the memory store every reply it holds again (ConversationMemory::reshare).
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/chat/conversation.h"
#include "server/chat/reply_value.h"

namespace pc {
class RedisTier;
class TierWorker;
}  // namespace pc

namespace pc::server {


struct ReplyStoreStats {
  int64_t lookups = 0, hits = 0;   // loads asked, loads that found the reply
  int64_t stores = 0;              // replies stored
  int64_t failures = 0;            // stores Redis did not take, loads it did not answer
  int64_t dropped = 0;             // stores dropped: kMaxQueued already waiting
  int64_t resets = 0;              // times Redis was seen to have lost its keys (watch)
  int64_t corrupt = 0;             // values found not intact (dropped: DELeted)
};

class RedisReplyStore final : public ReplyStore {
 public:
  static constexpr size_t kMaxQueued = 4096;
  // Throws pc::Error for a malformed URL; an unreachable server is retried. n_vocab:
  // the model's vocabulary (ids at or above it are corruption); max_tokens: the most
  // tokens a request holds (bounds the bytes a value may have).
  RedisReplyStore(const std::string& url, int ttl_seconds, std::string model_fingerprint, int64_t n_vocab,
                  int64_t max_tokens);
  ~RedisReplyStore() override;  // finishes the queued stores

  std::optional<RememberedReply> load(const std::string& key) override;
  void store(const std::string& key, const RememberedReply& r) override;

  // Starts the generation watch (once); on_reset runs on its thread.
  void watch(std::function<void()> on_reset);

  ReplyStoreStats stats() const;
  bool reachable() const;
  static std::string key_name(const std::string& fingerprint, const std::string& key);  // "pc:reply:<hex>"

 private:
  std::string fingerprint_;
  int64_t n_vocab_ = 0;
  int64_t max_tokens_ = 0;
  std::unique_ptr<RedisTier> redis_;
  std::atomic<int64_t> lookups_{0}, hits_{0}, stores_{0}, failures_{0}, dropped_{0}, resets_{0}, corrupt_{0};
  std::mutex watch_mu_;
  std::condition_variable watch_cv_;
  bool stop_ = false;
  std::thread watcher_;
  std::unique_ptr<TierWorker> worker_;  // last: finishes the stores before redis_ goes
};

}  // namespace pc::server
