// The HTTP/1.1 server under the routes: one event loop (Boost.Asio) owns every
// connection; route handlers run on a bounded pool of worker threads.
//
//   I/O thread                                  worker threads (HttpLimits::workers)
//   ──────────                                  ─────────────────────────────────────
//   accept: --max-connections, per-address cap
//   read headers (deadline, size bound)
//   body: framing checked (http_request_reader),
//         memory granted as bytes come, deadline
//   request complete ─────────────────────────► route → handler (may block: generation)
//   keeps reading: EOF = client gone ◄ · · · · · req.is_connection_closed()
//   writes in order ◄───────────────────────── whole response, or a stream's chunks
//   next pipelined request                      (DataSink blocks while the client lags)
//
// A connection answers its requests one at a time, in the order they came
// (pipelining); bytes of later requests wait in a bounded read-ahead buffer.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "server/http/http.h"

namespace pc::server {

struct HttpLimits {
  // A request's headers must be complete within this time of the connection opening
  // or the previous response being written (an idle keep-alive connection closes).
  int64_t header_timeout_ms = 10'000;
  // Its body must be complete within this time of the headers.
  int64_t body_timeout_ms = 60'000;
  // A write the client does not take within this time closes the connection.
  int64_t write_timeout_ms = 60'000;
  int max_connections = 4096;
  // Connections one remote address may hold (0 = max_connections). When all
  // max_connections are taken, a new one closes the oldest idle connection of the
  // address holding the most.
  int max_client_connections = 1024;
  int64_t max_header_bytes = 64 << 10;  // request line and headers
  int64_t max_body_bytes = 32 << 20;
  // Memory of the bodies being read or handled together (body_budget.h): a body's
  // buffer is granted as its bytes arrive (64 KiB, then the rest), never from the
  // declared length alone; a buffer that does not fit waits (within its body deadline) for others to finish. An
  // eighth is kept for buffers of at most 64 KiB, so small requests pass big uploads.
  // One body larger than it is read alone.
  int64_t body_memory_bytes = 256 << 20;
  int workers = 16;  // handler threads
};

class HttpServer {
 public:
  using Handler = std::function<void(const HttpRequest&, HttpResponse&)>;
  // Fills the answer to an error the HTTP layer finds itself (a malformed request, a
  // limit): status 400, 408, 411, 413, 431, 503; `code` names it (e.g. body_too_large).
  using ErrorWriter =
      std::function<void(HttpResponse&, int status, const std::string& message, const std::string& code)>;
  // Called once per answered request, after its handler (streams: before the body).
  using Logger = std::function<void(const HttpRequest&, const HttpResponse&)>;

  explicit HttpServer(const HttpLimits& limits);
  ~HttpServer();  // stops and joins the workers
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Registration, before listen(). `pattern` is a regex over the whole decoded path;
  // the first route whose method and pattern match serves a request.
  void route(const std::string& method, const std::string& pattern, Handler handler);
  // Runs on every response with status >= 400 (no route: 404, body empty) before it
  // is sent.
  void set_error_handler(Handler handler);
  void set_error_writer(ErrorWriter writer);
  void set_logger(Logger logger);
  // Added to every response that does not set them.
  void set_default_headers(HttpHeaders headers);

  // Binds and listens (no SO_REUSEPORT: a port in use is an error); returns the port
  // (the chosen one for 0). Raises RLIMIT_NOFILE to what max_connections needs.
  // Throws pc::Error naming the address.
  int bind(const std::string& host, int port);
  // Runs the event loop until stop(); false when not bound.
  bool listen();
  // Stops accepting and closes idle connections; listen() returns once the requests
  // being handled are answered. A stream still being written is cut. Thread-safe.
  void stop();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace pc::server
