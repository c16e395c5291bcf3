// Red-team findings against the HTTP transport, each replayed against a real
// `promptcache serve` process on loopback: oversized chunked trailers, chunk sizes
// past 2^63, body-memory slowloris, and inconsistent message framing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <sys/socket.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "raw_client.h"
#include "server_fixture.h"

namespace pc::test {
namespace {

using namespace std::chrono_literals;

const std::string kModel = "models/stories260K.gguf";

// Sends `request` on a fresh connection and reads the one answer.
RawResponse exchange(int port, const std::string& request, std::chrono::milliseconds timeout = 5s) {
  const int fd = connect_from(port, "127.0.0.1");
  if (fd < 0 || !send_all(fd, request)) {
    if (fd >= 0) close(fd);
    return {};
  }
  RawResponse r = read_response(fd, timeout);
  close(fd);
  return r;
}

// The server still runs and answers /health.
void expect_alive(ServeProcess& srv) {
  EXPECT_EQ(srv.wait_exit(0.2), -1) << "the server exited";
  auto c = srv.client();
  EXPECT_EQ(get(c, "/health").status, 200);
}

class HttpRedTeam : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    srv = new ServeProcess({"-m", shared_path(kModel), "--kv-memory", "32MiB", "--max-body-size", "1MiB"});
  }
  static void TearDownTestSuite() {
    delete srv;
    srv = nullptr;
  }
  static ServeProcess* srv;
};
ServeProcess* HttpRedTeam::srv = nullptr;

// A chunked body whose trailer section is larger than the header limit (64 KiB):
// a 431, not an exception out of the event loop.
std::string huge_trailer_request(const std::string& method, const std::string& path) {
  std::string r = method + " " + path + " HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{\r\n0\r\nX-T: ";
  r.append(70'000, 'a');
  return r + "\r\n\r\n";
}

TEST_F(HttpRedTeam, TrailerOverTheHeaderLimitIs431AndTheServerLives) {
  for (const auto& [method, path] : std::vector<std::pair<std::string, std::string>>{
           {"POST", "/v1/completions"}, {"GET", "/health"}}) {
    const RawResponse r = exchange(srv->port(), huge_trailer_request(method, path));
    EXPECT_EQ(r.status, 431) << method << " " << path << ": " << r.body;
    EXPECT_EQ(r.json_body()["error"]["code"], "headers_too_large") << r.body;
    expect_alive(*srv);
  }
  // Many trailer fields, each small, adding up past the limit: the same.
  std::string many = "POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{\r\n0\r\n";
  for (int i = 0; i < 5000; ++i) many += "X-T" + std::to_string(i) + ": 0123456789\r\n";
  const RawResponse m = exchange(srv->port(), many + "\r\n");
  EXPECT_EQ(m.status, 431) << m.body;
  expect_alive(*srv);
}


TEST_F(HttpRedTeam, ChunkSizesOf2To63AndMoreAre413AtOnce) {
  for (const std::string size : {"ffffffffffffffff", "8000000000000000", "7fffffffffffffff"}) {
    const int fd = connect_from(srv->port(), "127.0.0.1");
    ASSERT_GE(fd, 0);
    const auto t0 = Clock::now();
    // Some bytes of the chunk follow: the server must not wait for (or buffer) them.
    ASSERT_TRUE(send_all(fd, "POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + size +
                                 "\r\n" + std::string(100'000, 'a')));
    const RawResponse r = read_response(fd, 5s);
    EXPECT_EQ(r.status, 413) << size << ": " << r.body;
    EXPECT_EQ(r.json_body()["error"]["code"], "body_too_large");
    EXPECT_LT(seconds_since(t0), 1.0);
    close(fd);
  }
  // Chunks each under --max-body-size (1 MiB) whose sizes add up past it (and past
  // 2^64 in unsigned arithmetic).
  const RawResponse sum = exchange(srv->port(), "POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                                                "80000\r\n" + std::string(0x80000, 'a') + "\r\n80001\r\n");
  EXPECT_EQ(sum.status, 413) << sum.body;
  expect_alive(*srv);
}

// The last chunk's line in the same packet as the headers, the final CRLF later:
// Beast asserted (an abort) when shown the same bytes twice.
TEST_F(HttpRedTeam, LastChunkWithoutItsFinalLineWaitsAndTheServerLives) {
  const int fd = connect_from(srv->port(), "127.0.0.1");
  ASSERT_GE(fd, 0);
  const std::string body = R"({"content": "hi"})";
  char size[16];
  std::snprintf(size, sizeof size, "%zx", body.size());
  ASSERT_TRUE(send_all(fd, "POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
                               std::string(size) + "\r\n" + body + "\r\n0\r\n"));
  std::this_thread::sleep_for(300ms);
  expect_alive(*srv);
  ASSERT_TRUE(send_all(fd, "\r\n"));
  const RawResponse r = read_response(fd, 5s);
  EXPECT_EQ(r.status, 200) << r.body;
  close(fd);
}

TEST_F(HttpRedTeam, InconsistentFramingIs400NamingTheHeader) {
  struct Case {
    std::string headers, code, named;
  };
  const std::vector<Case> cases = {
      {"Transfer-Encoding: gzip, chunked\r\n", "invalid_transfer_encoding", "Transfer-Encoding"},
      {"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", "invalid_transfer_encoding",
       "Transfer-Encoding"},
      {"Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n", "invalid_transfer_encoding", "Transfer-Encoding"},
      {"X-Folded: a\r\n b\r\nTransfer-Encoding: chunked\r\n", "invalid_header", "obs-fold"},
      {"Content-Length: 32, 32\r\n", "invalid_content_length", "Content-Length"},
      {"Content-Length: 32\r\nContent-Length: 32\r\n", "invalid_content_length", "Content-Length"},
      {"Content-Length: 32\r\nTransfer-Encoding: chunked\r\n", "invalid_framing", "Transfer-Encoding"},
      {"Transfer-Encoding: chunked\r\nContent-Length: 32\r\n", "invalid_framing", "Content-Length"},
  };
  // A valid body either way, so that only the framing can be refused.
  const std::string body = R"({"content": "Once upon a time, there was a"})";
  for (const Case& c : cases) {
    const RawResponse r = exchange(srv->port(), "POST /tokenize HTTP/1.1\r\nHost: x\r\n" + c.headers + "\r\n" + body);
    EXPECT_EQ(r.status, 400) << c.headers << r.body;
    EXPECT_EQ(r.json_body()["error"]["code"], c.code) << c.headers << r.body;
    EXPECT_NE(r.body.find(c.named), std::string::npos) << r.body;
  }
  expect_alive(*srv);
}

// Sends `n` POST headers declaring `length` bytes, from 127.0.0.9; the descriptors.
std::vector<int> declare_bodies(int port, int n, int64_t length) {
  std::vector<int> fds;
  for (int i = 0; i < n; ++i) {
    const int fd = connect_from(port, "127.0.0.9");
    if (fd < 0 || !send_all(fd, post_head("/tokenize", "Content-Length: " + std::to_string(length) + "\r\n"))) break;
    fds.push_back(fd);
  }
  return fds;
}

// Seconds a small /tokenize takes, from a fresh connection (10 s: no answer).
double small_request_seconds(int port) {
  const std::string body = R"({"content": "Once upon a"})";
  const auto t0 = Clock::now();
  const RawResponse r =
      exchange(port, post_head("/tokenize", "Content-Length: " + std::to_string(body.size()) + "\r\n") + body, 10s);
  return r.status == 200 ? seconds_since(t0) : 10.0;
}

TEST(HttpBodyMemory, SmallRequestsPassDeclaredAndSlowBigBodies) {
  ServeProcess srv({"-m", shared_path(kModel), "--kv-memory", "32MiB", "--max-body-size", "64MiB",
                    "--max-body-memory", "64MiB", "--body-timeout", "20s"});
  const int64_t rss0 = current_rss(srv.pid());
  // 16 clients declare 30 MB bodies (480 MB, past the 64 MiB budget) and send nothing.
  std::vector<int> declared = declare_bodies(srv.port(), 16, 30'000'000);
  ASSERT_EQ(declared.size(), 16u);
  std::this_thread::sleep_for(300ms);  // their headers are read
  const double quiet = small_request_seconds(srv.port());
  EXPECT_LT(quiet, 1.0) << "a small request behind 16 declared 30 MB bodies";
  // 16 more send big bodies as fast as the server takes them while the small
  // request comes; together they want far more than the budget.
  std::vector<int> senders = declare_bodies(srv.port(), 16, 30'000'000);
  ASSERT_EQ(senders.size(), 16u);
  std::atomic<bool> run{true};
  std::vector<std::thread> threads;
  for (int fd : senders) {
    const timeval limit{1, 0};  // a send the server does not take for 1 s gives up
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
    threads.emplace_back([fd, &run] {
      const std::string piece(64 << 10, 'a');
      for (int sent = 0; run.load() && sent < 400; ++sent)
        if (!send_all(fd, piece)) break;
    });
  }
  std::this_thread::sleep_for(1500ms);
  const double busy = small_request_seconds(srv.port());
  EXPECT_LT(busy, 1.0) << "a small request while 16 big bodies fill the budget";
  run.store(false);
  for (std::thread& t : threads) t.join();
  const int64_t peak = peak_rss(srv.pid());
  std::printf("small request: %.3f s behind 16 declared 30 MB bodies, %.3f s beside 16 big uploads; "
              "server RSS %lld MiB at start, peak %lld MiB\n",
              quiet, busy, static_cast<long long>(rss0 >> 20), static_cast<long long>(peak >> 20));
  // The budget (64 MiB) and the read buffers (128 KiB a connection) bound what the
  // bodies add.
  EXPECT_LT(peak - rss0, int64_t(64 + 16) << 20);
  for (int fd : declared) close(fd);
  for (int fd : senders) close(fd);
  expect_alive(srv);
}

}  // namespace
}  // namespace pc::test
