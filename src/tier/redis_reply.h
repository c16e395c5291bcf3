// Reading Redis replies as from an untrusted peer: every reply is bounded by what the
// command that asked for it can legitimately answer, so a misbehaving or hostile
// server (a huge array or bulk length, deep nesting, a line without end, a trickle of
// bytes) costs a bounded amount of memory and time, never more.
//
// hiredis 0.14 (Debian 12) has no reader limits of its own (no maxbulklen or
// maxelements; only its fixed nesting limit of 7), so:
//   - the reader's object functions are replaced by ones that count what a reply
//     allocates (ReplyBudget) and refuse an array longer than max_elements, nesting
//     deeper than max_depth, a bulk string longer than max_bulk or a reply whose
//     objects would exceed max_total bytes (hiredis then fails with an OOM error);
//   - the read loop (read_reply) refuses a reader buffer holding more than
//     max_bulk + kLineSlack unparsed bytes (a bulk string or a line still arriving:
//     hiredis would buffer it whole before creating any object), and a reply that has
//     not completed by its deadline (each socket read has the connection's own
//     timeout too; the deadline bounds a peer that trickles bytes).
//
// Memory per reply: the reader buffer (at most max_bulk + kLineSlack unparsed bytes,
// in an sds string that may hold up to twice that) plus the reply's objects (at most
// max_total bytes). A violation leaves the connection unusable (the caller drops it).
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

struct redisContext;
struct redisReader;

namespace pc {

struct ReplyLimits {
  size_t max_bulk = 64;      // longest bulk string (bytes)
  int max_elements = 0;      // longest array (0: no arrays expected)
  int max_depth = 0;         // arrays nested in arrays (0: a top-level array at most)
  size_t max_total = 4096;   // bytes of all the reply's objects together
};

// Unparsed bytes the reader may hold beyond max_bulk: a bulk length line, a status,
// error or integer line, and the read that completed the reply.
inline constexpr size_t kLineSlack = 64 * 1024;

// What a reply being read has allocated, and the first limit it broke.
struct ReplyBudget {
  ReplyLimits limits;
  size_t used = 0;
  std::string violation;  // empty while within the limits
};

// Installs the bounding object functions on a reader; its privdata becomes `budget`,
// which must outlive every read (reset it before each reply).
void bound_reader(redisReader* reader, ReplyBudget* budget);

enum class ReplyRead {
  kOk,        // *reply set (free it with freeReplyObject)
  kIo,        // connection or protocol failure (c->errstr says which)
  kTooLarge,  // a limit was broken (budget.violation says which)
  kTimeout,   // the reply did not complete by the deadline
};

// Flushes pending commands and reads one reply within `limits`, by `deadline`.
// The context's reader must have been bound (bound_reader) to `budget`.
ReplyRead read_reply(redisContext* c, ReplyBudget* budget, const ReplyLimits& limits,
                     std::chrono::steady_clock::time_point deadline, void** reply);

// The bytes of a buffer still unparsed by the reader (fuzzing and tests).
size_t unparsed_bytes(const redisReader* reader);

}  // namespace pc
