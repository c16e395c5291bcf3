// libFuzzer target: what a hostile Redis can send us.
//
// Input byte 0 picks the path:
//   even: the bytes are a Redis reply stream, read through the bounded reader exactly as
//         RedisTier reads it (tier/redis_reply.h: read_reply over a socket), with
//         limits taken from bytes 1-2; every reply must respect them.
//   odd:  the bytes are a stored reply-memory value (server/chat/reply_value.h), decoded
//         under a small vocabulary; an accepted value must re-encode to the same bytes.
#include <hiredis/hiredis.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "server/chat/reply_value.h"
#include "tier/redis_reply.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

// Objects of a reply, counted as the budget counts them (bytes).
size_t reply_bytes(const redisReply* r) {
  if (!r) return 0;
  size_t n = sizeof(redisReply) + (r->str ? r->len + 1 : 0) + r->elements * sizeof(redisReply*);
  for (size_t i = 0; i < r->elements; ++i) n += reply_bytes(r->element[i]);
  return n;
}

int depth(const redisReply* r) {
  int d = 0;
  for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements; ++i)
    if (r->element[i] && r->element[i]->type == REDIS_REPLY_ARRAY) d = std::max(d, 1 + depth(r->element[i]));
  return d;
}

void fuzz_replies(const uint8_t* data, size_t size) {
  pc::ReplyLimits limits;
  limits.max_bulk = size > 1 ? data[1] * 4 : 16;
  limits.max_elements = size > 2 ? data[2] % 16 : 0;
  limits.max_depth = size > 2 ? data[2] / 16 % 4 : 0;
  limits.max_total = 2048;
  int fds[2];
  check(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
  const size_t skip = std::min<size_t>(size, 3);
  // A socket buffer holds a fuzz input (libFuzzer's default max_len is 4096).
  if (size > skip) check(::write(fds[1], data + skip, size - skip) == ssize_t(size - skip));
  ::close(fds[1]);  // the peer hangs up after its bytes: every read ends
  redisContext* c = redisConnectFd(fds[0]);
  check(c && !c->err);
  pc::ReplyBudget budget;
  pc::bound_reader(c->reader, &budget);
  for (;;) {
    void* raw = nullptr;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
    const pc::ReplyRead r = pc::read_reply(c, &budget, limits, deadline, &raw);
    if (r != pc::ReplyRead::kOk) break;
    auto* reply = static_cast<redisReply*>(raw);
    check(reply_bytes(reply) <= limits.max_total);
    check(reply->type != REDIS_REPLY_STRING || reply->len <= limits.max_bulk);
    check(reply->elements <= size_t(limits.max_elements));
    check(depth(reply) <= limits.max_depth);
    freeReplyObject(reply);
  }
  redisFree(c);  // closes fds[0]
}

void fuzz_value(const uint8_t* data, size_t size) {
  const std::vector<uint8_t> bytes(data + 1, data + size);
  const pc::server::DecodedReply d = pc::server::decode_reply_value("key", bytes, 1000);
  if (d.status != pc::server::ReplyValueStatus::kOk) return;
  for (int32_t id : d.reply.ids) check(id >= 0 && id < 1000);
  for (int32_t id : d.reply.context) check(id >= 0 && id < 1000);
  check(pc::server::encode_reply("key", d.reply) == bytes);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (data[0] % 2 == 0) fuzz_replies(data, size);
  else fuzz_value(data, size);
  return 0;
}
