// The stored form of a remembered reply (server/chat/conversation.h): the value of a
// "pc:reply:<hex>" key in Redis (server/chat/reply_store.h). Redis is a peer, not trusted
// memory: a value is checked whole before anything in it is used.
//
//   0   magic "PCRM"                          4
//   4   format version (kReplyValueVersion)   u32
//   8   checksum                              u64  XXH3_64 of [0, 8) + [16, end)
//   16  u32 n, key bytes                      (the memory key it was stored under)
//       u32 n, ids (i32)                      generated ids
//       u32 n, tail bytes
//       u32 n, context (i32)                  prompt ids the reply followed
//       i64 kv_tokens                         (little-endian, as stored)
//
// Decoding checks the magic, version, checksum, every length against the bytes left,
// that nothing trails, that the key is the one asked for, that every id is a token
// of the model (0 <= id < n_vocab) and that kv_tokens is not negative. Any
// failure but a different key is corruption: the caller drops the value and counts it.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "server/chat/conversation.h"

namespace pc::server {

inline constexpr uint32_t kReplyValueVersion = 2;  // 1: no version field, no checksum

std::vector<uint8_t> encode_reply(const std::string& key, const RememberedReply& r);

enum class ReplyValueStatus {
  kOk,
  kOtherKey,  // intact, but stored under another memory key (a 64-bit key collision)
  kCorrupt,   // not an intact value of this format (reason says why)
};

struct DecodedReply {
  ReplyValueStatus status = ReplyValueStatus::kCorrupt;
  std::string reason;  // for kCorrupt: what failed
  RememberedReply reply;
};

// n_vocab <= 0: ids are not checked against a vocabulary.
DecodedReply decode_reply_value(const std::string& key, const std::vector<uint8_t>& bytes, int64_t n_vocab);

// The reply when the value is an intact one of `key`; nullopt otherwise.
std::optional<RememberedReply> decode_reply(const std::string& key, const std::vector<uint8_t>& bytes,
                                            int64_t n_vocab = 0);

// The largest value a reply of a model whose requests hold at most max_tokens tokens
// can have under `key`: the bound a Redis read of it is given.
uint64_t reply_value_max_bytes(const std::string& key, int64_t max_tokens);

}  // namespace pc::server
