// HttpRequestReader without sockets: framing rules, limits and body memory, exact.
#include "server/http/http_request_reader.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace pc::server {
namespace {

using State = HttpRequestReader::State;

struct Outcome {
  std::vector<HttpRequest> requests;
  HttpReadError error;      // status 0: none
  size_t most_capacity = 0; // the largest body buffer granted
};

// Feeds `bytes` `piece` bytes at a time as a connection does (unused bytes are kept
// and presented again), granting every body buffer asked for.
Outcome drive(const std::string& bytes, size_t piece, HttpReadLimits lim = {1024, 4096}) {
  HttpRequestReader r(lim);
  Outcome out;
  std::string pending;
  size_t next = 0;
  for (;;) {
    if (r.state() == State::kDone) {
      out.requests.push_back(r.take());
      r.reset();
      continue;
    }
    if (r.state() == State::kError) {
      out.error = r.error();
      return out;
    }
    if (r.state() == State::kNeedRoom) {
      const size_t want = r.body_room_wanted();
      EXPECT_GT(want, r.body_capacity());
      r.grow_body(want);
      out.most_capacity = std::max(out.most_capacity, want);
      continue;
    }
    const size_t used = r.feed(pending.data(), pending.size());
    pending.erase(0, used);
    if (used == 0 && (r.state() == State::kHeader || r.state() == State::kBody)) {
      if (next >= bytes.size()) return out;
      pending += bytes.substr(next, piece);
      next += piece;
    }
  }
}

TEST(HttpRequestReader, PipelinedRequestsInAnyPieces) {
  const std::string in =
      "GET /health?x=1 HTTP/1.1\r\nHost: x\r\n\r\n"
      "POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
      "POST /a%20b HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
      "3;ext=1;q=\"v\"\r\nabc\r\n2\r\nde\r\n0\r\nX-Trailer: t\r\n\r\n";
  for (size_t piece : {size_t(1), size_t(7), in.size()}) {
    const Outcome o = drive(in, piece);
    EXPECT_EQ(o.error.status, 0) << o.error.message;
    ASSERT_EQ(o.requests.size(), 3u) << "piece " << piece;
    EXPECT_EQ(o.requests[0].path, "/health");
    EXPECT_EQ(o.requests[0].get_param_value("x"), "1");
    EXPECT_EQ(o.requests[1].body, "hello");
    EXPECT_EQ(o.requests[2].path, "/a b");
    EXPECT_EQ(o.requests[2].body, "abcde");
    EXPECT_FALSE(o.requests[2].has_header("X-Trailer")) << "trailers are not headers";
  }
}

TEST(HttpRequestReader, ChunkSizesPastTheLimitOr2To63AreRefusedAtOnce) {
  const std::string head = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (const std::string& sizes : std::vector<std::string>{"ffffffffffffffff\r\n", "8000000000000000\r\n", "1001\r\n",
                                  "800\r\n" + std::string(0x800, 'a') + "\r\n801\r\n"}) {
    const Outcome o = drive(head + sizes, 4096);
    EXPECT_EQ(o.error.status, 413) << sizes.substr(0, 20);
    EXPECT_EQ(o.error.code, "body_too_large");
    EXPECT_LE(o.most_capacity, 4096u);
  }
}

// The last chunk's line, then nothing: presented again unchanged, Beast would assert
// (found by fuzz/http_request_fuzz.cc; the seed is in its corpus).
TEST(HttpRequestReader, TheLastChunkLineAloneWaitsForMore) {
  HttpRequestReader r({1024, 4096});
  const std::string in = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n";
  const size_t used = r.feed(in.data(), in.size());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(r.feed(in.data() + used, in.size() - used), 0u);
  EXPECT_EQ(r.state(), State::kBody);
  const std::string rest = in.substr(used) + "\r\n";
  EXPECT_EQ(r.feed(rest.data(), rest.size()), rest.size());
  EXPECT_EQ(r.state(), State::kDone);
}

// The bytes after the last chunk's line arriving one at a time: Beast asserts that it
// sees at least "0\r\n" and two more bytes when it resumes there (a fuzzer finding,
// fuzz/corpus/http_request/20_crash_last_chunk_reentry_short); the reader waits.
TEST(HttpRequestReader, TheEndOfAChunkedBodyByteByByte) {
  HttpRequestReader r({1024, 4096});
  const std::string in = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{\r\n0\r\nX-T: a\r\n\r\n";
  std::string pending;
  for (char c : in) {
    pending += c;
    pending.erase(0, r.feed(pending.data(), pending.size()));
    if (r.state() == State::kNeedRoom) {
      r.grow_body(r.body_room_wanted());
      pending.erase(0, r.feed(pending.data(), pending.size()));
    }
    ASSERT_NE(r.state(), State::kError) << r.error().message;
  }
  EXPECT_EQ(r.state(), State::kDone);
  EXPECT_EQ(r.take().body, "{");
}

TEST(HttpRequestReader, InconsistentFramingIsRefusedNamingTheHeader) {
  struct Case {
    std::string headers;
    int status;
    std::string code, named;
  };
  const std::vector<Case> cases = {
      {"Transfer-Encoding: gzip, chunked\r\n", 400, "invalid_transfer_encoding", "Transfer-Encoding"},
      {"Transfer-Encoding: gzip\r\n", 400, "invalid_transfer_encoding", "Transfer-Encoding"},
      {"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", 400, "invalid_transfer_encoding",
       "Transfer-Encoding"},
      {"Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n", 400, "invalid_transfer_encoding",
       "Transfer-Encoding"},
      {"Content-Length: 2\r\nX-Folded: a\r\n b\r\n", 400, "invalid_header", "obs-fold"},
      {"Content-Length: 2\r\nX-Folded: a\r\n\tb\r\n", 400, "invalid_header", "obs-fold"},
      {"Content-Length: 2, 2\r\n", 400, "invalid_content_length", "Content-Length"},
      {"Content-Length: 2\r\nContent-Length: 2\r\n", 400, "invalid_content_length", "Content-Length"},
      {"Content-Length: 2\r\nContent-Length: 3\r\n", 400, "invalid_content_length", "Content-Length"},
      {"Content-Length: -2\r\n", 400, "invalid_content_length", "Content-Length"},
      {"Content-Length: 2\r\nTransfer-Encoding: chunked\r\n", 400, "invalid_framing", "both"},
      {"Transfer-Encoding: chunked\r\nContent-Length: 2\r\n", 400, "invalid_framing", "both"},
      {"Content-Length: 5000\r\n", 413, "body_too_large", "--max-body-size"},
      {"", 411, "length_required", "Content-Length"},
  };
  for (const Case& c : cases) {
    const Outcome o = drive("POST / HTTP/1.1\r\nHost: x\r\n" + c.headers + "\r\nab", 1 << 20);
    EXPECT_EQ(o.error.status, c.status) << c.headers;
    EXPECT_EQ(o.error.code, c.code) << c.headers;
    EXPECT_NE(o.error.message.find(c.named), std::string::npos) << o.error.message;
    EXPECT_TRUE(o.requests.empty());
  }
  const Outcome old = drive("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 100);
  EXPECT_EQ(old.error.code, "invalid_transfer_encoding");
  // Exactly chunked, in any case and with spaces, is fine.
  EXPECT_EQ(drive("POST / HTTP/1.1\r\nTransfer-Encoding:  Chunked \r\n\r\n0\r\n\r\n", 100).requests.size(), 1u);
}

TEST(HttpRequestReader, ChunkLinesAndTrailersAreBoundedByTheHeaderLimit) {
  const std::string head = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  const Outcome trailer = drive(head + "1\r\n{\r\n0\r\nX-T: " + std::string(5000, 'a') + "\r\n\r\n", 512);
  EXPECT_EQ(trailer.error.status, 431);
  EXPECT_EQ(trailer.error.code, "headers_too_large");
  EXPECT_NE(trailer.error.message.find("trailer"), std::string::npos);
  std::string many = head + "1\r\n{\r\n0\r\n";
  for (int i = 0; i < 200; ++i) many += "X-" + std::to_string(i) + ": 0123456789\r\n";
  EXPECT_EQ(drive(many + "\r\n", 512).error.status, 431);
  EXPECT_EQ(drive(head + "1;" + std::string(5000, 'e') + "\r\n{\r\n0\r\n\r\n", 512).error.status, 431);
  // Within the limit: accepted, the trailer dropped.
  const Outcome ok = drive(head + "1\r\n{\r\n0\r\nX-T: " + std::string(500, 'a') + "\r\n\r\n", 512);
  ASSERT_EQ(ok.requests.size(), 1u);
  EXPECT_EQ(ok.requests[0].body, "{");
  // Headers over the limit.
  EXPECT_EQ(drive("GET / HTTP/1.1\r\nX: " + std::string(2000, 'a') + "\r\n\r\n", 512).error.status, 431);
}

TEST(HttpRequestReader, BodyMemoryGrowsWithTheBytesNotTheDeclaredLength) {
  HttpRequestReader r({1024, 64 << 20});
  const std::string head = "POST / HTTP/1.1\r\nContent-Length: 30000000\r\n\r\n";
  EXPECT_EQ(r.feed(head.data(), head.size()), head.size());
  EXPECT_EQ(r.state(), State::kBody);
  EXPECT_EQ(r.body_capacity(), 0u) << "nothing held for bytes not sent";
  EXPECT_EQ(r.feed("abc", 3), 0u);
  ASSERT_EQ(r.state(), State::kNeedRoom);
  EXPECT_EQ(r.body_room_wanted(), 64u << 10);
  r.grow_body(64 << 10);
  EXPECT_EQ(r.feed("abc", 3), 3u);
  const std::string more(70 << 10, 'x');
  EXPECT_EQ(r.feed(more.data(), more.size()), (64u << 10) - 3);
  EXPECT_EQ(r.body_room_wanted(), 30'000'000u);  // past the first 64 KiB: the rest at once

  // A small body asks for exactly its length.
  HttpRequestReader s({1024, 64 << 20});
  const std::string small = "POST / HTTP/1.1\r\nContent-Length: 30\r\n\r\n0123456789";
  EXPECT_EQ(s.feed(small.data(), small.size()), small.size() - 10);
  EXPECT_EQ(s.body_room_wanted(), 30u);
}

}  // namespace
}  // namespace pc::server
