#include "server/chat/stored_response.h"

#include "server/chat/reply_value.h"
#include "server/chat/value_codec.h"

namespace pc::server {

namespace {

using json = nlohmann::json;

constexpr char kMagic[4] = {'P', 'C', 'R', 'S'};
constexpr size_t kHeader = 16;  // magic, version, checksum (value_codec.h)

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
  ValueWriter out(kMagic, kStoredResponseVersion, key.size() + text.size() + 12);
  out.str(key);
  out.str(text);
  if (s.reply) {
    const std::vector<uint8_t> r = encode_reply(key, *s.reply);
    out.blob(r.data(), r.size());
  } else {
    out.u32(0);
  }
  return out.seal();
}

DecodedStoredResponse decode_stored_response(const std::string& key, const std::vector<uint8_t>& bytes,
                                             int64_t n_vocab) {
  if (std::string why = open_value(bytes, kMagic, kStoredResponseVersion, "stored response"); !why.empty())
    return corrupt(std::move(why));
  ValueReader in{bytes};
  const std::vector<uint8_t> stored_key = in.blob();
  const std::vector<uint8_t> text = in.blob();
  const std::vector<uint8_t> reply = in.blob();
  if (!in.at_end()) return corrupt("stored response lengths do not match its size");
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
