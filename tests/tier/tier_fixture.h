// Helpers for the tier tests: a small real KvStorage with pattern data, and a
// redis-server of the test's own.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kv/kv_storage.h"
#include "kv/radix_index.h"

namespace pc::test {

// 2 layers, 2 KV heads, head dim 8, 16 slots: 1 KiB per page.
inline KvShape small_shape() { return KvShape{2, 2, 8, 16}; }
inline KvNamespace small_ns(std::string tenant = "") { return KvNamespace{"model-abc", "f16", CacheScope(std::move(tenant))}; }

// Fills pages with bytes derived from (seed, page index in `pages`, byte) and positions
// base_pos + token index.
void fill_pattern(KvStorage& kv, const std::vector<int32_t>& pages, uint32_t seed, int32_t base_pos = 0);

// Tokens seed, seed+1, ... (n of them).
std::vector<int32_t> token_run(int32_t n, int32_t seed = 100);

// The bytes of token slots [0, n) of `pages` (K/V rows only, all layers/heads) and
// their positions: what must survive a round trip bitwise.
struct KvImage {
  std::vector<uint8_t> bytes;
  std::vector<int32_t> pos;
  bool operator==(const KvImage&) const = default;
};
KvImage kv_image(const KvStorage& kv, const std::vector<int32_t>& pages, int32_t n_tokens);

// A redis-server started on a free port in a temp dir (no persistence); killed by the
// destructor. available() is false when /usr/bin/redis-server is missing.
class RedisServer {
 public:
  RedisServer();
  ~RedisServer();
  bool available() const { return installed_; }
  bool running() const { return pid_ > 0; }
  int port() const { return port_; }
  std::string url(int db = 0) const { return "redis://127.0.0.1:" + std::to_string(port_) + "/" + std::to_string(db); }
  void kill();     // SIGKILL and reap
  bool start();    // (re)starts on the same port; waits until it accepts connections
 private:
  std::string dir_;
  bool installed_ = false;
  int port_ = 0;
  pid_t pid_ = -1;
};

// Runs one command on a fresh connection; returns the integer reply (or -1000 on error).
long long redis_int(int port, const std::vector<std::string>& argv);

}  // namespace pc::test
