// Raw sockets to a test server, for requests no HTTP client library would send:
// malformed framing, slow or partial bodies, many connections from one address.
#pragma once
#include <sys/types.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

namespace pc::test {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t);

// A TCP connection to the server from loopback address `source` (127.0.0.0/8 is all
// local, so each address is a different client to the server); -1 on failure.
int connect_from(int port, const char* source);

bool send_all(int fd, const char* data, size_t n);
bool send_all(int fd, const std::string& s);

struct RawResponse {
  int status = 0;  // 0: none within the time
  std::string head;
  std::string body;
  bool closed = false;  // the server closed the connection
  nlohmann::json json_body() const { return nlohmann::json::parse(body, nullptr, false); }
};

// Reads one response (Content-Length bodies) from `fd`, keeping bytes that follow it
// in `rest` for the next call; gives up after `timeout`.
RawResponse read_response(int fd, std::string& rest, std::chrono::milliseconds timeout);
RawResponse read_response(int fd, std::chrono::milliseconds timeout);

// True when the server closed `fd` (EOF or reset) within `timeout`.
bool closed_by_server(int fd, std::chrono::milliseconds timeout);

// The server's peak resident memory (VmHWM) and current (VmRSS), bytes; -1 if unknown.
int64_t peak_rss(pid_t pid);
int64_t current_rss(pid_t pid);

// A POST's request line and headers (JSON content type) with `extra_headers`, through
// the blank line.
std::string post_head(const std::string& path, const std::string& extra_headers);

}  // namespace pc::test
