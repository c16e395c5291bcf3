// The HTTP layer against clients that are hostile or careless: idle and slowloris
// connections, absurd or missing Content-Length, huge bodies, pipelining, a busy
// port and one address holding many connections — against a real `promptcache
// serve` process on loopback, each test bounded in time.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "raw_client.h"
#include "server_fixture.h"
#include "test_util.h"

namespace pc::test {
namespace {

using namespace std::chrono_literals;

const std::string kModel = "models/stories260K.gguf";

// The test opens more sockets than the usual soft limit of 1,024.
void raise_fd_limit(rlim_t want) {
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  if (rl.rlim_cur < want) {
    rl.rlim_cur = std::min(want, rl.rlim_max);
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

// /health every 100 ms from its own address while the test runs; every answer's time.
struct HealthProbe {
  explicit HealthProbe(int port) : thread([this, port] {
    httplib::Client c("127.0.0.1", port);
    c.set_connection_timeout(5);
    c.set_read_timeout(5);
    while (!stop.load()) {
      const auto t0 = Clock::now();
      auto r = c.Get("/health");
      const double s = seconds_since(t0);
      {
        std::lock_guard lk(mu);
        ++calls;
        if (!r || r->status != 200) ++failures;
        worst = std::max(worst, s);
      }
      std::this_thread::sleep_for(100ms);
    }
  }) {}
  ~HealthProbe() { finish(); }
  void finish() {
    stop.store(true);
    if (thread.joinable()) thread.join();
  }
  std::atomic<bool> stop{false};
  std::mutex mu;
  int calls = 0, failures = 0;
  double worst = 0;
  std::thread thread;
};

TEST(HttpAbuse, HealthAnswersWithinASecondUnderIdleSlowAndBadClients) {
  raise_fd_limit(4096);
  ServeProcess srv({"-m", shared_path(kModel), "--kv-memory", "32MiB", "--header-timeout", "4s",
                    "--body-timeout", "3s"});
  HealthProbe probe(srv.port());
  const auto t0 = Clock::now();
  // 1,000 connections that never send a byte, from one address.
  std::vector<int> idle;
  for (int i = 0; i < 1000; ++i) {
    const int fd = connect_from(srv.port(), "127.0.0.2");
    ASSERT_GE(fd, 0) << "connection " << i;
    idle.push_back(fd);
  }
  // 24 slowloris connections: a request line, then one header line a second.
  std::vector<int> slow;
  for (int i = 0; i < 24; ++i) {
    const int fd = connect_from(srv.port(), "127.0.0.3");
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(send_all(fd, "POST /v1/completions HTTP/1.1\r\nHost: x\r\n"));
    slow.push_back(fd);
  }
  std::atomic<bool> trickle{true};
  std::thread trickler([&] {
    while (trickle.load()) {
      for (int fd : slow) send_all(fd, "X-Slow: 1\r\n");
      std::this_thread::sleep_for(1s);
    }
  });
  // Bodies whose length is absurd, negative, missing, or promised and never sent.
  struct Bad {
    std::string request;
    int status;
    std::string code;
  };
  const std::vector<Bad> bad = {
      {post_head("/v1/completions", "Content-Length: -5\r\n"), 400, "invalid_content_length"},
      {post_head("/v1/completions", "Content-Length: 99999999999999999999999\r\n"), 400, "invalid_content_length"},
      {post_head("/v1/completions", "Content-Length: 1000000000000\r\n"), 413, "body_too_large"},
      {post_head("/v1/completions", "Content-Length: 5\r\nContent-Length: 7\r\n"), 400, "invalid_content_length"},
      {post_head("/v1/completions", "") + "{\"prompt\": \"hi\"}", 411, "length_required"},
      {post_head("/v1/completions", "Content-Length: 100\r\n") + "{\"prompt\"", 408, "body_timeout"},
  };
  std::vector<std::thread> bad_clients;
  std::vector<std::string> bad_failures(bad.size() * 4);
  for (size_t i = 0; i < bad.size() * 4; ++i) {
    bad_clients.emplace_back([&, i] {
      const Bad& b = bad[i % bad.size()];
      const int fd = connect_from(srv.port(), "127.0.0.4");
      if (fd < 0 || !send_all(fd, b.request)) {
        bad_failures[i] = "could not send";
        return;
      }
      const auto sent = Clock::now();
      const RawResponse r = read_response(fd, 10s);
      // Answered at once, except the body that never comes: at its 3 s deadline.
      const double limit = b.status == 408 ? 5.0 : 1.0;
      if (r.status != b.status || r.json_body()["error"]["code"] != b.code || seconds_since(sent) > limit)
        bad_failures[i] = std::to_string(r.status) + " after " + std::to_string(seconds_since(sent)) + " s: " + r.body;
      close(fd);
    });
  }
  for (std::thread& t : bad_clients) t.join();
  for (size_t i = 0; i < bad_failures.size(); ++i)
    EXPECT_EQ(bad_failures[i], "") << bad[i % bad.size()].request;
  // The slowloris connections never finish their headers: 408 at the header deadline.
  int timed_out = 0;
  for (int fd : slow) {
    const RawResponse r = read_response(fd, 8s);
    timed_out += r.status == 408 && r.json_body()["error"]["code"] == "header_timeout";
  }
  EXPECT_EQ(timed_out, 24);
  EXPECT_LT(seconds_since(t0), 9.0);
  trickle.store(false);
  trickler.join();
  // The idle ones closed at the same deadline.
  int idle_closed = 0;
  for (int fd : idle) idle_closed += closed_by_server(fd, 3s);
  EXPECT_EQ(idle_closed, 1000);
  probe.finish();
  EXPECT_GE(probe.calls, 30);
  EXPECT_EQ(probe.failures, 0);
  EXPECT_LT(probe.worst, 1.0) << "slowest /health: " << probe.worst << " s";
  for (int fd : idle) close(fd);
  for (int fd : slow) close(fd);
}

TEST(HttpAbuse, SixteenHugePromptsAtOnceAreCleanRejections) {
  // A busy machine parses the 960 MB of JSON slowly: bodies may wait their turn longer
  // than the default --body-timeout.
  ServeProcess srv({"-m", shared_path(kModel), "--kv-memory", "32MiB", "--max-body-size", "128MiB",
                    "--body-timeout", "120s"});
  // 60 MB of prompt: far more tokens than the context, told by its byte length.
  std::string body = "{\"prompt\": \"";
  body.append(60'000'000, 'a');
  body += "\", \"max_tokens\": 4}";
  const std::string head = post_head("/v1/completions", "Content-Length: " + std::to_string(body.size()) + "\r\n");
  std::vector<std::thread> clients;
  std::vector<std::string> failures(16);
  const auto t0 = Clock::now();
  for (int i = 0; i < 16; ++i) {
    clients.emplace_back([&, i] {
      const int fd = connect_from(srv.port(), "127.0.0.5");
      if (fd < 0 || !send_all(fd, head) || !send_all(fd, body)) {
        failures[i] = "could not send";
        return;
      }
      const RawResponse r = read_response(fd, 120s);
      if (r.status != 400 || r.json_body()["error"]["code"] != "context_length_exceeded")
        failures[i] = std::to_string(r.status) + ": " + r.body.substr(0, 300);
      close(fd);
    });
  }
  for (std::thread& t : clients) t.join();
  for (const std::string& f : failures) EXPECT_EQ(f, "");
  EXPECT_LT(seconds_since(t0), 120.0);
  auto c = srv.client();
  EXPECT_EQ(get(c, "/health").status, 200);
  // The bodies are read a few at a time (--max-body-memory, 256 MiB by default).
  const int64_t rss = peak_rss(srv.pid());
  EXPECT_GT(rss, 0);
  EXPECT_LT(rss, int64_t(2) << 30) << "peak RSS " << rss / (1 << 20) << " MiB";
  std::printf("16 x 60 MB prompts: %.1f s, server peak RSS %lld MiB\n", seconds_since(t0),
              static_cast<long long>(rss >> 20));
}

class Http : public ::testing::Test {
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
ServeProcess* Http::srv = nullptr;

TEST_F(Http, PipelinedRequestsAreAnsweredInOrder) {
  const int fd = connect_from(srv->port(), "127.0.0.1");
  ASSERT_GE(fd, 0);
  const std::string tok = R"({"content": "Once upon a time"})";
  ASSERT_TRUE(send_all(fd, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
                           "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n" +
                               post_head("/tokenize", "Content-Length: " + std::to_string(tok.size()) + "\r\n") + tok +
                               "GET /v1/nothing HTTP/1.1\r\nHost: x\r\n\r\n"
                               "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  std::string rest;
  const RawResponse a = read_response(fd, rest, 10s);
  const RawResponse b = read_response(fd, rest, 10s);
  const RawResponse t = read_response(fd, rest, 10s);
  const RawResponse n = read_response(fd, rest, 10s);
  const RawResponse h = read_response(fd, rest, 10s);
  EXPECT_EQ(a.status, 200);
  EXPECT_EQ(a.json_body()["status"], "ok");
  EXPECT_EQ(b.status, 200);
  EXPECT_EQ(b.json_body()["object"], "list");
  EXPECT_EQ(t.status, 200);
  EXPECT_TRUE(t.json_body()["tokens"].is_array()) << t.body;
  EXPECT_EQ(n.status, 404);
  EXPECT_EQ(n.json_body()["error"]["code"], "unknown_route");
  EXPECT_EQ(h.status, 200);
  EXPECT_NE(h.head.find("Connection: close"), std::string::npos);
  EXPECT_TRUE(closed_by_server(fd, 5s));
  close(fd);
}

TEST_F(Http, SchemaPutWithCurlsFormContentTypeIsAccepted) {
  std::string schema = "<schema name=\"big\">\n  <system>You tell short stories.</system>\n";
  for (int i = 0; schema.size() < 20'000; ++i)
    schema += "  <module name=\"m" + std::to_string(i) +
              "\">Lily had a red ball and a big dog named Max. They played in the park every day, and Max "
              "always brought the ball back.</module>\n";
  schema += "</schema>";
  ASSERT_GT(schema.size(), 20'000u);
  auto c = srv->client();
  auto r = c.Put("/v1/schemas/big", schema, "application/x-www-form-urlencoded");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 201) << r->body;
  Reply g = get(c, "/v1/schemas/big");
  EXPECT_EQ(g.status, 200);
  EXPECT_EQ(g.body["source"], schema);
}

TEST_F(Http, BodyLengthsAreChecked) {
  auto c = srv->client();
  // Chunked bodies arrive whole.
  const int fd = connect_from(srv->port(), "127.0.0.1");
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(send_all(fd, "POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                           "c\r\n{\"content\": \r\n8\r\n\"Once up\r\n9\r\non a time\r\n2\r\n\"}\r\n0\r\n\r\n"));
  std::string rest;
  const RawResponse ok = read_response(fd, rest, 10s);
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(ok.json_body()["tokens"], post(c, "/tokenize", {{"content", "Once upon a time"}}).body["tokens"]);
  // The connection is kept: a bad chunk size next is a 400 that closes it.
  ASSERT_TRUE(send_all(fd, "POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"));
  const RawResponse bad = read_response(fd, rest, 10s);
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_EQ(bad.json_body()["error"]["code"], "invalid_chunked_body");
  EXPECT_TRUE(closed_by_server(fd, 5s));
  close(fd);
  // Over --max-body-size (1 MiB here): 413 naming the limit, before the body is sent.
  const int big = connect_from(srv->port(), "127.0.0.1");
  ASSERT_TRUE(send_all(big, post_head("/v1/completions", "Content-Length: 2000000\r\n")));
  const RawResponse too = read_response(big, 5s);
  EXPECT_EQ(too.status, 413);
  EXPECT_EQ(too.json_body()["error"]["code"], "body_too_large");
  EXPECT_NE(too.json_body()["error"]["message"].get<std::string>().find("--max-body-size"), std::string::npos);
  close(big);
  // A chunked body that grows past it: 413 too.
  const int grow = connect_from(srv->port(), "127.0.0.1");
  ASSERT_TRUE(send_all(grow, "POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n200000\r\n"));
  EXPECT_EQ(read_response(grow, 5s).status, 413);
  close(grow);
  // Expect: 100-continue gets its interim answer, then the real one.
  const int cont = connect_from(srv->port(), "127.0.0.1");
  const std::string body = R"({"content": "hi"})";
  ASSERT_TRUE(send_all(cont, post_head("/tokenize", "Expect: 100-continue\r\nContent-Length: " +
                                                        std::to_string(body.size()) + "\r\n")));
  std::string crest;
  const RawResponse interim = read_response(cont, crest, 5s);
  EXPECT_EQ(interim.status, 100);
  ASSERT_TRUE(send_all(cont, body));
  EXPECT_EQ(read_response(cont, crest, 5s).status, 200);
  close(cont);
}

TEST_F(Http, ASecondServerOnTheSamePortExitsWithTheError) {
  const std::string out = temp_dir() + "/second_serve.txt";
  const std::string port = std::to_string(srv->port());
  const std::string cmd = promptcache_path() + " serve -m " + shared_path(kModel) + " --kv-memory 32MiB --port " +
                          port + " > " + out + " 2>&1";
  const int rc = std::system(cmd.c_str());
  EXPECT_NE(rc, 0);
  const std::string text = read_file(out);
  EXPECT_NE(text.find("port " + port + " is already in use"), std::string::npos) << text;
  auto c = srv->client();
  EXPECT_EQ(get(c, "/health").status, 200);
}

TEST(HttpFairness, OneAddressCannotTakeEveryConnection) {
  ServeProcess srv({"-m", shared_path(kModel), "--kv-memory", "32MiB", "--max-connections", "64",
                    "--max-client-connections", "32"});
  // One address gets its 32; more from it are refused with a 503 naming the flag.
  std::vector<int> a;
  for (int i = 0; i < 32; ++i) a.push_back(connect_from(srv.port(), "127.0.0.2"));
  std::this_thread::sleep_for(200ms);  // accepted, in order
  const int extra = connect_from(srv.port(), "127.0.0.2");
  const RawResponse refused = read_response(extra, 5s);
  EXPECT_EQ(refused.status, 503);
  EXPECT_EQ(refused.json_body()["error"]["code"], "too_many_connections");
  EXPECT_NE(refused.body.find("--max-client-connections"), std::string::npos);
  close(extra);
  // A second address fills the rest.
  std::vector<int> b;
  for (int i = 0; i < 32; ++i) b.push_back(connect_from(srv.port(), "127.0.0.3"));
  std::this_thread::sleep_for(200ms);
  // A third client is still served: an idle connection of the first address gives way.
  auto c = srv.client();
  EXPECT_EQ(get(c, "/health").status, 200);
  int a_closed = 0, b_closed = 0;
  for (int fd : a) a_closed += closed_by_server(fd, 100ms);
  for (int fd : b) b_closed += closed_by_server(fd, 100ms);
  EXPECT_EQ(a_closed, 1);
  EXPECT_EQ(b_closed, 0);
  for (int fd : a) close(fd);
  for (int fd : b) close(fd);
}

}  // namespace
}  // namespace pc::test
