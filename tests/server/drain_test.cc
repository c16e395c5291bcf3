// Shutdown of a real `promptcache serve` process: SIGTERM drains (a stream started
// before it completes, /health answers 503 while it runs, new generations get 503
// server_draining, the process exits 0); a second SIGTERM, or the drain timeout,
// cancels what is still running and exits 1.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <memory>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>

#include "server_fixture.h"
#include "test_util.h"

namespace pc::test {
namespace {

using namespace std::chrono_literals;

// ~0.5 s of decoding on one thread of the development container.
json long_stream() {
  return {{"prompt", "Once upon a time"}, {"max_tokens", 1500}, {"ignore_eos", true},
          {"temperature", 0}, {"stream", true}, {"stream_options", {{"include_usage", true}}}};
}

std::vector<std::string> serve_args(const std::string& drain_timeout) {
  return {"-m", shared_path("models/stories260K.gguf"), "--threads", "1", "--parallel", "1",
          "--kv-memory", "64MiB", "--drain-timeout", drain_timeout};
}

// A streamed completion on its own thread; `started` once its first event arrived
// (after the headers: the request runs).
struct Stream {
  std::atomic<bool> started{false};
  std::mutex mu;
  std::string body;
  bool transport_ok = false;
  int status = 0;
  std::thread thread;

  Stream(const ServeProcess& srv, const json& req) {
    thread = std::thread([this, &srv, req] {
      httplib::Client c = srv.client();
      httplib::Request r;
      r.method = "POST";
      r.path = "/v1/completions";
      r.body = req.dump();
      r.set_header("Content-Type", "application/json");
      r.content_receiver = [this](const char* data, size_t n, uint64_t, uint64_t) {
        std::lock_guard lk(mu);
        body.append(data, n);
        started = true;
        return true;
      };
      const httplib::Result res = c.send(r);
      std::lock_guard lk(mu);
      transport_ok = bool(res);
      if (res) status = res->status;
    });
  }
  ~Stream() {
    if (thread.joinable()) thread.join();
  }
  void wait_started() {
    for (int i = 0; i < 1000 && !started; ++i) std::this_thread::sleep_for(5ms);
    ASSERT_TRUE(started) << "the stream never started";
  }
};

// usage.completion_tokens of a stream that asked for stream_options.include_usage
// (-1 when no usage event came).
int64_t streamed_completion_tokens(const std::string& body) {
  for (const std::string& e : sse_events(body)) {
    const json j = json::parse(e, nullptr, false);
    if (!j.is_discarded() && j.is_object() && j.contains("usage") && j["usage"].is_object())
      return j["usage"].value("completion_tokens", int64_t(-1));
  }
  return -1;
}

TEST(ServerDrain, StreamFinishesHealthIs503AndExitIsZero) {
  ServeProcess srv(serve_args("30s"));
  Stream first(srv, long_stream());
  Stream queued(srv, long_stream());  // waits for the one sequence slot (--parallel 1)
  Stream queued2(srv, long_stream());
  // All three reach the server before the signal: one runs, two wait for the slot.
  // The server is asked: what the clients have received says nothing of the queue.
  auto c = srv.client();
  Reply health;
  for (int i = 0; i < 400; ++i) {
    health = get(c, "/health");
    if (health.body.value("running", 0) + health.body.value("queued", 0) == 3) break;
    std::this_thread::sleep_for(5ms);
  }
  ASSERT_EQ(health.body.value("running", 0) + health.body.value("queued", 0), 3)
      << health.raw << "\n" << read_file(srv.log_path());
  srv.signal(SIGTERM);

  // While the streams run: the balancer's health check sees 503 draining, and a new
  // generation is refused with a message naming the reason.
  for (int i = 0; i < 100; ++i) {  // the signal is handled asynchronously
    health = get(c, "/health");
    if (health.status == 503) break;
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(health.status, 503) << health.raw;
  EXPECT_EQ(health.body["status"], "draining") << health.raw;
  const Reply refused = post(c, "/v1/completions", {{"prompt", "Hello"}, {"max_tokens", 2}});
  EXPECT_EQ(refused.status, 503) << refused.raw;
  EXPECT_EQ(refused.body["error"]["code"], "server_draining") << refused.raw;

  first.thread.join();
  queued.thread.join();
  queued2.thread.join();
  for (Stream* s : {&first, &queued, &queued2}) {
    ASSERT_TRUE(s->transport_ok);
    EXPECT_EQ(s->status, 200);
    const std::vector<std::string> events = sse_events(s->body);
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events.back(), "[DONE]");
    EXPECT_EQ(s->body.find("\"error\""), std::string::npos) << s->body.substr(s->body.size() - 400);
    EXPECT_NE(s->body.find("\"finish_reason\":\"length\""), std::string::npos);
    // Every token was generated and the stream's last events went out.
    EXPECT_EQ(streamed_completion_tokens(s->body), 1500);
  }
  EXPECT_EQ(srv.wait_exit(10), 0);
}

TEST(ServerDrain, IdleServerExitsAtOnce) {
  ServeProcess srv(serve_args("30s"));
  const auto t0 = std::chrono::steady_clock::now();
  srv.signal(SIGTERM);
  EXPECT_EQ(srv.wait_exit(10), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
}

TEST(ServerDrain, SecondSignalCancelsAndExitsOne) {
  ServeProcess srv(serve_args("60s"));
  json req = long_stream();
  req["max_tokens"] = 2000;
  // One sequence slot: four streams take several times one stream's decoding. The
  // first runs before the others are sent, and all four have reached the scheduler
  // (one running, three queued) before the signals: a client thread that had not
  // connected yet would find the server gone, and a queued one must get its 503.
  std::vector<std::unique_ptr<Stream>> streams;
  streams.push_back(std::make_unique<Stream>(srv, req));
  streams[0]->wait_started();
  for (int i = 1; i < 4; ++i) streams.push_back(std::make_unique<Stream>(srv, req));
  httplib::Client c = srv.client();
  int seen = 0;
  for (int i = 0; i < 500 && seen < 4; ++i) {
    if (const httplib::Result h = c.Get("/health"); h && h->status == 200) {
      const json health = json::parse(h->body);
      seen = health.value("running", 0) + health.value("queued", 0);
    }
    if (seen < 4) std::this_thread::sleep_for(2ms);
  }
  ASSERT_EQ(seen, 4) << "the four streams were never all in the scheduler at once";
  srv.signal(SIGTERM);
  std::this_thread::sleep_for(50ms);
  srv.signal(SIGTERM);
  EXPECT_EQ(srv.wait_exit(10), 1);
  int cut = 0;
  for (auto& st : streams) {
    st->thread.join();
    // Every stream ends properly: whole, or with an error event, or (cancelled before
    // its headers went out) a 503 — never cut mid-chunk.
    ASSERT_TRUE(st->transport_ok) << "the stream was cut: " << st->body.substr(st->body.size() > 300 ? st->body.size() - 300 : 0);
    if (st->status != 200) {
      EXPECT_EQ(st->status, 503) << st->body;
      ++cut;
      continue;
    }
    const std::vector<std::string> events = sse_events(st->body);
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events.back(), "[DONE]");
    cut += st->body.find("\"error\"") != std::string::npos;
  }
  EXPECT_GE(cut, 1) << "no stream was cancelled by the second signal";
}

TEST(ServerDrain, DrainTimeoutCancelsAndExitsOne) {
  ServeProcess srv(serve_args("100ms"));
  json req = long_stream();
  req["max_tokens"] = 2000;
  Stream s(srv, req);
  Stream queued(srv, req);
  s.wait_started();
  const auto t0 = std::chrono::steady_clock::now();
  srv.signal(SIGTERM);
  EXPECT_EQ(srv.wait_exit(10), 1);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
}

TEST(ServerDrain, BadDrainTimeoutIsAClearError) {
  for (const char* bad : {"soon", "-1s", "5x", "1..2s"}) {
    const std::string out = temp_dir() + "/drain_out.txt";
    const std::string cmd = promptcache_path() + " serve -m " + shared_path("models/stories260K.gguf") +
                            " --port 0 --drain-timeout=" + bad + " > " + out + " 2>&1";
    EXPECT_NE(std::system(cmd.c_str()), 0) << bad;
    EXPECT_NE(read_file(out).find("invalid duration"), std::string::npos) << read_file(out);
  }
}

}  // namespace
}  // namespace pc::test
