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
  const std::string name = key_name(entry_key(h.value.ns, h.value.shape, h.value.tokens));
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
  return status;
}

TierLookup RedisTier::fetch(Session& s, const std::string& name, const KvNamespace& ns, const KvShape& shape,
                            std::span<const int32_t> tokens, bool* transport_error) {
  TierLookup out;
  Reply value = s.get_and_rearm(name, entry_max_bytes(ns, shape, tokens.size()));
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
    Reply del = s.call({arg("DEL"), arg(name)});
    if (!del) *transport_error = true;
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
  const std::string name = key_name(entry_key(ns, shape, tokens));
  Session s = conn_.session();
  TierLookup r;
  if (!s.ok()) {
    r.status = TierStatus::kUnavailable;
    return r;
  }
  bool transport_error = false;
  r = fetch(s, name, ns, shape, tokens, &transport_error);
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

TierLookup RedisTier::longest_prefix(const KvNamespace& ns, const KvShape& shape, std::span<const int32_t> tokens,
                                     int32_t min_length) {
  const std::vector<PrefixKey> keys = prefix_keys(ns, shape, tokens, min_length);
  std::vector<std::string> names;
  names.reserve(keys.size());
  for (const PrefixKey& k : keys) names.push_back(key_name(k.key));
  Session s = conn_.session();
  TierLookup r;
  if (!s.ok()) {
    r.status = TierStatus::kUnavailable;
    return r;
  }
  const auto count = [&](bool hit) {
    std::lock_guard<std::mutex> lock(mu_);
    ++(hit ? stats_.hits : stats_.misses);
  };
  if (keys.empty()) {
    count(false);
    return r;
  }
  // One EXISTS per candidate length, pipelined; then the longest present one is read.
  for (const std::string& n : names) s.append({arg("EXISTS"), arg(n)});
  std::vector<char> present(names.size(), 0);
  for (size_t i = 0; i < names.size(); ++i) {
    Reply rep = s.read(kRedisSmallReply);
    if (!rep) {
      s.fail("EXISTS");
      r.status = TierStatus::kUnavailable;
      r.message = s.last_error();
      return r;
    }
    present[i] = rep->type == REDIS_REPLY_INTEGER && rep->integer > 0;
  }
  for (size_t i = 0; i < names.size(); ++i) {
    if (!present[i]) continue;
    bool transport_error = false;
    TierLookup c = fetch(s, names[i], ns, shape, tokens.first(size_t(keys[i].length)), &transport_error);
    if (transport_error) {
      s.fail("GET");
      r.status = TierStatus::kUnavailable;
      r.message = s.last_error();
      return r;
    }
    if (c.hit()) {
      r = std::move(c);
      break;
    }
    if (!c.message.empty()) r.message = c.message;
  }
  count(r.hit());
  return r;
}

TierStatus RedisTier::erase(const KvNamespace& ns, const KvShape& shape, std::span<const int32_t> tokens) {
  return erase_value(key_name(entry_key(ns, shape, tokens)));  // a KV entry is a value under its key
}

TierStats RedisTier::stats() const {
  const RedisConnection::Counters n = conn_.counters();
  std::lock_guard<std::mutex> lock(mu_);
  const Counters& c = stats_;
  TierStats s;
  s.name = name();
  s.connected = n.connected;
  s.ttl_seconds = conn_.options().ttl_seconds;
  s.hits = c.hits;
  s.misses = c.misses;
  s.puts = c.puts;
  s.put_failures = c.put_failures;
  s.errors = n.errors;
  s.corrupt_deleted = c.corrupt_deleted;
  s.counters = {{"unavailable", n.unavailable},
                {"connects", n.connects},
                {"replies_refused", n.refused},
                {"reply_timeouts", n.timeouts}};
  return s;
}

}  // namespace pc
