#include "server/http/http_server.h"

#include <sys/resource.h>

#include <utility>  // before Asio: its awaitable.hpp uses std::exchange without it
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <limits>
#include <list>
#include <mutex>
#include <optional>
#include <regex>
#include <thread>
#include <unordered_map>

#include "common/error.h"
#include "server/http/body_budget.h"
#include "server/http/http_request_reader.h"
#include "server/http/http_wire.h"

namespace pc::server {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;
using Millis = std::chrono::milliseconds;

constexpr size_t kHeaderRead = 4 << 10;   // bytes one read asks for while headers come
constexpr size_t kBodyRead = 64 << 10;    // ... while a body comes
constexpr size_t kStreamLag = 1 << 20;    // a stream's unsent bytes before DataSink::write blocks
constexpr int kReservedFds = 256;         // descriptors besides connections: model, tiers, logs
constexpr int64_t kLingerMs = 2000;       // after an error answer: reading what the client still sends
constexpr int kListenBacklog = 1024;      // capped by net.core.somaxconn

std::string seconds_text(int64_t ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%gs", double(ms) / 1000);
  return buf;
}

// Runs tasks on a fixed set of threads, in the order posted.
class WorkerPool {
 public:
  explicit WorkerPool(int n) {
    for (int i = 0; i < n; ++i) threads_.emplace_back([this] { run(); });
  }
  ~WorkerPool() {
    {
      std::lock_guard lk(mu_);
      quit_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }
  void post(std::function<void()> task) {
    {
      std::lock_guard lk(mu_);
      tasks_.push_back(std::move(task));
    }
    cv_.notify_one();
  }

 private:
  void run() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock lk(mu_);
        cv_.wait(lk, [&] { return quit_ || !tasks_.empty(); });
        if (tasks_.empty()) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool quit_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace

class Connection;

struct HttpServer::Impl {
  explicit Impl(const HttpLimits& l)
      : lim(l), budget(l.body_memory_bytes), workers(std::max(1, l.workers)) {}

  HttpLimits lim;
  asio::io_context io{1};
  tcp::acceptor acceptor{io};
  asio::steady_timer accept_retry{io};
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;

  struct Route {
    std::string method;
    std::regex pattern;
    Handler handler;
  };
  std::vector<Route> routes;
  Handler error_handler;
  ErrorWriter error_writer;
  Logger logger;
  HttpHeaders default_headers;

  // I/O thread only.
  std::list<std::shared_ptr<Connection>> conns;  // oldest first
  std::unordered_map<std::string, int> per_peer;
  BodyBudget budget;
  int handling = 0;  // requests handed to the workers and not yet answered
  std::atomic<bool> stopping{false};

  WorkerPool workers;  // last: joined before the rest goes

  void accept();
  void admit(tcp::socket s);
  bool evict_idle();
  void refuse(tcp::socket& s, const std::string& message);
  void forget(Connection& c);
  void stop_on_io();
  void maybe_finish();
  void raise_fd_limit();

  // An error answer of the HTTP layer, default headers included.
  void error_response(HttpResponse& res, int status, const std::string& message, const std::string& code);
  void add_default_headers(HttpResponse& res) const;
  // Worker thread: routes the request, runs its handler, sends the answer.
  void serve(const std::shared_ptr<Connection>& c, const std::shared_ptr<HttpRequest>& req, int64_t reserved,
             bool keep_alive);
  void run_route(HttpRequest& req, HttpResponse& res);
  void stream(Connection& c, const HttpRequest& req, const std::shared_ptr<HttpResponse>& res, bool keep_alive);
};

// One client connection. Its socket, parser and queues belong to the I/O thread;
// workers use only the thread-safe part (gone, send, wait_writable).
class Connection : public std::enable_shared_from_this<Connection>, public BodyBudgetWaiter {
 public:
  Connection(HttpServer::Impl& srv, tcp::socket s, std::string peer, int port)
      : srv_(srv), socket_(std::move(s)), peer_(std::move(peer)), port_(port),
        in_(size_t(srv.lim.max_header_bytes) + kBodyRead),
        reader_(HttpReadLimits{srv.lim.max_header_bytes, srv.lim.max_body_bytes}), read_timer_(srv.io),
        write_timer_(srv.io) {}

  std::list<std::shared_ptr<Connection>>::iterator it;  // in srv.conns

  const std::string& peer() const { return peer_; }
  // Waiting for a request's headers with nothing to write: may be closed to make room.
  bool idle() const { return phase_ == Phase::kHeader && out_.empty() && !writing_; }
  bool waiting_budget() const override { return phase_ == Phase::kBudget && !closed_; }

  void start() {
    new_request();
    read_more();
  }

  void budget_granted(int64_t want) override {
    phase_ = Phase::kBody;
    grow_body(want);
    advance();
    read_more();
  }

  void on_stop() {
    if (phase_ != Phase::kHandling && !writing_ && out_.empty()) close();
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    set_gone();
    beast::error_code ec;
    read_timer_.cancel();
    write_timer_.cancel();
    socket_.close(ec);
    if (reserved_ > 0) srv_.budget.give(std::exchange(reserved_, 0));
    out_.clear();
    auto self = shared_from_this();
    srv_.forget(*this);
  }

  // ── Any thread ──
  bool gone() const { return gone_.load(); }

  // Queues bytes of the response being answered; `last` ends it (then the
  // connection reads the next request, or closes: `close_after`). `keep` lives until
  // the bytes are written.
  void send(std::string bytes, bool last, bool close_after, std::shared_ptr<void> keep) {
    {
      std::lock_guard lk(mu_);
      unsent_ += bytes.size();
    }
    asio::post(srv_.io, [self = shared_from_this(), o = Out{std::move(bytes), last, close_after, std::move(keep)}]() mutable {
      self->enqueue(std::move(o));
    });
  }

  // Blocks while more than kStreamLag bytes wait to be sent; false once gone.
  bool wait_writable() {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return gone_.load() || unsent_ <= kStreamLag; });
    return !gone_.load();
  }

 private:
  enum class Phase {
    kHeader,    // reading a request's headers
    kBudget,    // headers read; waiting for body memory
    kBody,      // reading its body
    kHandling,  // a worker answers it; later bytes wait in in_
    kClosing,   // answered with an error: reading what comes until EOF, then closed
  };
  struct Out {
    std::string bytes;
    bool last = false;
    bool close_after = false;
    std::shared_ptr<void> keep;
  };

  void set_gone() {
    {
      std::lock_guard lk(mu_);
      gone_ = true;
    }
    cv_.notify_all();
  }

  void new_request() {
    reader_.reset();
    phase_ = Phase::kHeader;
    if (in_.size() == 0 && in_.capacity() > 4 * kBodyRead) in_.shrink_to_fit();
    arm_read_deadline(srv_.lim.header_timeout_ms);
  }

  void arm_read_deadline(int64_t ms) {
    const uint64_t gen = ++deadline_gen_;
    read_timer_.expires_after(Millis(ms));
    read_timer_.async_wait([w = weak_from_this(), gen](beast::error_code ec) {
      auto c = w.lock();
      if (!ec && c && c->deadline_gen_ == gen) c->on_read_deadline();
    });
  }
  void cancel_read_deadline() {
    ++deadline_gen_;
    read_timer_.cancel();
  }

  void on_read_deadline() {
    switch (phase_) {
      case Phase::kHeader:
        if (in_.size() == 0) return close();  // idle keep-alive connection
        return reject(408, "the request's headers did not arrive within " +
                               seconds_text(srv_.lim.header_timeout_ms) + " (--header-timeout)",
                      "header_timeout");
      case Phase::kBudget:
        return reject(503, "the server is busy reading other requests' bodies (--max-body-memory); retry later",
                      "server_busy");
      case Phase::kBody:
        return reject(408, "the request body did not arrive within " + seconds_text(srv_.lim.body_timeout_ms) +
                               " (--body-timeout)",
                      "body_timeout");
      case Phase::kClosing:
        return close();
      case Phase::kHandling:
        return;
    }
  }

  void read_more() {
    if (reading_ || peer_eof_ || closed_) return;
    const size_t room = in_.max_size() - in_.size();
    if (room == 0) return;  // resumes once the parser takes bytes
    const size_t want = std::min(room, phase_ == Phase::kBody ? kBodyRead : kHeaderRead);
    reading_ = true;
    socket_.async_read_some(in_.prepare(want), [self = shared_from_this()](beast::error_code ec, size_t n) {
      self->on_read(ec, n);
    });
  }

  void on_read(beast::error_code ec, size_t n) {
    reading_ = false;
    if (closed_) return;
    if (ec) {
      peer_eof_ = true;
      set_gone();  // a client that half-closes while waiting is taken as gone
      if (ec != asio::error::eof) return close();
    } else {
      in_.commit(n);
    }
    if (phase_ == Phase::kClosing) {
      in_.consume(in_.size());
      if (peer_eof_) return close();
    } else {
      advance();
    }
    read_more();
  }

  // Parses what in_ holds as far as the current phase goes.
  void advance() {
    using State = HttpRequestReader::State;
    while (!closed_ && (phase_ == Phase::kHeader || phase_ == Phase::kBody)) {
      if (reader_.state() == State::kDone) return dispatch();
      if (reader_.state() == State::kNeedRoom) {
        if (!ask_room()) return;
        continue;
      }
      if (in_.size() == 0) {
        if (peer_eof_) close();
        return;
      }
      const size_t used = reader_.feed(static_cast<const char*>(in_.data().data()), in_.size());
      in_.consume(used);
      if (reader_.state() == State::kError) {
        const HttpReadError e = reader_.error();  // a copy: reject() resets the reader
        return reject(e.status, e.message, e.code);
      }
      if (phase_ == Phase::kHeader && reader_.state() != State::kHeader) on_header();
      if (used == 0 && (reader_.state() == State::kHeader || reader_.state() == State::kBody)) {
        if (peer_eof_) close();  // the request can never end
        return;
      }
    }
  }

  // Headers read and checked: the body (if any) comes within the body deadline.
  void on_header() {
    phase_ = Phase::kBody;
    arm_read_deadline(srv_.lim.body_timeout_ms);
    expect_continue();
  }

  // Expect: 100-continue (curl sends it before large bodies): the body is wanted.
  void expect_continue() {
    const HttpRequest& r = reader_.request();
    if (r.version < 11 || reader_.state() == HttpRequestReader::State::kDone ||
        !beast::iequals(r.get_header_value("Expect"), "100-continue"))
      return;
    enqueue_own(Out{"HTTP/1.1 100 Continue\r\n\r\n", false, false, nullptr});
  }

  // The body's bytes wait for a bigger buffer: from the budget now, or once it fits.
  bool ask_room() {
    const auto want = int64_t(reader_.body_room_wanted());
    const auto held = int64_t(reader_.body_capacity());
    if (srv_.budget.take(want, held)) {
      grow_body(want);
      return true;
    }
    phase_ = Phase::kBudget;
    srv_.budget.wait(weak_from_this(), want, held);
    return false;
  }

  // `want` bytes are taken: the body moves into a buffer that size, the old one goes.
  void grow_body(int64_t want) {
    const auto held = int64_t(reader_.body_capacity());
    reserved_ += want;
    reader_.grow_body(size_t(want));
    reserved_ -= held;
    srv_.budget.give(held);
  }

  // Answers an error of the request itself and closes (its remaining bytes cannot be
  // told apart from a next request).
  void reject(int status, const std::string& message, const std::string& code) {
    phase_ = Phase::kClosing;
    cancel_read_deadline();
    const int version = reader_.request().version == 10 ? 10 : 11;
    reader_.reset();  // frees the body read so far
    if (reserved_ > 0) srv_.budget.give(std::exchange(reserved_, 0));
    HttpResponse res;
    srv_.error_response(res, status, message, code);
    if (srv_.logger) srv_.logger(HttpRequest{}, res);
    enqueue_own(Out{response_head(res, version, false, false, res.body.size()) + res.body, true, true, nullptr});
  }

  void dispatch() {
    const bool keep_alive = reader_.keep_alive();
    auto req = std::make_shared<HttpRequest>(reader_.take());
    req->remote_addr = peer_;
    req->remote_port = port_;
    req->connection_closed = [w = weak_from_this()] {
      auto c = w.lock();
      return !c || c->gone();
    };
    phase_ = Phase::kHandling;
    cancel_read_deadline();
    ++srv_.handling;
    srv_.workers.post([&srv = srv_, self = shared_from_this(), req, reserved = std::exchange(reserved_, 0),
                       keep_alive] { srv.serve(self, req, reserved, keep_alive); });
  }

  // The I/O thread's own bytes (not from send()).
  void enqueue_own(Out o) {
    {
      std::lock_guard lk(mu_);
      unsent_ += o.bytes.size();
    }
    enqueue(std::move(o));
  }

  void enqueue(Out o) {
    if (closed_) {
      std::lock_guard lk(mu_);
      unsent_ -= std::min(unsent_, o.bytes.size());
      return;
    }
    out_.push_back(std::move(o));
    write_next();
  }

  // Writes what is queued, up to and including the end of the response, in one go.
  void write_next() {
    while (!writing_ && !closed_ && !out_.empty() && out_.front().bytes.empty()) {
      Out o = std::move(out_.front());
      out_.pop_front();
      if (o.last) end_of_response(o.close_after);
    }
    if (writing_ || closed_ || out_.empty()) return;
    std::vector<asio::const_buffer> bufs;
    for (const Out& o : out_) {
      bufs.push_back(asio::buffer(o.bytes));
      if (o.last) break;
    }
    writing_ = true;
    const uint64_t gen = ++write_gen_;
    write_timer_.expires_after(Millis(srv_.lim.write_timeout_ms));
    write_timer_.async_wait([w = weak_from_this(), gen](beast::error_code ec) {
      auto c = w.lock();
      if (!ec && c && c->writing_ && c->write_gen_ == gen) c->close();  // the client does not read
    });
    asio::async_write(socket_, bufs, [self = shared_from_this(), n = bufs.size()](beast::error_code ec, size_t) {
      self->on_written(ec, n);
    });
  }

  void on_written(beast::error_code ec, size_t pieces) {
    writing_ = false;
    write_timer_.cancel();
    if (closed_) return;
    size_t bytes = 0;
    bool last = false, close_after = false;
    for (size_t i = 0; i < pieces && !out_.empty(); ++i) {
      bytes += out_.front().bytes.size();
      last = out_.front().last;
      close_after = out_.front().close_after;
      out_.pop_front();  // releases `keep` (a stream's response: its releaser runs)
    }
    {
      std::lock_guard lk(mu_);
      unsent_ -= std::min(unsent_, bytes);
    }
    cv_.notify_all();
    if (ec) return close();
    if (last) end_of_response(close_after);
    write_next();
  }

  void end_of_response(bool close_after) {
    if (phase_ == Phase::kClosing) return linger_and_close();  // an error answer: bytes may follow
    if (close_after || srv_.stopping.load()) {
      // Requests read ahead are dropped: linger so that they do not reset the answer.
      if (in_.size() > 0 && !peer_eof_) return linger_and_close();
      beast::error_code ec;
      socket_.shutdown(tcp::socket::shutdown_send, ec);
      return close();
    }
    new_request();
    advance();
    read_more();
  }

  // Half-closes and reads what the client still sends for a while, so that the
  // answer is not lost to a reset, then closes.
  void linger_and_close() {
    phase_ = Phase::kClosing;
    beast::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_send, ec);
    if (peer_eof_ || ec) return close();
    in_.consume(in_.size());
    arm_read_deadline(kLingerMs);
    read_more();
  }

  HttpServer::Impl& srv_;
  tcp::socket socket_;
  std::string peer_;
  int port_;
  beast::flat_buffer in_;  // read ahead, bounded: headers + one read
  HttpRequestReader reader_;
  int64_t reserved_ = 0;  // body budget held by the request being read: its buffer's capacity
  Phase phase_ = Phase::kHeader;
  bool reading_ = false, writing_ = false, peer_eof_ = false, closed_ = false;
  std::deque<Out> out_;
  asio::steady_timer read_timer_, write_timer_;
  uint64_t deadline_gen_ = 0, write_gen_ = 0;  // tell a timer's own expiry from a re-armed one's

  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> gone_{false};
  size_t unsent_ = 0;  // bytes sent by workers and not yet written (mu_)
};

// ── Server ──────────────────────────────────────────────────────────────────────

void HttpServer::Impl::accept() {
  acceptor.async_accept([this](beast::error_code ec, tcp::socket s) {
    if (!acceptor.is_open()) return;
    if (ec == asio::error::no_descriptors || ec == asio::error::no_buffer_space) {
      // Out of descriptors: try again shortly rather than spin.
      accept_retry.expires_after(Millis(100));
      accept_retry.async_wait([this](beast::error_code e) {
        if (!e) accept();
      });
      return;
    }
    if (!ec) admit(std::move(s));
    accept();
  });
}

void HttpServer::Impl::admit(tcp::socket s) {
  beast::error_code ec;
  const tcp::endpoint ep = s.remote_endpoint(ec);
  if (ec) return;
  std::string peer = ep.address().to_string();
  const int cap = lim.max_client_connections > 0 ? lim.max_client_connections : lim.max_connections;
  const auto known = per_peer.find(peer);
  if (known != per_peer.end() && known->second >= cap)
    return refuse(s, "too many connections from " + peer + " (" + std::to_string(cap) +
                         ", --max-client-connections)");
  if (int(conns.size()) >= lim.max_connections && !evict_idle())
    return refuse(s, "too many connections (" + std::to_string(lim.max_connections) + ", --max-connections)");
  s.set_option(tcp::no_delay(true), ec);
  auto c = std::make_shared<Connection>(*this, std::move(s), peer, ep.port());
  ++per_peer[peer];
  conns.push_back(c);
  c->it = std::prev(conns.end());
  c->start();
}

// Closes the oldest idle connection of the address holding the most connections.
bool HttpServer::Impl::evict_idle() {
  std::shared_ptr<Connection> victim;
  int most = 0;
  for (const auto& c : conns) {
    if (!c->idle()) continue;
    const int n = per_peer[c->peer()];
    if (n > most) {
      most = n;
      victim = c;
    }
  }
  if (!victim) return false;
  victim->close();
  return true;
}

void HttpServer::Impl::refuse(tcp::socket& s, const std::string& message) {
  HttpResponse res;
  error_response(res, 503, message, "too_many_connections");
  const std::string bytes = response_head(res, 11, false, false, res.body.size()) + res.body;
  beast::error_code ec;
  s.non_blocking(true, ec);
  s.write_some(asio::buffer(bytes), ec);  // a fresh socket's send buffer takes it
  s.shutdown(tcp::socket::shutdown_send, ec);
  s.close(ec);
}

void HttpServer::Impl::forget(Connection& c) {
  auto p = per_peer.find(c.peer());
  if (p != per_peer.end() && --p->second <= 0) per_peer.erase(p);
  conns.erase(c.it);
  maybe_finish();
}

void HttpServer::Impl::stop_on_io() {
  beast::error_code ec;
  acceptor.close(ec);
  accept_retry.cancel();
  const std::vector<std::shared_ptr<Connection>> all(conns.begin(), conns.end());
  for (const auto& c : all) c->on_stop();
  maybe_finish();
}

void HttpServer::Impl::maybe_finish() {
  if (stopping.load() && conns.empty() && handling == 0) {
    work.reset();
    io.stop();
  }
}

void HttpServer::Impl::raise_fd_limit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  const rlim_t want = rlim_t(lim.max_connections) + kReservedFds;
  if (rl.rlim_cur >= want) return;
  rl.rlim_cur = rl.rlim_max == RLIM_INFINITY ? want : std::min(want, rl.rlim_max);
  setrlimit(RLIMIT_NOFILE, &rl);
  getrlimit(RLIMIT_NOFILE, &rl);
  if (rl.rlim_cur < want) {
    const int fit = std::max(16, int(rl.rlim_cur) - kReservedFds);
    std::fprintf(stderr, "promptcache: the open-file limit (%llu) holds %d connections, not --max-connections %d\n",
                 static_cast<unsigned long long>(rl.rlim_cur), fit, lim.max_connections);
    lim.max_connections = fit;
  }
}

void HttpServer::Impl::error_response(HttpResponse& res, int status, const std::string& message,
                                      const std::string& code) {
  if (error_writer) {
    error_writer(res, status, message, code);
  } else {
    res.status = status;
    res.set_content(message + "\n", "text/plain");
  }
  add_default_headers(res);
}

void HttpServer::Impl::add_default_headers(HttpResponse& res) const {
  for (const auto& [name, value] : default_headers)
    if (!res.has_header(name)) res.headers.emplace(name, value);
}

void HttpServer::Impl::run_route(HttpRequest& req, HttpResponse& res) {
  const std::string method = req.method == "HEAD" ? "GET" : req.method;
  bool routed = false;
  for (const Route& r : routes) {
    std::smatch m;
    if (r.method != method || !std::regex_match(req.path, m, r.pattern)) continue;
    for (const auto& sub : m) req.matches.push_back(sub.str());
    routed = true;
    try {
      r.handler(req, res);
    } catch (const std::exception& e) {
      res.provider = nullptr;
      res.releaser = nullptr;
      res.headers.clear();
      error_response(res, 500, std::string("internal error: ") + e.what(), "");
    }
    break;
  }
  if (res.status == -1) res.status = routed ? 200 : 404;
  if (res.status >= 400 && error_handler) error_handler(req, res);
  add_default_headers(res);
}

void HttpServer::Impl::serve(const std::shared_ptr<Connection>& c, const std::shared_ptr<HttpRequest>& req,
                             int64_t reserved, bool keep_alive) {
  auto res = std::make_shared<HttpResponse>();
  run_route(*req, *res);
  std::string().swap(req->body);  // read for this request only: freed with its reservation
  if (reserved > 0) asio::post(io, [this, reserved] { budget.give(reserved); });
  if (logger) logger(*req, *res);
  if (stopping.load()) keep_alive = false;
  const bool head = req->method == "HEAD";
  if (res->provider && !head) {
    stream(*c, *req, res, keep_alive);
  } else {
    std::string bytes = response_head(*res, req->version, keep_alive, false, res->body.size());
    if (!head) bytes += res->body;
    c->send(std::move(bytes), true, !keep_alive, nullptr);
  }
  asio::post(io, [this] {
    --handling;
    maybe_finish();
  });
}

namespace {

// A streamed response's body: each write one chunk (HTTP/1.0: raw, closed at the end).
class StreamSink : public DataSink {
 public:
  StreamSink(Connection& c, const std::atomic<bool>& stopping, bool chunked)
      : c_(c), stopping_(stopping), chunked_(chunked) {}
  bool write(const char* data, size_t n) override {
    if (finished || stopping_.load() || !c_.wait_writable()) return false;
    if (n == 0) return true;
    c_.send(chunked_ ? chunk_frame(data, n) : std::string(data, n), false, false, nullptr);
    written += n;
    return true;
  }
  void done() override { finished = true; }
  bool is_writable() const override { return !c_.gone() && !stopping_.load(); }

  size_t written = 0;
  bool finished = false;

 private:
  Connection& c_;
  const std::atomic<bool>& stopping_;
  bool chunked_;
};

}  // namespace

void HttpServer::Impl::stream(Connection& c, const HttpRequest& req, const std::shared_ptr<HttpResponse>& res,
                              bool keep_alive) {
  const bool chunked = req.version >= 11;
  if (!chunked) keep_alive = false;
  c.send(response_head(*res, req.version, keep_alive, chunked, size_t(-1)), false, false, nullptr);
  StreamSink sink(c, stopping, chunked);
  // A client that left is found by the provider's next write failing (it cancels its
  // job and counts the disconnect); the stopping server cuts the stream here.
  while (!sink.finished && !stopping.load()) {
    bool more = false;
    try {
      more = res->provider(sink.written, sink);
    } catch (const std::exception&) {
      more = false;
    }
    if (!more) break;
  }
  res->stream_succeeded = sink.finished;
  // The response (its provider and releaser) lives until its last byte is written.
  if (sink.finished) c.send(chunked ? std::string(kLastChunk) : std::string(), true, !keep_alive, res);
  else c.send(std::string(), true, true, res);  // cut: no last chunk, the connection closes
}

// ── HttpServer ──────────────────────────────────────────────────────────────────

HttpServer::HttpServer(const HttpLimits& limits) : impl_(std::make_unique<Impl>(limits)) {}

HttpServer::~HttpServer() { stop(); }

void HttpServer::route(const std::string& method, const std::string& pattern, Handler handler) {
  impl_->routes.push_back({method, std::regex(pattern), std::move(handler)});
}

void HttpServer::set_error_handler(Handler handler) { impl_->error_handler = std::move(handler); }
void HttpServer::set_error_writer(ErrorWriter writer) { impl_->error_writer = std::move(writer); }
void HttpServer::set_logger(Logger logger) { impl_->logger = std::move(logger); }
void HttpServer::set_default_headers(HttpHeaders headers) { impl_->default_headers = std::move(headers); }

int HttpServer::bind(const std::string& host, int port) {
  Impl& s = *impl_;
  s.raise_fd_limit();
  const std::string where = host + ":" + std::to_string(port);
  beast::error_code ec;
  tcp::resolver resolver(s.io);
  const auto found = resolver.resolve(host, std::to_string(port),
                                      tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || found.empty()) throw Error("cannot listen on " + where + ": cannot resolve '" + host + "'");
  const tcp::endpoint ep = *found.begin();
  s.acceptor.open(ep.protocol(), ec);
  // SO_REUSEADDR only allows a restart while old connections linger in TIME_WAIT;
  // unlike SO_REUSEPORT it never lets two servers share the port.
  if (!ec) s.acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) s.acceptor.bind(ep, ec);
  if (!ec) s.acceptor.listen(kListenBacklog, ec);
  if (ec) {
    beast::error_code ignored;
    s.acceptor.close(ignored);
    if (ec == asio::error::address_in_use)
      throw Error("cannot listen on " + where + ": port " + std::to_string(port) +
                  " is already in use (another server listens there)");
    throw Error("cannot listen on " + where + ": " + ec.message());
  }
  return s.acceptor.local_endpoint().port();
}

bool HttpServer::listen() {
  Impl& s = *impl_;
  if (!s.acceptor.is_open()) return false;
  s.work.emplace(asio::make_work_guard(s.io));
  s.accept();
  if (s.stopping.load()) asio::post(s.io, [&s] { s.stop_on_io(); });
  s.io.run();
  return true;
}

void HttpServer::stop() {
  Impl& s = *impl_;
  if (s.stopping.exchange(true)) return;
  asio::post(s.io, [&s] { s.stop_on_io(); });
}

}  // namespace pc::server
