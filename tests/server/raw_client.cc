#include "raw_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

namespace pc::test {

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

int connect_from(int port, const char* source) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in src{};
  src.sin_family = AF_INET;
  inet_pton(AF_INET, source, &src.sin_addr);
  sockaddr_in dst{};
  dst.sin_family = AF_INET;
  dst.sin_port = htons(uint16_t(port));
  dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof src) != 0 ||
      connect(fd, reinterpret_cast<sockaddr*>(&dst), sizeof dst) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool send_all(int fd, const char* data, size_t n) {
  while (n > 0) {
    const ssize_t w = send(fd, data, n, MSG_NOSIGNAL);
    if (w <= 0) return false;
    data += w;
    n -= size_t(w);
  }
  return true;
}
bool send_all(int fd, const std::string& s) { return send_all(fd, s.data(), s.size()); }

RawResponse read_response(int fd, std::string& rest, std::chrono::milliseconds timeout) {
  RawResponse r;
  const auto until = Clock::now() + timeout;
  std::string& buf = rest;
  size_t need = std::string::npos;
  for (;;) {
    const size_t end = buf.find("\r\n\r\n");
    if (end != std::string::npos && need == std::string::npos) {
      r.head = buf.substr(0, end + 4);
      r.status = std::atoi(r.head.c_str() + 9);
      const size_t cl = r.head.find("Content-Length: ");
      need = end + 4 + (cl == std::string::npos ? 0 : size_t(std::atoll(r.head.c_str() + cl + 16)));
    }
    if (need != std::string::npos && buf.size() >= need) {
      r.body = buf.substr(r.head.size(), need - r.head.size());
      buf.erase(0, need);
      return r;
    }
    const int left = int(std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count());
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || poll(&p, 1, left) <= 0) {
      if (need == std::string::npos) r.status = 0;
      return r;
    }
    char chunk[65536];
    const ssize_t n = recv(fd, chunk, sizeof chunk, 0);
    if (n <= 0) {
      r.closed = true;
      if (need == std::string::npos) r.status = 0;
      return r;
    }
    buf.append(chunk, size_t(n));
  }
}

RawResponse read_response(int fd, std::chrono::milliseconds timeout) {
  std::string rest;
  return read_response(fd, rest, timeout);
}

bool closed_by_server(int fd, std::chrono::milliseconds timeout) {
  const auto until = Clock::now() + timeout;
  for (;;) {
    const int left = int(std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count());
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || poll(&p, 1, left) <= 0) return false;
    char c[4096];
    if (recv(fd, c, sizeof c, 0) <= 0) return true;
  }
}

namespace {
int64_t status_kib(pid_t pid, const std::string& key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key, 0) == 0) return std::atoll(line.c_str() + key.size()) * 1024;
  return -1;
}
}  // namespace

int64_t peak_rss(pid_t pid) { return status_kib(pid, "VmHWM:"); }
int64_t current_rss(pid_t pid) { return status_kib(pid, "VmRSS:"); }

std::string post_head(const std::string& path, const std::string& extra_headers) {
  return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + extra_headers + "\r\n";
}

}  // namespace pc::test
