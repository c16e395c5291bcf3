// A server object destroyed while its handlers still stream (the benchmarks run servers
// in their own process and destroy them after stop()): every handler finishes before
// the state it uses goes. Under AddressSanitizer (-DPC_ASAN=ON) a handler outliving
// the state is a heap-use-after-free report; without it, a corrupted heap or a crash.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <httplib.h>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "server/server.h"
#include "server_fixture.h"
#include "test_util.h"

namespace pc::test {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;

TEST(ServerTeardown, DestroyedWhileStreamsRunEndsEveryHandlerFirst) {
  for (int round = 0; round < 3; ++round) {
    server::ServerOptions o;
    o.log_level = "warn";
    o.model_path = shared_path("models/stories260K.gguf");
    o.port = 0;
    o.parallel = 4;
    o.threads = 1;
    o.kv_memory_bytes = int64_t(64) << 20;
    o.chat_template_name = "chatml";  // (the completions route renders no template)
    std::optional<server::Server> srv(std::in_place, o);
    const int port = srv->bind();
    std::thread listener([&] { srv->listen(); });

    // Streams that would decode for seconds, each with a tenant of its own (the
    // per-tenant counters are what a late handler touched).
    constexpr int kStreams = 4;
    std::atomic<int> started{0};
    std::vector<std::thread> clients;
    for (int i = 0; i < kStreams; ++i)
      clients.emplace_back([&, i] {
        httplib::Client c("127.0.0.1", port);
        c.set_read_timeout(30);
        httplib::Request r;
        r.method = "POST";
        r.path = "/v1/completions";
        r.body = json{{"prompt", "Once upon a time " + std::to_string(i)},
                      {"max_tokens", 4000},
                      {"ignore_eos", true},
                      {"temperature", 0},
                      {"stream", true}}
                     .dump();
        r.set_header("Content-Type", "application/json");
        bool counted = false;
        r.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
          if (!counted) started.fetch_add(1);
          counted = true;
          return true;
        };
        c.send(r);  // ends when the server closes the connection
      });
    for (int i = 0; i < 2000 && started.load() < kStreams; ++i) std::this_thread::sleep_for(5ms);
    ASSERT_EQ(started.load(), kStreams) << "the streams never started";

    const auto t0 = std::chrono::steady_clock::now();
    srv->stop();
    listener.join();
    srv.reset();  // the handlers are still inside their streams' content providers
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(s, 10.0) << "stopping and destroying the server took " << s << " s";
    for (std::thread& t : clients) t.join();
  }
}

}  // namespace
}  // namespace pc::test
