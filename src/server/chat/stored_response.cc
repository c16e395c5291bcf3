#include "server/chat/stored_response.h"

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include <cstring>

#include "server/chat/reply_value.h"

namespace pc::server {

namespace {

using json = nlohmann::json;

constexpr char kMagic[4] = {'P', 'C', 'R', 'S'};
constexpr size_t kHeader = 16;  // magic, version, checksum

void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  const size_t at = out.size();
  out.resize(at + 4);
  std::memcpy(out.data() + at, &v, 4);
}

void put_blob(std::vector<uint8_t>& out, const void* p, size_t n) {
  put_u32(out, uint32_t(n));
  const auto* b = static_cast<const uint8_t*>(p);
  out.insert(out.end(), b, b + n);
}

uint64_t checksum(const uint8_t* p, size_t n) {
  XXH3_state_t st;
  XXH3_64bits_reset(&st);
  XXH3_64bits_update(&st, p, 8);
  XXH3_64bits_update(&st, p + kHeader, n - kHeader);
  return XXH3_64bits_digest(&st);
}

// Bounds-checked reads (ok turns false on a short value).
struct Reader {
  const std::vector<uint8_t>& b;
  size_t at = 0;
  bool ok = true;
  uint32_t u32() {
    uint32_t v = 0;
    if (!ok || b.size() - at < 4) {
      ok = false;
      return 0;
    }
    std::memcpy(&v, b.data() + at, 4);
    at += 4;
    return v;
  }
  std::vector<uint8_t> blob() {
    const uint32_t n = u32();
    if (!ok || b.size() - at < n) {
      ok = false;
      return {};
    }
    std::vector<uint8_t> v(b.begin() + std::ptrdiff_t(at), b.begin() + std::ptrdiff_t(at + n));
    at += n;
    return v;
  }
};

DecodedStoredResponse corrupt(std::string why) {
  DecodedStoredResponse d;
  d.reason = std::move(why);
  return d;
}

}  // namespace

std::string stored_response_json(const StoredResponse& s) {
  const json j = {{"response", s.response}, {"messages", s.messages}, {"input", s.input}, {"reply_key", s.reply_key}};
  std::string text = j.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > kMaxStoredJsonBytes) return {};
  return text;
}

std::vector<uint8_t> encode_stored_response(const std::string& key, const StoredResponse& s) {
  const std::string text = stored_response_json(s);
  std::vector<uint8_t> out(kHeader);  // magic, version, checksum (filled last)
  std::memcpy(out.data(), kMagic, 4);
  std::memcpy(out.data() + 4, &kStoredResponseVersion, 4);
  put_blob(out, key.data(), key.size());
  put_blob(out, text.data(), text.size());
  if (s.reply) {
    const std::vector<uint8_t> r = encode_reply(key, *s.reply);
    put_blob(out, r.data(), r.size());
  } else {
    put_u32(out, 0);
  }
  const uint64_t sum = checksum(out.data(), out.size());
  std::memcpy(out.data() + 8, &sum, 8);
  return out;
}

DecodedStoredResponse decode_stored_response(const std::string& key, const std::vector<uint8_t>& bytes,
                                             int64_t n_vocab) {
  if (bytes.size() < kHeader || std::memcmp(bytes.data(), kMagic, 4) != 0) return corrupt("not a stored response");
  uint32_t version = 0;
  uint64_t sum = 0;
  std::memcpy(&version, bytes.data() + 4, 4);
  std::memcpy(&sum, bytes.data() + 8, 8);
  if (version != kStoredResponseVersion) return corrupt("stored response format version " + std::to_string(version));
  if (sum != checksum(bytes.data(), bytes.size())) return corrupt("stored response checksum mismatch");
  Reader in{bytes, kHeader};
  const std::vector<uint8_t> stored_key = in.blob();
  const std::vector<uint8_t> text = in.blob();
  const std::vector<uint8_t> reply = in.blob();
  if (!in.ok || in.at != bytes.size()) return corrupt("stored response lengths do not match its size");
  if (text.size() > kMaxStoredJsonBytes) return corrupt("stored response JSON over its bound");
  DecodedStoredResponse d;
  if (std::string(stored_key.begin(), stored_key.end()) != key) {
    d.status = StoredResponseStatus::kOtherKey;  // intact, another key's (a 64-bit name collision)
    return d;
  }
  const json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return corrupt("stored response JSON does not parse into an object");
  const auto resp = j.find("response"), messages = j.find("messages"), input = j.find("input"),
             reply_key = j.find("reply_key");
  if (resp == j.end() || !resp->is_object() || !resp->contains("id") || !(*resp)["id"].is_string() ||
      messages == j.end() || !messages->is_array() || input == j.end() || !input->is_array() ||
      reply_key == j.end() || !(reply_key->is_null() || reply_key->is_object()))
    return corrupt("stored response JSON is not {response, messages, input, reply_key}");
  for (const json& m : *messages)
    if (!m.is_object()) return corrupt("stored response message is not an object");
  StoredResponse& s = d.value;
  s.response = *resp;
  s.messages = *messages;
  s.input = *input;
  s.reply_key = *reply_key;
  if (!reply.empty()) {
    DecodedReply r = decode_reply_value(key, reply, n_vocab);
    if (r.status == ReplyValueStatus::kCorrupt) return corrupt("stored response reply: " + r.reason);
    if (r.status != ReplyValueStatus::kOk) return corrupt("stored response reply of another key");
    s.reply = std::move(r.reply);
  }
  d.status = StoredResponseStatus::kOk;
  return d;
}

uint64_t stored_response_max_bytes(const std::string& key, int64_t max_tokens) {
  return kHeader + 3 * 4 + key.size() + kMaxStoredJsonBytes + reply_value_max_bytes(key, max_tokens);
}

}  // namespace pc::server
