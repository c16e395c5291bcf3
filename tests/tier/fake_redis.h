// A hostile "Redis" for tests: a TCP server on a loopback port that answers the first
// bytes of every connection with a scripted reply (a huge array or bulk length, deep
// nesting, a line without end, a trickle of bytes), never a proper one. Header-only, so
// that the tier and server test binaries both use it.
//
// Per connection: wait for a request, send `head`, then `filler` repeatedly until
// stream_bytes are sent, then (trickle_ms > 0) one byte of `filler` every trickle_ms
// until trickle_seconds passed; then hold the connection open, silent. Writes stop as
// soon as the client hangs up (its reader gave up), so a client that stops reading
// early costs the fake nothing more.
#pragma once
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace pc::test {

struct HostileScript {
  std::string head;
  std::string filler;
  size_t stream_bytes = 0;
  int trickle_ms = 0;
  double trickle_seconds = 0;
};

class FakeRedis {
 public:
  explicit FakeRedis(HostileScript script) : script_(std::move(script)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    const int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t len = sizeof a;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    ::listen(listen_fd_, 64);
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~FakeRedis() {
    stop_ = true;
    acceptor_.join();
    std::lock_guard lk(mu_);
    for (std::thread& t : conns_) t.join();
    ::close(listen_fd_);
  }
  int port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_) + "/0"; }
  int connections() const { return accepted_.load(); }

 private:
  bool wait(int fd, short events, int ms) {
    pollfd p{fd, events, 0};
    return ::poll(&p, 1, ms) > 0 && (p.revents & events);
  }
  void accept_loop() {
    while (!stop_) {
      if (!wait(listen_fd_, POLLIN, 50)) continue;
      const int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) continue;
      ++accepted_;
      std::lock_guard lk(mu_);
      conns_.emplace_back([this, fd] {
        serve(fd);
        ::close(fd);
      });
    }
  }
  bool send_all(int fd, const char* p, size_t n) {
    while (n > 0 && !stop_) {
      if (!wait(fd, POLLOUT, 50)) continue;
      const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) continue;
      if (k <= 0) return false;  // the client hung up
      p += k;
      n -= size_t(k);
    }
    return !stop_;
  }
  void serve(int fd) {
    char buf[4096];
    while (!stop_ && !wait(fd, POLLIN, 50)) {
    }
    if (stop_ || ::recv(fd, buf, sizeof buf, 0) <= 0) return;
    if (!send_all(fd, script_.head.data(), script_.head.size())) return;
    for (size_t sent = 0; sent < script_.stream_bytes; sent += script_.filler.size())
      if (!send_all(fd, script_.filler.data(), script_.filler.size())) return;
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(script_.trickle_seconds);
    for (size_t i = 0; script_.trickle_ms > 0 && std::chrono::steady_clock::now() < end && !stop_; ++i) {
      if (!send_all(fd, &script_.filler[i % script_.filler.size()], 1)) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(script_.trickle_ms));
    }
    while (!stop_) {  // silent until the client goes
      if (wait(fd, POLLIN, 50) && ::recv(fd, buf, sizeof buf, 0) <= 0) return;
    }
  }

  HostileScript script_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<std::thread> conns_;
};

// The hostile replies the tests send (stream_bytes of filler after the head).
inline std::vector<std::pair<std::string, HostileScript>> hostile_scripts(size_t stream_bytes) {
  return {
      {"huge array", {"*999999999\r\n", ":1\r\n", stream_bytes}},
      {"huge bulk length", {"$9999999999\r\n", std::string(4096, 'x'), stream_bytes}},
      {"deep nesting", {"", "*1\r\n", stream_bytes}},
      {"line without end", {"+", std::string(4096, 'y'), stream_bytes}},
      {"bulk beyond the expected size", {"$100000000\r\n", std::string(4096, 'z'), stream_bytes}},
      {"trickle of a huge bulk", {"$1000000\r\n", "t", 0, 20, 6.0}},
  };
}

// Peak resident memory (kB) of a process since reset_peak_rss (VmHWM).
inline long peak_rss_kb(const std::string& pid = "self") {
  std::ifstream in("/proc/" + pid + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}
inline long rss_kb(const std::string& pid = "self") {
  std::ifstream in("/proc/" + pid + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}
// Resets VmHWM to the current RSS (Linux: "5" to clear_refs).
inline bool reset_peak_rss(const std::string& pid = "self") {
  std::ofstream out("/proc/" + pid + "/clear_refs");
  out << "5";
  out.flush();
  return bool(out);
}

}  // namespace pc::test
