#include "server/chat/response_store.h"

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include <cstdio>

#include "tier/entry_key.h"
#include "tier/redis_connection.h"

namespace pc::server {

ResponseStore::ResponseStore(int64_t max_bytes) : max_bytes_(max_bytes) {}
ResponseStore::~ResponseStore() = default;

void ResponseStore::open_redis(const std::string& url, int ttl_seconds, std::string model_fingerprint,
                               int64_t n_vocab, int64_t max_tokens) {
  RedisOptions o;
  o.url = url;
  o.ttl_seconds = ttl_seconds;
  redis_ = std::make_unique<RedisConnection>(o);
  fingerprint_ = std::move(model_fingerprint);
  n_vocab_ = n_vocab;
  max_tokens_ = max_tokens;
}

std::string ResponseStore::key_of(const std::string& tenant, const std::string& id) { return tenant + '\x1f' + id; }

std::string ResponseStore::redis_name(const std::string& fingerprint, const std::string& key) {
  XXH3_state_t st;
  XXH3_64bits_reset(&st);
  const uint64_t n = fingerprint.size();  // length first: the two strings cannot run together
  XXH3_64bits_update(&st, &n, sizeof n);
  XXH3_64bits_update(&st, fingerprint.data(), fingerprint.size());
  XXH3_64bits_update(&st, key.data(), key.size());
  return "pc:resp:" + key_hex(XXH3_64bits_digest(&st));
}

void ResponseStore::keep(const std::string& key, StoredResponse r, int64_t bytes) {
  std::lock_guard lk(mu_);
  if (auto it = index_.find(key); it != index_.end()) {
    bytes_ -= it->second->bytes;
    lru_.erase(it->second);
    index_.erase(it);
  }
  lru_.push_front({key, std::move(r), bytes});
  index_[key] = lru_.begin();
  bytes_ += bytes;
  while (bytes_ > max_bytes_ && lru_.size() > 1) {
    bytes_ -= lru_.back().bytes;
    index_.erase(lru_.back().key);
    lru_.pop_back();
  }
}

bool ResponseStore::put(const std::string& tenant, const std::string& id, const StoredResponse& r) {
  const std::string key = key_of(tenant, id);
  const std::string text = stored_response_json(r);
  if (text.empty()) return false;
  int64_t bytes = int64_t(key.size() + text.size());
  if (r.reply) bytes += int64_t(4 * (r.reply->ids.size() + r.reply->context.size()) + r.reply->tail.size());
  if (bytes > max_bytes_) return false;
  if (redis_) redis_->set_value(redis_name(fingerprint_, key), encode_stored_response(key, r));
  keep(key, r, bytes);
  return true;
}

std::optional<StoredResponse> ResponseStore::get(const std::string& tenant, const std::string& id) {
  const std::string key = key_of(tenant, id);
  {
    std::lock_guard lk(mu_);
    if (auto it = index_.find(key); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);  // most recent
      return it->second->value;
    }
  }
  if (!redis_) return std::nullopt;
  // Another server of the cluster stored it.
  const std::string name = redis_name(fingerprint_, key);
  std::vector<uint8_t> bytes;
  if (redis_->get_value(name, &bytes, stored_response_max_bytes(key, max_tokens_)) != TierStatus::kOk)
    return std::nullopt;
  DecodedStoredResponse d = decode_stored_response(key, bytes, n_vocab_);
  if (d.status == StoredResponseStatus::kCorrupt) {
    corrupt_.fetch_add(1);
    redis_->erase_value(name);
    std::fprintf(stderr, "promptcache: dropped stored response value %s: %s\n", name.c_str(), d.reason.c_str());
    return std::nullopt;
  }
  if (d.status != StoredResponseStatus::kOk) return std::nullopt;
  keep(key, d.value, int64_t(bytes.size()));
  return std::move(d.value);
}

bool ResponseStore::erase(const std::string& tenant, const std::string& id) {
  const std::string key = key_of(tenant, id);
  bool found = false;
  {
    std::lock_guard lk(mu_);
    if (auto it = index_.find(key); it != index_.end()) {
      bytes_ -= it->second->bytes;
      lru_.erase(it->second);
      index_.erase(it);
      found = true;
    }
  }
  if (redis_ && redis_->erase_value(redis_name(fingerprint_, key)) == TierStatus::kOk) found = true;
  return found;
}

ResponseStoreStats ResponseStore::stats() const {
  std::lock_guard lk(mu_);
  return {int64_t(lru_.size()), bytes_, corrupt_.load()};
}

}  // namespace pc::server
