// A response kept for POST /v1/responses' previous_response_id, GET and DELETE
// (server/chat/response_store.h), and its stored form: the value of a "pc:resp:<hex>"
// key in Redis. Redis is a peer, not trusted memory: a value is checked whole before
// anything in it is used.
//
//   0   magic "PCRS"                          4
//   4   format version (kStoredResponseVersion) u32
//   8   checksum                              u64  XXH3_64 of [0, 8) + [16, end)
//   16  u32 n, key bytes                      (the store key: tenant, id)
//       u32 n, JSON text                      {"response", "messages", "input", "reply_key"}
//       u32 n, reply value                    encode_reply(key, reply) (n = 0: none)
//
// Decoding checks the magic, version, checksum, every length against the bytes left,
// that nothing trails, that the key is the one asked for, that the JSON parses into the
// shape below (at most kMaxStoredJsonBytes) and that the reply is an intact reply value
// of the same key (reply_value.h: ids inside the vocabulary).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/chat/conversation.h"

namespace pc::server {

inline constexpr uint32_t kStoredResponseVersion = 1;
inline constexpr size_t kMaxStoredJsonBytes = size_t(16) << 20;

struct StoredResponse {
  nlohmann::json response;  // the response object as returned (an object with a string "id")
  // The conversation through this response's output as chat messages (an array), without
  // the request's instructions: what a continuation renders before its own input.
  nlohmann::json messages = nlohmann::json::array();
  nlohmann::json input = nlohmann::json::array();  // the request's input items
  // The conversation memory's key of the reply: {"text": "..."} or {"calls": [ids]};
  // null when nothing was remembered.
  nlohmann::json reply_key;
  std::optional<RememberedReply> reply;  // the ids it generated, for the continuation's splice
};

// The JSON part serialized: "" when it exceeds kMaxStoredJsonBytes (the response is not
// stored).
std::string stored_response_json(const StoredResponse& s);

std::vector<uint8_t> encode_stored_response(const std::string& key, const StoredResponse& s);

enum class StoredResponseStatus { kOk, kOtherKey, kCorrupt };

struct DecodedStoredResponse {
  StoredResponseStatus status = StoredResponseStatus::kCorrupt;
  std::string reason;  // kCorrupt: what failed
  StoredResponse value;
};

// n_vocab <= 0: reply ids are not checked against a vocabulary.
DecodedStoredResponse decode_stored_response(const std::string& key, const std::vector<uint8_t>& bytes,
                                             int64_t n_vocab);

// The largest value a response of a model whose requests hold at most max_tokens tokens
// can have under `key`.
uint64_t stored_response_max_bytes(const std::string& key, int64_t max_tokens);

}  // namespace pc::server
