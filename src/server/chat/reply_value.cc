#include "server/chat/reply_value.h"

#include <algorithm>

#include "server/chat/value_codec.h"

namespace pc::server {

namespace {

constexpr char kMagic[4] = {'P', 'C', 'R', 'M'};
constexpr size_t kHeader = 16;  // magic, version, checksum (value_codec.h)
constexpr size_t kMaxTail = 64 * 1024;

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
  ValueWriter out(kMagic, kReplyValueVersion, 24 + key.size() + r.tail.size() + 4 * (r.ids.size() + r.context.size()));
  out.str(key);
  out.ids(r.ids);
  out.str(r.tail);
  out.ids(r.context);
  out.bytes(&r.kv_tokens, sizeof r.kv_tokens);
  return out.seal();
}

DecodedReply decode_reply_value(const std::string& key, const std::vector<uint8_t>& bytes, int64_t n_vocab) {
  if (std::string why = open_value(bytes, kMagic, kReplyValueVersion, "reply value"); !why.empty())
    return corrupt(std::move(why));
  ValueReader in{bytes};
  const std::string stored_key = in.str();
  DecodedReply d;
  RememberedReply& r = d.reply;
  r.ids = in.ids();
  r.tail = in.str();
  r.context = in.ids();
  in.take(&r.kv_tokens, sizeof r.kv_tokens);
  if (!in.at_end()) return corrupt("reply value lengths do not match its size");
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
