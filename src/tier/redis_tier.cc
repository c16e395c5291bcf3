#include "tier/redis_tier.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <vector>

#include "common/error.h"

namespace pc {

namespace {

using Session = RedisConnection::Session;
RedisConnection::Arg arg(const std::string& s) { return RedisConnection::arg(s); }
RedisConnection::Arg arg(const char* s) { return RedisConnection::arg(s); }

}  // namespace

std::string RedisTier::key_name(uint64_t key) { return "pc:kv:" + key_hex(key); }

RedisTier::RedisTier(const std::string& url, int ttl_seconds) : RedisTier(RedisTierOptions{url, ttl_seconds}) {}

RedisTier::RedisTier(RedisTierOptions opt) : conn_(std::move(opt)) {}

RedisTier::~RedisTier() = default;

TierStatus RedisTier::put(std::span<const uint8_t> entry_bytes, int64_t keep_seconds) {
  Decoded<EntryInfo> h = parse_entry_header(entry_bytes, entry_bytes.size());
  if (!h.ok()) return TierStatus::kInvalid;
  const std::string name = key_name(h.value.key());
  const std::string ttl = std::to_string(std::max<int64_t>(conn_.options().ttl_seconds, keep_seconds));
  TierStatus status = TierStatus::kOk;
  {
    Session s = conn_.session();
    if (!s.ok()) {
      status = TierStatus::kUnavailable;
    } else {
      Reply r = s.call({arg("SET"), arg(name),
                        {reinterpret_cast<const char*>(entry_bytes.data()), entry_bytes.size()},
                        arg("EX"), arg(ttl)});
      if (!r) {
        s.fail("SET");
        status = TierStatus::kUnavailable;
      } else if (r->type == REDIS_REPLY_ERROR) {  // e.g. OOM: the connection is fine
        s.error_reply("SET", *r);
        status = TierStatus::kIoError;
      }
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  ++(status == TierStatus::kOk ? stats_.puts : stats_.put_failures);
  if (status == TierStatus::kOk) stats_.bytes_written += int64_t(entry_bytes.size());
  return status;
}

TierLookup RedisTier::fetch(Session& s, const std::string& name, const KvNamespace& ns, const KvShape& shape,
                            const LinkPos& link, std::span<const int32_t> tokens, bool* transport_error,
                            uint64_t state_bytes) {
  Reply value = s.get_and_rearm(name, entry_max_bytes(ns, shape, tokens.size(), state_bytes));
  return take(s, std::move(value), name, ns, shape, link, tokens, transport_error, nullptr, state_bytes);
}

TierLookup RedisTier::take(Session& s, Reply value, const std::string& name, const KvNamespace& ns,
                           const KvShape& shape, const LinkPos& link, std::span<const int32_t> tokens,
                           bool* transport_error, std::vector<std::string>* deferred_del, uint64_t state_bytes) {
  TierLookup out;
  if (!value) {
    *transport_error = true;
    out.status = TierStatus::kUnavailable;
    return out;
  }
  if (value->type != REDIS_REPLY_STRING) {  // not there (expired), or an error
    out.status = TierStatus::kMiss;
    return out;
  }
  std::vector<uint8_t> bytes(value->str, value->str + value->len);
  value.reset();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.bytes_read += int64_t(bytes.size());
  }
  Decoded<Entry> d = deserialize_asked_entry(std::move(bytes), ns, shape, link, tokens, state_bytes);
  if (!d.ok()) {
    if (deferred_del) {
      deferred_del->push_back(name);  // replies of a pipeline are still to be read
    } else if (!s.call({arg("DEL"), arg(name)})) {
      *transport_error = true;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.corrupt_deleted;
    }
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
  return lookup(key_name(entry_key(ns, shape, tokens)), ns, shape, LinkPos{}, tokens, 0);
}

TierLookup RedisTier::get_state(const KvNamespace& ns, const KvShape& shape, const LinkPos& link,
                                std::span<const int32_t> tokens, uint64_t state_bytes) {
  return lookup(key_name(state_key(ns, shape, link.parent, tokens)), ns, shape, link, tokens, state_bytes);
}

TierLookup RedisTier::lookup(const std::string& name, const KvNamespace& ns, const KvShape& shape,
                             const LinkPos& link, std::span<const int32_t> tokens, uint64_t state_bytes) {
  Session s = conn_.session();
  TierLookup r;
  if (!s.ok()) {
    r.status = TierStatus::kUnavailable;
    return r;
  }
  bool transport_error = false;
  r = fetch(s, name, ns, shape, link, tokens, &transport_error, state_bytes);
  if (transport_error) {
    s.fail("GET");
    r.status = TierStatus::kUnavailable;
    r.message = s.last_error();
    return r;
  }
  std::lock_guard<std::mutex> lock(mu_);
  ++(r.hit() ? stats_.hits : stats_.misses);
  return r;
}

TierChain RedisTier::read_chain(const KvNamespace& ns, const KvShape& shape, std::span<const int32_t> tokens,
                                std::span<const ChainLink> links) {
  // Batches of GETs, pipelined: a link is one page, so a batch is a few MB at most.
  constexpr size_t kBatch = 32;
  TierChain r;
  Session s = conn_.session();
  if (!s.ok()) {
    r.status = TierStatus::kUnavailable;
    return r;
  }
  bool stopped = false;
  std::vector<std::string> invalid;  // DELeted once the pipeline's replies are read
  for (size_t b = 0; b < links.size() && !stopped; b += kBatch) {
    const size_t e = std::min(links.size(), b + kBatch);
    std::vector<std::string> names;
    for (size_t i = b; i < e; ++i) {
      const ChainLink& l = links[i];
      if (l.start < 0 || size_t(l.start) + size_t(l.length) > tokens.size()) break;
      names.push_back(key_name(l.key));
      s.append_get_and_rearm(names.back());
    }
    for (size_t j = 0; j < names.size(); ++j) {  // every reply is read, even past the stop
      const ChainLink& l = links[b + j];
      const auto own = tokens.subspan(size_t(l.start), size_t(l.length));
      Reply value = s.read_rearmed(entry_max_bytes(ns, shape, own.size()));
      if (!value) {
        s.fail("GET");
        r.status = TierStatus::kUnavailable;
        r.message = s.last_error();
        r.links.clear();
        return r;
      }
      if (stopped) continue;
      bool transport_error = false;
      TierLookup c = take(s, std::move(value), names[j], ns, shape, LinkPos{l.start, l.parent}, own,
                          &transport_error, &invalid);
      if (!c.hit()) {
        r.message = c.message;
        stopped = true;
        continue;
      }
      r.links.push_back(std::move(c.entry));
    }
    if (names.size() < e - b) stopped = true;
  }
  for (const std::string& name : invalid) {
    if (!s.call({arg("DEL"), arg(name)})) {
      s.fail("DEL");
      break;  // the links read are still good
    }
  }
  if (!r.links.empty()) r.status = TierStatus::kOk;
  std::lock_guard<std::mutex> lock(mu_);
  ++(r.hit() ? stats_.hits : stats_.misses);
  return r;
}

std::vector<char> RedisTier::has(std::span<const uint64_t> keys) {
  std::vector<char> out(keys.size(), 0);
  if (keys.empty()) return out;
  Session s = conn_.session();
  if (!s.ok()) return out;
  constexpr size_t kBatch = 512;
  for (size_t b = 0; b < keys.size(); b += kBatch) {
    const size_t e = std::min(keys.size(), b + kBatch);
    for (size_t i = b; i < e; ++i) s.append({arg("EXISTS"), arg(key_name(keys[i]))});
    for (size_t i = b; i < e; ++i) {
      Reply rep = s.read(kRedisSmallReply);
      if (!rep) {
        s.fail("EXISTS");
        return std::vector<char>(keys.size(), 0);
      }
      out[i] = rep->type == REDIS_REPLY_INTEGER && rep->integer > 0;
    }
  }
  return out;
}

TierStatus RedisTier::erase(const KvNamespace& ns, const KvShape& shape, std::span<const int32_t> tokens) {
  return erase_value(key_name(entry_key(ns, shape, tokens)));  // a KV entry is a value under its key
}

TierStats RedisTier::stats() const {
  const RedisConnection::Counters n = conn_.counters();
  std::lock_guard<std::mutex> lock(mu_);
  TierStats s;
  s.name = name();
  s.connected = n.connected;
  s.ttl_seconds = conn_.options().ttl_seconds;
  stats_.fill(s);
  s.errors = n.errors;
  s.counters = {{"unavailable", n.unavailable},
                {"connects", n.connects},
                {"replies_refused", n.refused},
                {"reply_timeouts", n.timeouts}};
  return s;
}

}  // namespace pc
