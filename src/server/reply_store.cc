#include "server/reply_store.h"

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include <chrono>
#include <cstring>

#include "tier/entry_key.h"
#include "tier/redis_tier.h"
#include "tier/tier_worker.h"

namespace pc::server {

namespace {

constexpr char kMagic[4] = {'P', 'C', 'R', '1'};

void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  const size_t at = out.size();
  out.resize(at + 4);
  std::memcpy(out.data() + at, &v, 4);
}

void put_bytes(std::vector<uint8_t>& out, const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  out.insert(out.end(), b, b + n);
}

void put_string(std::vector<uint8_t>& out, const std::string& s) {
  put_u32(out, uint32_t(s.size()));
  put_bytes(out, s.data(), s.size());
}

void put_ids(std::vector<uint8_t>& out, const std::vector<int32_t>& ids) {
  put_u32(out, uint32_t(ids.size()));
  put_bytes(out, ids.data(), ids.size() * sizeof(int32_t));
}

// Reads from a byte range; every read checks the bounds (ok turns false on a short value).
struct Reader {
  const std::vector<uint8_t>& b;
  size_t at = 0;
  bool ok = true;
  bool take(void* dst, size_t n) {
    if (!ok || b.size() - at < n) return ok = false;
    std::memcpy(dst, b.data() + at, n);
    at += n;
    return true;
  }
  uint32_t u32() {
    uint32_t v = 0;
    take(&v, 4);
    return v;
  }
  std::string str() {
    const uint32_t n = u32();
    if (!ok || b.size() - at < n) {
      ok = false;
      return {};
    }
    std::string s(reinterpret_cast<const char*>(b.data() + at), n);
    at += n;
    return s;
  }
  std::vector<int32_t> ids() {
    const uint32_t n = u32();
    if (!ok || (b.size() - at) / sizeof(int32_t) < n) {
      ok = false;
      return {};
    }
    std::vector<int32_t> v(n);
    take(v.data(), size_t(n) * sizeof(int32_t));
    return v;
  }
};

}  // namespace

std::vector<uint8_t> encode_reply(const std::string& key, const RememberedReply& r) {
  std::vector<uint8_t> out;
  out.reserve(32 + key.size() + r.tail.size() + 4 * (r.ids.size() + r.context.size()));
  put_bytes(out, kMagic, 4);
  put_string(out, key);
  put_ids(out, r.ids);
  put_string(out, r.tail);
  put_ids(out, r.context);
  put_bytes(out, &r.kv_tokens, sizeof r.kv_tokens);
  return out;
}

std::optional<RememberedReply> decode_reply(const std::string& key, const std::vector<uint8_t>& bytes) {
  Reader in{bytes};
  char magic[4];
  if (!in.take(magic, 4) || std::memcmp(magic, kMagic, 4) != 0) return std::nullopt;
  if (in.str() != key || !in.ok) return std::nullopt;
  RememberedReply r;
  r.ids = in.ids();
  r.tail = in.str();
  r.context = in.ids();
  in.take(&r.kv_tokens, sizeof r.kv_tokens);
  if (!in.ok || in.at != bytes.size() || r.ids.empty()) return std::nullopt;
  return r;
}

std::string RedisReplyStore::key_name(const std::string& fingerprint, const std::string& key) {
  XXH3_state_t st;
  XXH3_64bits_reset(&st);
  const uint64_t n = fingerprint.size();  // length first: the two strings cannot run together
  XXH3_64bits_update(&st, &n, sizeof n);
  XXH3_64bits_update(&st, fingerprint.data(), fingerprint.size());
  XXH3_64bits_update(&st, key.data(), key.size());
  return "pc:reply:" + key_hex(XXH3_64bits_digest(&st));
}

RedisReplyStore::RedisReplyStore(const std::string& url, int ttl_seconds, std::string model_fingerprint)
    : fingerprint_(std::move(model_fingerprint)) {
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
  const TierStatus s = redis_->get_value(key_name(fingerprint_, key), &bytes);
  if (s != TierStatus::kOk) {
    if (s != TierStatus::kMiss) failures_.fetch_add(1);
    return std::nullopt;
  }
  std::optional<RememberedReply> r = decode_reply(key, bytes);
  if (r) hits_.fetch_add(1);
  return r;
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
  return {lookups_.load(), hits_.load(), stores_.load(), failures_.load(), dropped_.load(), resets_.load()};
}

bool RedisReplyStore::reachable() const { return redis_->reachable(); }

}  // namespace pc::server
