// A server the benchmarks run inside their own process: bound to a free port at
// construction, listening on a thread of its own, stopped and joined on destruction.
#pragma once
#include <thread>

#include "server/server.h"

namespace pc::cli {

struct InProcessServer {
  server::Server srv;
  std::thread listener;
  int port = 0;
  explicit InProcessServer(const server::ServerOptions& o) : srv(o) {
    port = srv.bind();
    listener = std::thread([this] { srv.listen(); });
  }
  ~InProcessServer() {
    srv.stop();
    listener.join();
  }
};

}  // namespace pc::cli
