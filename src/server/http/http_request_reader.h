// Parses HTTP/1.1 requests from the bytes a connection reads, one request at a time,
// with no I/O: Beast's parser under the server's limits and framing rules. The
// connection (http_server.cc) feeds it, grants its body memory and answers its
// errors; the unit tests and fuzz/http_request_fuzz.cc drive it directly.
//
//   feed(bytes) ──► kHeader ──► kBody ──► kDone ──► take(request), reset()
//                      │          │  ▲
//                      │          ▼  │ grow_body(body_room_wanted())
//                      │       kNeedRoom
//                      └──────────┴──► kError: error() is the answer (4xx), then close
//
// Framing (RFC 9112 §6): one Content-Length holding one decimal number, or
// Transfer-Encoding: chunked exactly once, never both; no obs-fold line continuations;
// Transfer-Encoding only in HTTP/1.1. Anything else is refused naming the header, since
// another server on the path might frame the bytes differently (request smuggling).
//
// Bounds: the request line and headers, each chunk-size line and the trailer section
// hold at most max_header_bytes; the body (declared or summed chunk sizes) at most
// max_body_bytes. Trailer fields are checked and dropped, never merged into headers.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "server/http/http.h"

namespace pc::server {

struct HttpReadLimits {
  int64_t max_header_bytes = 64 << 10;
  int64_t max_body_bytes = 32 << 20;
};

// A request refused by the reader: its status (400, 411, 413, 431), a message naming
// the header or bound, and a code (e.g. body_too_large).
struct HttpReadError {
  int status = 0;
  std::string message;
  std::string code;
};

class HttpRequestReader {
 public:
  enum class State {
    kHeader,    // reading the request line and headers
    kBody,      // headers read and checked; reading the body
    kNeedRoom,  // body bytes wait for memory: grow_body(), then feed again
    kDone,      // a whole request: take() it
    kError,     // refused: error()
  };

  explicit HttpRequestReader(const HttpReadLimits& limits);
  ~HttpRequestReader();
  HttpRequestReader(const HttpRequestReader&) = delete;
  HttpRequestReader& operator=(const HttpRequestReader&) = delete;

  // Forgets the request (and its body memory) and waits for the next one.
  void reset();
  // Parses from `data` as far as the state allows; returns the bytes used. The caller
  // keeps the rest and presents it again with what follows (headers are parsed only
  // once they are whole). Returns at kDone: later bytes belong to the next request.
  size_t feed(const char* data, size_t n);

  State state() const { return state_; }
  const HttpReadError& error() const { return error_; }

  // Once the headers are read.
  bool chunked() const;
  uint64_t content_length() const;  // 0 when chunked or without a body
  bool keep_alive() const;
  const HttpRequest& request() const { return req_; }  // method, target, headers, version

  // Body memory. Bytes are stored only into capacity granted by grow_body, so the
  // caller accounts for every byte a body holds (body_capacity()).
  size_t body_capacity() const { return capacity_; }
  // In kNeedRoom: the capacity to grow to next. First 64 KiB (or the declared length
  // if smaller): a client that declares a large body and sends little holds little.
  // Past that, the whole declared length (chunked: max_body_bytes) at once, so that
  // bodies never hold part of their memory while waiting for the rest (two that
  // did could wait on each other until their deadlines).
  size_t body_room_wanted() const;
  // Moves the body into a new buffer of exactly `capacity` bytes (> body_capacity()).
  void grow_body(size_t capacity);

  // In kDone: moves the request out (path and params split from the target).
  HttpRequest take();

 private:
  class Parser;
  friend class Parser;
  size_t put(const char* data, size_t n);
  void fail(int status, std::string message, std::string code);
  void fail_parse(int beast_error, const std::string& what);
  void check_framing(const char* header, size_t n);
  size_t store_body(const char* data, size_t n);
  void on_chunk_size(uint64_t size, bool& over);

  HttpReadLimits lim_;
  std::unique_ptr<Parser> parser_;
  State state_ = State::kHeader;
  HttpReadError error_;
  HttpRequest req_;
  size_t capacity_ = 0;   // req_.body's granted capacity
  size_t waiting_ = 0;    // body bytes the parser offered beyond it (kNeedRoom)
  size_t stalled_ = 0;    // bytes Beast last asked more than (need_more); 0 after progress
  uint64_t declared_ = 0; // chunked: the chunk sizes so far (<= max_body_bytes)
  int transfer_encodings_ = 0, content_lengths_ = 0;  // header fields seen
};

}  // namespace pc::server
