#include "server/connection.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>
#include <string>

namespace pc::server {

namespace {

// Address and port of a socket end as httplib reports them.
bool endpoint(const sockaddr_storage& a, std::string* host, int* port) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&a);
    inet_ntop(AF_INET, &v4->sin_addr, buf, sizeof buf);
    *port = ntohs(v4->sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a);
    inet_ntop(AF_INET6, &v6->sin6_addr, buf, sizeof buf);
    *port = ntohs(v6->sin6_port);
  } else {
    return false;
  }
  *host = buf;
  return true;
}

bool is_connection(int fd, const HttpRequest& req) {
  sockaddr_storage local{}, peer{};
  socklen_t ll = sizeof local, pl = sizeof peer;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &ll) != 0) return false;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &pl) != 0) return false;
  std::string lh, ph;
  int lp = 0, pp = 0;
  return endpoint(local, &lh, &lp) && endpoint(peer, &ph, &pp) && lp == req.local_port &&
         pp == req.remote_port && ph == req.remote_addr && lh == req.local_addr;
}

}  // namespace

ConnectionWatch::ConnectionWatch(const HttpRequest& req) {
  if (req.remote_port <= 0) return;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return;
  while (const dirent* e = readdir(d)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == dirfd(d)) continue;
    if (is_connection(int(fd), req)) {
      fd_ = int(fd);
      break;
    }
  }
  closedir(d);
}

bool ConnectionWatch::closed() const {
  if (fd_ < 0) return false;
  char c;
  const ssize_t n = recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return false;   // more bytes from the client: still there
  if (n == 0) return true;   // orderly close
  return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;  // reset
}

}  // namespace pc::server
