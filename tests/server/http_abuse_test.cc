// Red-team findings against the HTTP transport, each replayed against a real
// `promptcache serve` process on loopback: oversized chunked trailers, chunk sizes
// past 2^63, body-memory slowloris, and inconsistent message framing.
#include <gtest/gtest.h>
#include <unistd.h>

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

class HttpAbuse : public ::testing::Test {
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
ServeProcess* HttpAbuse::srv = nullptr;

// A chunked body whose trailer section is larger than the header limit (64 KiB):
// a 431, not an exception out of the event loop.
std::string huge_trailer_request(const std::string& method, const std::string& path) {
  std::string r = method + " " + path + " HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{\r\n0\r\nX-T: ";
  r.append(70'000, 'a');
  return r + "\r\n\r\n";
}

TEST_F(HttpAbuse, TrailerOverTheHeaderLimitIs431AndTheServerLives) {
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

}  // namespace
}  // namespace pc::test
