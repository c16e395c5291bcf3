#include "server/chat/reply_store.h"

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include <chrono>
#include <cstdio>

#include "tier/entry_key.h"
#include "tier/redis_tier.h"
#include "tier/tier_worker.h"

namespace pc::server {

std::string RedisReplyStore::key_name(const std::string& fingerprint, const std::string& key) {
  XXH3_state_t st;
  XXH3_64bits_reset(&st);
  const uint64_t n = fingerprint.size();  // length first: the two strings cannot run together
  XXH3_64bits_update(&st, &n, sizeof n);
  XXH3_64bits_update(&st, fingerprint.data(), fingerprint.size());
  XXH3_64bits_update(&st, key.data(), key.size());
  return "pc:reply:" + key_hex(XXH3_64bits_digest(&st));
}

RedisReplyStore::RedisReplyStore(const std::string& url, int ttl_seconds, std::string model_fingerprint,
                                 int64_t n_vocab, int64_t max_tokens)
    : fingerprint_(std::move(model_fingerprint)), n_vocab_(n_vocab), max_tokens_(max_tokens) {
  RedisTierOptions o;
  o.url = url;
  o.ttl_seconds = ttl_seconds;
  redis_ = std::make_unique<RedisTier>(o);
  worker_ = std::make_unique<TierWorker>(1);
}

RedisReplyStore::~RedisReplyStore() {
  {
    std::lock_guard lk(watch_mu_);
    stop_ = true;
  }
  watch_cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();
  worker_.reset();
}

void RedisReplyStore::watch(std::function<void()> on_reset) {
  if (watcher_.joinable()) return;
  watcher_ = std::thread([this, on_reset = std::move(on_reset)] {
    uint64_t seen = 0;
    std::unique_lock lk(watch_mu_);
    while (!watch_cv_.wait_for(lk, std::chrono::seconds(1), [this] { return stop_; })) {
      lk.unlock();
      const uint64_t g = redis_->generation();
      if (g != 0 && seen != 0 && g != seen) {
        resets_.fetch_add(1);
        if (on_reset) on_reset();
      }
      if (g != 0) seen = g;
      lk.lock();
    }
  });
}

std::optional<RememberedReply> RedisReplyStore::load(const std::string& key) {
  lookups_.fetch_add(1);
  std::vector<uint8_t> bytes;
  const std::string name = key_name(fingerprint_, key);
  const TierStatus s = redis_->get_value(name, &bytes, reply_value_max_bytes(key, max_tokens_));
  if (s != TierStatus::kOk) {
    if (s != TierStatus::kMiss) failures_.fetch_add(1);
    return std::nullopt;
  }
  DecodedReply d = decode_reply_value(key, bytes, n_vocab_);
  if (d.status == ReplyValueStatus::kCorrupt) {
    // Dropped, so that the next lookup does not read it again; the request goes on as
    // without a remembered reply (its text is tokenized).
    corrupt_.fetch_add(1);
    redis_->erase_value(name);
    std::fprintf(stderr, "promptcache: dropped reply memory value %s: %s\n", name.c_str(), d.reason.c_str());
    return std::nullopt;
  }
  if (d.status != ReplyValueStatus::kOk) return std::nullopt;
  hits_.fetch_add(1);
  return std::move(d.reply);
}

void RedisReplyStore::store(const std::string& key, const RememberedReply& r) {
  worker_->poll();  // the finished stores' (empty) completions
  if (worker_->in_flight() >= kMaxQueued) {
    dropped_.fetch_add(1);
    return;
  }
  auto value = std::make_shared<std::vector<uint8_t>>(encode_reply(key, r));
  auto name = std::make_shared<std::string>(key_name(fingerprint_, key));
  worker_->submit(
      [this, value, name] {
        if (redis_->set_value(*name, *value) == TierStatus::kOk) stores_.fetch_add(1);
        else failures_.fetch_add(1);
      },
      nullptr);
}

ReplyStoreStats RedisReplyStore::stats() const {
  return {lookups_.load(), hits_.load(),     stores_.load(), failures_.load(),
          dropped_.load(), resets_.load(), corrupt_.load()};
}

bool RedisReplyStore::reachable() const { return redis_->reachable(); }

}  // namespace pc::server
