#include "tier/tier_fixture.h"

#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <thread>

#include "test_util.h"

namespace pc::test {

void fill_pattern(KvStorage& kv, const std::vector<int32_t>& pages, uint32_t seed, int32_t base_pos) {
  const KvShape& s = kv.shape();
  for (size_t i = 0; i < pages.size(); ++i) {
    uint16_t* p = kv.k(pages[i], 0);
    const size_t n = s.bytes_per_page() / 2;
    uint32_t x = seed * 2654435761u + uint32_t(i) * 40503u + 1;
    for (size_t j = 0; j < n; ++j) {
      x ^= x << 13, x ^= x >> 17, x ^= x << 5;
      p[j] = uint16_t(x);
    }
    for (int slot = 0; slot < s.page_size; ++slot) kv.pos(pages[i])[slot] = base_pos + int32_t(i) * s.page_size + slot;
  }
}

std::vector<int32_t> token_run(int32_t n, int32_t seed) {
  std::vector<int32_t> t(n);
  for (int32_t i = 0; i < n; ++i) t[i] = seed + i;
  return t;
}

KvImage kv_image(const KvStorage& kv, const std::vector<int32_t>& pages, int32_t n_tokens) {
  const KvShape& s = kv.shape();
  KvImage img;
  const size_t row = size_t(s.head_dim) * 2;
  for (int32_t t = 0; t < n_tokens; ++t) {
    const int32_t page = pages[t / s.page_size], slot = t % s.page_size;
    for (int l = 0; l < s.n_layer; ++l) {
      for (int h = 0; h < s.n_kv_head; ++h) {
        const size_t slab = size_t(h) * s.page_size * s.head_dim;
        for (int d = 0; d < s.head_dim; ++d) {  // the slot's key (kernels/k_layout.h)
          const uint16_t kd = kv.k(page, l)[slab + k_index(s.page_size, s.head_dim, slot, d)];
          img.bytes.push_back(uint8_t(kd));
          img.bytes.push_back(uint8_t(kd >> 8));
        }
        const auto* v = reinterpret_cast<const uint8_t*>(kv.v(page, l) + slab + size_t(slot) * s.head_dim);
        img.bytes.insert(img.bytes.end(), v, v + row);
      }
    }
    img.pos.push_back(kv.pos(page)[slot]);
  }
  return img;
}

namespace {

bool ping(int port) {
  timeval tv{0, 200000};
  redisContext* c = redisConnectWithTimeout("127.0.0.1", port, tv);
  bool ok = false;
  if (c && !c->err) {
    auto* r = static_cast<redisReply*>(redisCommand(c, "PING"));
    ok = r && r->type == REDIS_REPLY_STATUS;
    if (r) freeReplyObject(r);
  }
  if (c) redisFree(c);
  return ok;
}

}  // namespace

constexpr const char* kRedisServer = "/usr/bin/redis-server";

RedisServer::RedisServer() {
  if (::access(kRedisServer, X_OK) != 0) return;
  installed_ = true;
  dir_ = temp_dir();
  for (int attempt = 0; attempt < 3; ++attempt) {  // the free port may be taken meanwhile
    port_ = free_port();
    if (start()) return;
  }
  kill();
}

RedisServer::~RedisServer() { kill(); }

void RedisServer::kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

bool RedisServer::start() {
  kill();
  const std::string port = std::to_string(port_);
  const std::string log = dir_ + "/redis.log";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the test
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    ::execl(kRedisServer, kRedisServer, "--port", port.c_str(), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--dir", dir_.c_str(), "--daemonize", "no", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  pid_ = pid;
  for (int i = 0; i < 250; ++i) {  // up to 5 s
    if (ping(port_)) return true;
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {  // exited (port in use?)
      pid_ = -1;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

long long redis_int(int port, const std::vector<std::string>& argv) {
  timeval tv{1, 0};
  redisContext* c = redisConnectWithTimeout("127.0.0.1", port, tv);
  long long out = -1000;
  if (c && !c->err) {
    std::vector<const char*> a;
    std::vector<size_t> l;
    for (const auto& s : argv) a.push_back(s.data()), l.push_back(s.size());
    auto* r = static_cast<redisReply*>(redisCommandArgv(c, int(a.size()), a.data(), l.data()));
    if (r && r->type == REDIS_REPLY_INTEGER) out = r->integer;
    if (r) freeReplyObject(r);
  }
  if (c) redisFree(c);
  return out;
}

}  // namespace pc::test
