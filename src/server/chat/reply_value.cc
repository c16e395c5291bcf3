#include "server/chat/reply_value.h"

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include <algorithm>
#include <cstring>

namespace pc::server {

namespace {

constexpr char kMagic[4] = {'P', 'C', 'R', 'M'};
constexpr size_t kHeader = 16;  // magic, version, checksum
constexpr size_t kMaxTail = 64 * 1024;

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

// XXH3_64 of [0, 8) and [16, end): everything but the checksum field itself.
uint64_t checksum(const uint8_t* p, size_t n) {
  XXH3_state_t st;
  XXH3_64bits_reset(&st);
  XXH3_64bits_update(&st, p, 8);
  XXH3_64bits_update(&st, p + kHeader, n - kHeader);
  return XXH3_64bits_digest(&st);
}

// Reads from a byte range; every read checks the bounds (ok turns false on a short value).
struct Reader {
  const std::vector<uint8_t>& b;
  size_t at = 0;
  bool ok = true;
  bool take(void* dst, size_t n) {
    if (!ok || b.size() - at < n) return ok = false;
    if (n == 0) return true;  // dst may be an empty vector's null data()
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

bool ids_in_vocab(const std::vector<int32_t>& ids, int64_t n_vocab) {
  if (n_vocab <= 0) return true;
  for (int32_t id : ids)
    if (id < 0 || id >= n_vocab) return false;
  return true;
}

DecodedReply corrupt(std::string why) {
  DecodedReply d;
  d.reason = std::move(why);
  return d;
}

}  // namespace

std::vector<uint8_t> encode_reply(const std::string& key, const RememberedReply& r) {
  std::vector<uint8_t> out;
  out.reserve(kHeader + 24 + key.size() + r.tail.size() + 4 * (r.ids.size() + r.context.size()));
  put_bytes(out, kMagic, 4);
  put_u32(out, kReplyValueVersion);
  out.resize(kHeader);  // checksum, filled last
  put_string(out, key);
  put_ids(out, r.ids);
  put_string(out, r.tail);
  put_ids(out, r.context);
  put_bytes(out, &r.kv_tokens, sizeof r.kv_tokens);
  const uint64_t sum = checksum(out.data(), out.size());
  std::memcpy(out.data() + 8, &sum, 8);
  return out;
}

DecodedReply decode_reply_value(const std::string& key, const std::vector<uint8_t>& bytes, int64_t n_vocab) {
  if (bytes.size() < kHeader || std::memcmp(bytes.data(), kMagic, 4) != 0) return corrupt("not a reply value");
  uint32_t version = 0;
  uint64_t sum = 0;
  std::memcpy(&version, bytes.data() + 4, 4);
  std::memcpy(&sum, bytes.data() + 8, 8);
  if (version != kReplyValueVersion) return corrupt("reply value format version " + std::to_string(version));
  if (sum != checksum(bytes.data(), bytes.size())) return corrupt("reply value checksum mismatch");
  Reader in{bytes, kHeader};
  const std::string stored_key = in.str();
  DecodedReply d;
  RememberedReply& r = d.reply;
  r.ids = in.ids();
  r.tail = in.str();
  r.context = in.ids();
  in.take(&r.kv_tokens, sizeof r.kv_tokens);
  if (!in.ok || in.at != bytes.size()) return corrupt("reply value lengths do not match its size");
  if (r.ids.empty()) return corrupt("reply value without ids");
  if (!ids_in_vocab(r.ids, n_vocab) || !ids_in_vocab(r.context, n_vocab))
    return corrupt("reply value with a token id outside the vocabulary of " + std::to_string(n_vocab));
  if (r.kv_tokens < 0) return corrupt("reply value with negative kv_tokens");
  d.status = stored_key == key ? ReplyValueStatus::kOk : ReplyValueStatus::kOtherKey;
  return d;
}

std::optional<RememberedReply> decode_reply(const std::string& key, const std::vector<uint8_t>& bytes,
                                            int64_t n_vocab) {
  DecodedReply d = decode_reply_value(key, bytes, n_vocab);
  if (d.status != ReplyValueStatus::kOk) return std::nullopt;
  return std::move(d.reply);
}

uint64_t reply_value_max_bytes(const std::string& key, int64_t max_tokens) {
  // Header, four length fields and kv_tokens; the key; ids and context together at
  // most max_tokens each; a tail (text a stop string cut from a token) of kMaxTail.
  return kHeader + 4 * 4 + 8 + key.size() + 2 * uint64_t(std::max<int64_t>(max_tokens, 0)) * 4 + kMaxTail;
}

}  // namespace pc::server
