#include "server/http/http_request_reader.h"

#include <algorithm>
#include <boost/asio/buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/error.hpp>
#include <exception>
#include <limits>

#include "server/http/http_wire.h"

namespace pc::server {

namespace {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using beast::error_code;
using beast::string_view;

constexpr size_t kFirstRoom = 64 << 10;  // a body's first buffer, unless it is declared smaller
constexpr size_t kQuoted = 100;          // at most this much of a header value goes into a message

std::string str(string_view s) { return std::string(s.data(), s.size()); }

std::string quoted(const std::string& v) {
  return "'" + (v.size() > kQuoted ? v.substr(0, kQuoted) + "..." : v) + "'";
}

// A line that starts with a space or tab continues the previous header (obs-fold).
bool has_obs_fold(const char* p, size_t n) {
  for (size_t i = 0; i + 1 < n; ++i)
    if (p[i] == '\n' && (p[i + 1] == ' ' || p[i + 1] == '\t')) return true;
  return false;
}

}  // namespace

// Beast's parser; its callbacks hand everything to the reader. Beast checks a field's
// syntax (do_field) before on_field_impl sees it.
class HttpRequestReader::Parser : public bhttp::basic_parser<true> {
 public:
  explicit Parser(HttpRequestReader& r) : r_(r) {}

 private:
  void on_request_impl(bhttp::verb, string_view method, string_view target, int version, error_code&) override {
    r_.req_.method = str(method);
    r_.req_.target = str(target);
    r_.req_.version = version;
  }
  void on_response_impl(int, string_view, int, error_code&) override {}
  void on_field_impl(bhttp::field f, string_view name, string_view value, error_code&) override {
    if (is_header_done()) return;  // a trailer field: dropped
    if (f == bhttp::field::transfer_encoding) ++r_.transfer_encodings_;
    if (f == bhttp::field::content_length) ++r_.content_lengths_;
    r_.req_.headers.emplace(str(name), str(value));
  }
  void on_header_impl(error_code&) override {}
  // Nothing is reserved from the declared length: memory is granted as bytes come.
  void on_body_init_impl(const boost::optional<std::uint64_t>&, error_code&) override {}
  size_t on_body_impl(string_view s, error_code&) override { return r_.store_body(s.data(), s.size()); }
  void on_chunk_header_impl(std::uint64_t size, string_view, error_code& ec) override {
    bool over = false;
    r_.on_chunk_size(size, over);
    if (over) ec = bhttp::error::body_limit;
  }
  size_t on_chunk_body_impl(std::uint64_t, string_view s, error_code&) override {
    return r_.store_body(s.data(), s.size());
  }
  void on_finish_impl(error_code&) override {}

  HttpRequestReader& r_;
};

HttpRequestReader::HttpRequestReader(const HttpReadLimits& limits) : lim_(limits) { reset(); }

HttpRequestReader::~HttpRequestReader() = default;

void HttpRequestReader::reset() {
  parser_ = std::make_unique<Parser>(*this);
  parser_->header_limit(std::uint32_t(std::clamp<int64_t>(lim_.max_header_bytes, 1, UINT32_MAX)));
  // Bodies are bounded here (on_chunk_size, check_framing). Not boost::none: Beast 1.74
  // compares the Content-Length against the optional and takes none as the smallest.
  parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
  state_ = State::kHeader;
  error_ = {};
  req_ = HttpRequest{};
  capacity_ = waiting_ = stalled_ = 0;
  declared_ = 0;
  transfer_encodings_ = content_lengths_ = 0;
}

size_t HttpRequestReader::feed(const char* data, size_t n) {
  size_t used = 0;
  while ((state_ == State::kHeader || state_ == State::kBody) && used < n) {
    const size_t k = put(data + used, n - used);
    used += k;
    if (k == 0) break;  // more bytes needed, or the state changed
  }
  return used;
}

// One step of Beast's parser (it stops after the headers and after each chunk line).
size_t HttpRequestReader::put(const char* data, size_t n) {
  // Beast holds a chunk-size line and the whole trailer section until they end and
  // bounds neither: they get at most the header limit.
  // Beast must not see the same bytes again after asking for more: past the last
  // chunk it asserts that they grew (basic_parser.ipp, "n >= 5"), an abort in a build
  // with assertions.
  // Re-entering after the last chunk's line it also asserts that at least 5 bytes are
  // there ("0\r\n" and more), so a stalled chunked body waits for that many.
  const bool chunked_body = state_ == State::kBody && parser_->chunked();
  const size_t line_limit = size_t(lim_.max_header_bytes);
  const size_t give = chunked_body ? std::min(n, line_limit) : n;
  if (stalled_ > 0 && give < std::max<size_t>(stalled_ + 1, chunked_body ? 5 : 0)) return 0;
  error_code ec;
  size_t used = 0;
  try {
    used = parser_->put(boost::asio::buffer(data, give), ec);
  } catch (const std::exception& e) {
    // Beast's parser throws only from its callbacks' allocations; never let it past.
    fail(400, std::string("malformed HTTP request (") + e.what() + ")", "bad_request");
    return 0;
  }
  stalled_ = ec == bhttp::error::need_more ? give - used : 0;
  if (state_ == State::kError) return used;  // a callback refused it
  if (ec == bhttp::error::need_more) {
    if (chunked_body && used == 0 && give == line_limit)
      fail(431, "a chunk-size line or the trailer section of the chunked body exceeds " +
                    std::to_string(line_limit) + " bytes",
           "headers_too_large");
    return used;
  }
  if (ec) {
    fail_parse(ec.value(), ec.message());
    return used;
  }
  if (state_ == State::kHeader) {
    if (parser_->is_header_done()) check_framing(data, used);
    return used;
  }
  if (waiting_ > 0) state_ = State::kNeedRoom;
  else if (parser_->is_done()) state_ = State::kDone;
  return used;
}

void HttpRequestReader::fail(int status, std::string message, std::string code) {
  state_ = State::kError;
  error_ = {status, std::move(message), std::move(code)};
}

void HttpRequestReader::fail_parse(int beast_error, const std::string& what) {
  using E = bhttp::error;
  const auto e = E(beast_error);
  const bool in_body = parser_->is_header_done();
  if (e == E::header_limit)
    return fail(431, "the request line and headers exceed " + std::to_string(lim_.max_header_bytes) + " bytes",
                "headers_too_large");
  if ((e == E::bad_content_length || e == E::bad_transfer_encoding) && !in_body) {
    // Beast refuses the second of the two framing headers, or a duplicate.
    const bool both = e == E::bad_content_length ? transfer_encodings_ > 0 : content_lengths_ > 0;
    if (both)
      return fail(400, "a request may not have both Content-Length and Transfer-Encoding headers", "invalid_framing");
    if (e == E::bad_transfer_encoding)
      return fail(400, "duplicate Transfer-Encoding header", "invalid_transfer_encoding");
    if (content_lengths_ > 0)
      return fail(400, "duplicate Content-Length headers with different values", "invalid_content_length");
    return fail(400, "invalid Content-Length header (one decimal number of bytes)", "invalid_content_length");
  }
  if (in_body && e != E::body_limit)
    return fail(400, "invalid chunked body (" + what + ")", "invalid_chunked_body");
  return fail(400, "malformed HTTP request (" + what + ")", "bad_request");
}

// The header block `header` (n bytes, whole) has been parsed.
void HttpRequestReader::check_framing(const char* header, size_t n) {
  if (has_obs_fold(header, n))
    return fail(400, "a header line starts with a space or tab (obs-fold continuation, RFC 9112 §5.2)",
                "invalid_header");
  if (transfer_encodings_ > 1) return fail(400, "duplicate Transfer-Encoding header", "invalid_transfer_encoding");
  if (content_lengths_ > 1) return fail(400, "duplicate Content-Length header", "invalid_content_length");
  if (transfer_encodings_ > 0 && content_lengths_ > 0)
    return fail(400, "a request may not have both Content-Length and Transfer-Encoding headers", "invalid_framing");
  if (transfer_encodings_ > 0) {
    const std::string te = req_.get_header_value("Transfer-Encoding");
    if (!beast::iequals(te, "chunked"))
      return fail(400, "Transfer-Encoding " + quoted(te) + " is not supported (only 'chunked')",
                  "invalid_transfer_encoding");
    if (req_.version < 11)
      return fail(400, "Transfer-Encoding in an HTTP/1.0 request", "invalid_transfer_encoding");
  }
  if (content_lengths_ > 0) {
    const std::string cl = req_.get_header_value("Content-Length");
    if (cl.find(',') != std::string::npos)
      return fail(400, "Content-Length " + quoted(cl) + " is not one decimal number", "invalid_content_length");
    const uint64_t n_body = *parser_->content_length();
    if (n_body > uint64_t(lim_.max_body_bytes))
      return fail(413, "the request body (" + std::to_string(n_body) +
                           " bytes) is larger than the server accepts (" + std::to_string(lim_.max_body_bytes) +
                           " bytes, --max-body-size)",
                  "body_too_large");
  } else if (transfer_encodings_ == 0 &&
             (req_.method == "POST" || req_.method == "PUT" || req_.method == "PATCH")) {
    return fail(411, "a " + req_.method + " request needs a Content-Length header (or Transfer-Encoding: chunked)",
                "length_required");
  }
  state_ = parser_->is_done() ? State::kDone : State::kBody;
}

// Chunk sizes are uint64: compared in unsigned arithmetic, never cast to a signed type.
void HttpRequestReader::on_chunk_size(uint64_t size, bool& over) {
  const uint64_t limit = uint64_t(lim_.max_body_bytes);
  if (size > limit || declared_ > limit - size) {
    over = true;
    return fail(413, "the chunked request body is larger than the server accepts (" + std::to_string(limit) +
                         " bytes, --max-body-size)",
                "body_too_large");
  }
  declared_ += size;
}

size_t HttpRequestReader::store_body(const char* data, size_t n) {
  const size_t k = std::min(n, capacity_ - req_.body.size());
  req_.body.append(data, k);
  waiting_ = n - k;
  return k;
}

bool HttpRequestReader::chunked() const { return parser_->is_header_done() && parser_->chunked(); }

uint64_t HttpRequestReader::content_length() const {
  if (!parser_->is_header_done() || parser_->chunked()) return 0;
  return parser_->content_length().value_or(0);
}

bool HttpRequestReader::keep_alive() const { return parser_->keep_alive(); }

size_t HttpRequestReader::body_room_wanted() const {
  const size_t need = req_.body.size() + waiting_;
  const uint64_t limit = chunked() ? uint64_t(lim_.max_body_bytes) : content_length();
  if (capacity_ == 0 && need <= kFirstRoom) return std::max(need, size_t(std::min<uint64_t>(kFirstRoom, limit)));
  return size_t(limit);  // the rest at once: a body never waits holding part of it
}

void HttpRequestReader::grow_body(size_t capacity) {
  std::string bigger;
  bigger.reserve(capacity);  // a fresh string's reserve allocates exactly this
  bigger.append(req_.body);
  req_.body.swap(bigger);
  capacity_ = capacity;
  waiting_ = 0;
  if (state_ == State::kNeedRoom) state_ = State::kBody;
}

HttpRequest HttpRequestReader::take() {
  HttpRequest r = std::move(req_);
  split_target(r.target, &r.path, &r.params);
  req_ = HttpRequest{};
  capacity_ = 0;
  return r;
}

}  // namespace pc::server
