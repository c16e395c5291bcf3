// The HTTP request and response types the route handlers work with (served by
// HttpServer, http_server.h).
#pragma once
#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace pc::server {

// Header names compare without regard to case (RFC 9110 §5.1).
struct HeaderNameLess {
  bool operator()(const std::string& a, const std::string& b) const;
};
using HttpHeaders = std::multimap<std::string, std::string, HeaderNameLess>;

struct HttpRequest {
  std::string method;  // as sent ("GET", "POST", ...); HEAD is served by the GET routes
  std::string target;  // the request target as sent: path and query
  std::string path;    // the target's path, percent-decoded
  std::multimap<std::string, std::string> params;  // query parameters, decoded
  HttpHeaders headers;
  std::string body;    // whatever its Content-Type; chunked bodies arrive decoded
  // The route pattern's match over `path`: [0] the whole path, [1..] its groups.
  std::vector<std::string> matches;
  std::string remote_addr;
  int remote_port = 0;
  int version = 11;  // 10 (HTTP/1.0) or 11

  bool has_header(const std::string& name) const;
  std::string get_header_value(const std::string& name) const;  // "" when absent
  bool has_param(const std::string& name) const;
  std::string get_param_value(const std::string& name) const;   // "" when absent
  // True once the client closed, half-closed or reset the connection: for handlers
  // that wait without writing (a client that gave up cancels its generation).
  bool is_connection_closed() const { return connection_closed && connection_closed(); }

  std::function<bool()> connection_closed;  // set by the server
};

// Where a streamed response's body goes, piece by piece (each write is one chunk of
// the chunked encoding). Called from the handler's worker thread.
class DataSink {
 public:
  virtual ~DataSink() = default;
  // Queues `n` bytes; blocks while the client is more than a bounded amount behind.
  // False once the client is gone or the server stops: the stream should end.
  virtual bool write(const char* data, size_t n) = 0;
  // The body is complete (the chunked encoding's last chunk follows).
  virtual void done() = 0;
  virtual bool is_writable() const = 0;
};

struct HttpResponse {
  // Called again and again (on the handler's worker thread) until it calls
  // sink.done() or returns false (the stream is cut); `offset` counts the bytes
  // written so far.
  using ContentProvider = std::function<bool(size_t offset, DataSink& sink)>;
  // Called once the streamed response ended: success = sink.done() was reached.
  using ContentReleaser = std::function<void(bool success)>;

  int status = -1;  // -1: not set (200 once a route ran)
  HttpHeaders headers;
  std::string body;
  ContentProvider provider;  // set: the body is streamed (chunked), `body` unused
  ContentReleaser releaser;

  HttpResponse() = default;
  HttpResponse(const HttpResponse&) = delete;
  HttpResponse& operator=(const HttpResponse&) = delete;
  ~HttpResponse();

  // Replaces any header of that name.
  void set_header(const std::string& name, const std::string& value);
  bool has_header(const std::string& name) const;
  std::string get_header_value(const std::string& name) const;  // "" when absent
  void set_content(std::string content, const std::string& content_type);
  void set_chunked_content_provider(const std::string& content_type, ContentProvider p,
                                    ContentReleaser r = nullptr);

  bool stream_succeeded = false;  // passed to `releaser` (set by the server)
};

}  // namespace pc::server
