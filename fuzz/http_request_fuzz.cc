// libFuzzer target: HttpRequestReader (src/server/http/http_request_reader.h) on arbitrary
// bytes, fed in pieces as a connection reads them, under small limits so that every
// bound is reached. The first byte picks the piece size (1..64 bytes, or whole when 0).
// Beyond sanitizer findings it traps when the reader breaks its own contract: a body
// past max_body_bytes, a buffer it asks for that does not grow or passes the bound,
// an error outside 4xx, or a feed that stalls while bytes wait.
//
//   clang++ -std=c++20 -fsanitize=fuzzer,address,undefined -Isrc fuzz/http_request_fuzz.cc \
//     src/server/http/http_request_reader.cc src/server/http/http_wire.cc src/server/http/http.cc
//   ./a.out fuzz/corpus/http_request
#include <cstddef>
#include <cstdint>
#include <string>

#include "server/http/http_request_reader.h"

namespace {

using pc::server::HttpReadLimits;
using pc::server::HttpRequestReader;
using State = HttpRequestReader::State;

constexpr HttpReadLimits kLimits{256, 4096};

void check(bool ok) {
  if (!ok) __builtin_trap();
}

// Grants the body buffer the reader asks for, after checking the request is sane.
void grant(HttpRequestReader& r) {
  const size_t want = r.body_room_wanted();
  check(want > r.body_capacity());
  check(want <= size_t(kLimits.max_body_bytes));
  r.grow_body(want);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t piece = data[0] % 65 == 0 ? size : data[0] % 65;
  const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  HttpRequestReader r(kLimits);
  std::string pending;  // read and not yet used, as a connection's buffer
  size_t next = 0;
  for (int steps = 0;; ++steps) {
    check(steps < 1'000'000);
    switch (r.state()) {
      case State::kDone: {
        const pc::server::HttpRequest req = r.take();
        check(req.body.size() <= size_t(kLimits.max_body_bytes));
        r.reset();
        continue;
      }
      case State::kError:
        check(r.error().status >= 400 && r.error().status < 500 && !r.error().code.empty());
        return 0;
      case State::kNeedRoom:
        grant(r);
        continue;
      case State::kHeader:
      case State::kBody:
        break;
    }
    const size_t used = r.feed(pending.data(), pending.size());
    check(used <= pending.size());
    pending.erase(0, used);
    if (used > 0 || (r.state() != State::kHeader && r.state() != State::kBody)) continue;
    // No progress: only more bytes help. A connection never holds more than the
    // header limit plus one read unused.
    check(pending.size() <= size_t(kLimits.max_header_bytes) + 64);
    if (next >= bytes.size()) return 0;
    pending += bytes.substr(next, piece);
    next += piece;
  }
}
