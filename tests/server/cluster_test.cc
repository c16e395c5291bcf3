// Three real `promptcache serve` processes sharing a redis-server, behind HAProxy
// configured from deploy/haproxy.cfg (rendered as scripts/cluster.sh does, with fast
// health checks): 20 interleaved multi-turn sessions, routed by the X-Session-Id or
// X-Prompt-Cache-Key header or by the body's prompt_cache_key (last field, after 70 KB
// of other fields) or user, each stick to one server, and each server's /metrics
// counts the requests the balancer sent it. Then the busiest server is killed: no
// request fails, its sessions move to the others and reuse their earlier turns' KV
// from Redis, they stay where they moved once HAProxy marked it down, and no other
// session moves.
//
// Chat sessions across the same topology, against a single-server reference run of the
// same trace: sessions of a killed server move and their next turns splice their
// replies from the shared reply memory and find their KV in Redis (same greedy text,
// cached tokens within a page of the reference's); the killed server, restarted,
// receives new sessions; Redis killed and restarted empty loses nothing that fails, and
// the servers write their resident entries and replies again, so sessions cached
// before the restart move with full reuse. No write-through is ever dropped.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "server_fixture.h"
#include "test_util.h"
#include "tier/tier_fixture.h"

namespace pc::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

std::string find_haproxy() {
  for (const char* p : {"/usr/sbin/haproxy", "/usr/bin/haproxy", "/usr/local/sbin/haproxy", "/usr/local/bin/haproxy"})
    if (::access(p, X_OK) == 0) return p;
  return "";
}

// The repository root: $PC_SOURCE_DIR, else the parent of the build directory that
// holds this test binary.
std::string source_dir() {
  if (const char* s = std::getenv("PC_SOURCE_DIR")) return s;
  return fs::read_symlink("/proc/self/exe").parent_path().parent_path().string();
}

// deploy/haproxy.cfg with the front door on `port`, the given members, and health
// checks every 200 ms (down after 2 failures, up after 1 success; 2 s to answer one).
std::string render_haproxy_config(const std::string& tmpl, int port, const std::vector<int>& members) {
  std::istringstream in(tmpl);
  std::ostringstream out;
  std::string line;
  bool in_servers = false, bind_done = false;
  while (std::getline(in, line)) {
    const std::string trimmed = line.substr(std::min(line.find_first_not_of(' '), line.size()));
    if (trimmed == "# END SERVERS") {
      in_servers = false;
      for (size_t i = 0; i < members.size(); ++i)
        out << "    server pc" << i + 1 << " 127.0.0.1:" << members[i] << " check\n";
    }
    if (in_servers) continue;
    if (trimmed == "# BEGIN SERVERS") in_servers = true;
    if (!bind_done && trimmed.rfind("bind ", 0) == 0) {
      out << "    bind 127.0.0.1:" << port << "\n";
      bind_done = true;
    } else if (trimmed.rfind("default-server ", 0) == 0) {
      out << "    default-server inter 200ms fastinter 100ms downinter 200ms fall 2 rise 1\n";
      // Without it a check times out after `inter`: a loaded test machine would take
      // healthy servers out.
      out << "    timeout check 2s\n";
    } else {
      out << line << "\n";
    }
  }
  return out.str();
}

// The HAProxy binary, and deploy/haproxy.cfg rendered into `dir` with the front door on
// `front` and the given members; a fatal failure naming what is missing otherwise.
void write_haproxy_config(const std::string& dir, int front, const std::vector<int>& ports, std::string* bin,
                          std::string* cfg) {
  *bin = find_haproxy();
  ASSERT_FALSE(bin->empty()) << "HAProxy is not installed: scripts/setup.sh installs it (Debian package haproxy)";
  const std::string tmpl_path = source_dir() + "/deploy/haproxy.cfg";
  ASSERT_TRUE(fs::exists(tmpl_path)) << tmpl_path << " not found (set PC_SOURCE_DIR to the repository root)";
  *cfg = dir + "/haproxy.cfg";
  std::ofstream(*cfg) << render_haproxy_config(read_file(tmpl_path), front, ports);
}

class HaproxyProcess {
 public:
  HaproxyProcess(const std::string& bin, const std::string& cfg_path, const std::string& log) {
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      FILE* f = std::freopen(log.c_str(), "w", stderr);
      (void)f;
      ::execl(bin.c_str(), bin.c_str(), "-db", "-f", cfg_path.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  ~HaproxyProcess() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  bool exited() {
    return pid_ <= 0 || ::waitpid(pid_, nullptr, WNOHANG) == pid_;
  }

 private:
  pid_t pid_ = -1;
};

// promptcache_requests_total{route="/v1/completions",status="200"} of one server.
int64_t completions_200(ServeProcess& srv) {
  auto c = srv.client();
  const Reply m = get(c, "/metrics");
  const std::regex re(R"re(promptcache_requests_total\{route="/v1/completions",status="200"\} (\d+))re");
  std::smatch sm;
  return std::regex_search(m.raw, sm, re) ? std::stoll(sm[1]) : 0;
}

int64_t redis_hits(ServeProcess& srv) {
  auto c = srv.client();
  const Reply s = get(c, "/v1/cache/stats");
  return s.body["tiers"]["redis"].value("hits", int64_t(0));
}

// A session and how it names its routing key.
struct Session {
  enum class Key { kSessionHeader, kCacheKeyHeader, kBodyKeyLast, kBodyUser } how;
  std::string key;
  std::string prompt;
  std::vector<std::string> servers;  // the member that answered each turn
  std::vector<int64_t> cached;       // usage.prompt_tokens_details.cached_tokens per turn
};

const char* kNames[] = {"Lily", "Tom", "Ben", "Mia", "Sue", "Max", "Ann", "Sam", "Tim", "Zoe",
                        "Kim", "Joe", "Amy", "Bob", "Eve", "Dan", "Liz", "Ray", "Pam", "Ned"};
const char* kPlaces[] = {"park", "sea", "farm", "shop", "forest"};

// The request body as the client sends it: the routing key, when in the body, is its
// last field (after a 70 KB `metadata` field for kBodyKeyLast), which HAProxy must
// buffer to see.
std::string body_of(const Session& s) {
  json j = {{"prompt", s.prompt}, {"max_tokens", 8}, {"temperature", 0}};
  std::string b = j.dump();
  b.pop_back();  // '}'
  if (s.how == Session::Key::kBodyKeyLast) {
    b += ",\"metadata\":{\"pad\":\"" + std::string(70 * 1024, 'x') + "\"}";
    b += ",\"prompt_cache_key\":" + json(s.key).dump();
  } else if (s.how == Session::Key::kBodyUser) {
    b += ",\"user\":" + json(s.key).dump();
  }
  return b + "}";
}

struct Turn {
  bool ok = false;
  int attempts = 0;
  std::string server;
  json body;
};

// One turn through the front door; retried (at most 5 attempts, 100 ms apart) when the
// transport fails or the answer is not 200.
Turn send_turn(int front_port, const Session& s) {
  Turn t;
  const std::string body = body_of(s);
  httplib::Headers h;
  if (s.how == Session::Key::kSessionHeader) h.emplace("X-Session-Id", s.key);
  if (s.how == Session::Key::kCacheKeyHeader) h.emplace("X-Prompt-Cache-Key", s.key);
  for (t.attempts = 1; t.attempts <= 5; ++t.attempts) {
    httplib::Client c("127.0.0.1", front_port);
    c.set_read_timeout(60);
    const httplib::Result r = c.Post("/v1/completions", h, body, "application/json");
    if (r && r->status == 200) {
      t.ok = true;
      t.server = r->get_header_value("X-Promptcache-Server");
      t.body = json::parse(r->body, nullptr, false);
      return t;
    }
    std::this_thread::sleep_for(100ms);
  }
  return t;
}

TEST(Cluster, SessionsStickAndMoveOnlyFromAKilledServer) {
  RedisServer redis;
  ASSERT_TRUE(redis.available()) << "redis-server is not installed (scripts/setup.sh installs it)";
  ASSERT_TRUE(redis.running());

  std::vector<std::unique_ptr<ServeProcess>> servers;
  for (int i = 0; i < 3; ++i)
    servers.push_back(std::make_unique<ServeProcess>(std::vector<std::string>{
        "-m", shared_path("models/stories260K.gguf"), "--threads", "1", "--kv-memory", "64MiB", "--redis",
        redis.url()}));
  std::vector<int> ports;
  for (auto& s : servers) ports.push_back(s->port());

  const std::string dir = temp_dir();
  const int front = free_port();
  std::string haproxy, cfg;
  write_haproxy_config(dir, front, ports, &haproxy, &cfg);
  if (::testing::Test::HasFatalFailure()) return;
  HaproxyProcess ha(haproxy, cfg, dir + "/haproxy.log");
  bool up = false;
  for (int i = 0; i < 200 && !up; ++i) {
    httplib::Client c("127.0.0.1", front);
    const httplib::Result r = c.Get("/health");
    up = r && r->status == 200;
    if (!up) std::this_thread::sleep_for(25ms);
  }
  ASSERT_TRUE(up) << "HAProxy did not answer on " << front << ": " << read_file(dir + "/haproxy.log");

  std::vector<Session> sessions;
  for (int i = 0; i < 20; ++i) {
    Session s;
    s.how = Session::Key(i % 4);
    s.key = "session-" + std::to_string(i);
    s.prompt = std::string(kNames[i]) + " went to the " + kPlaces[i % 5] + " with a red ball.";
    sessions.push_back(std::move(s));
  }
  int client_retries = 0;
  auto run_turn = [&](Session& s) {
    const Turn t = send_turn(front, s);
    client_retries += t.attempts - 1;
    ASSERT_TRUE(t.ok) << s.key << ": no answer after " << t.attempts - 1 << " attempts";
    ASSERT_TRUE(t.body.is_object());
    s.servers.push_back(t.server);
    s.cached.push_back(t.body["usage"]["prompt_tokens_details"]["cached_tokens"]);
    s.prompt += std::string(t.body["choices"][0]["text"]) + " Then they played.";
  };

  // Three turns of every session, interleaved.
  for (int turn = 0; turn < 3; ++turn)
    for (Session& s : sessions) run_turn(s);
  if (HasFatalFailure()) return;

  std::map<std::string, int> sessions_on, requests_on;
  for (const Session& s : sessions) {
    for (const std::string& srv : s.servers) {
      EXPECT_EQ(srv, s.servers[0]) << s.key << " moved between servers";
      ++requests_on[srv];
    }
    ++sessions_on[s.servers[0]];
    // Later turns continue from the server's memory.
    EXPECT_GE(s.cached[2], 16) << s.key;
  }
  // The servers' own counts agree with the balancer's X-Promptcache-Server headers.
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(completions_200(*servers[i]), requests_on["pc" + std::to_string(i + 1)]) << "pc" << i + 1;

  // Kill the member with the most sessions; HAProxy sees it down within ~0.4 s, and
  // retries (redispatched) a request that met it before.
  std::string victim = sessions_on.begin()->first;
  for (const auto& [srv, n] : sessions_on)
    if (n > sessions_on[victim]) victim = srv;
  ASSERT_GE(sessions_on[victim], 1);
  const int vi = std::stoi(victim.substr(2)) - 1;
  ::kill(servers[vi]->pid(), SIGKILL);
  servers[vi]->wait_exit(5);
  std::vector<int64_t> hits_before(3, 0);
  for (int i = 0; i < 3; ++i)
    if (i != vi) hits_before[i] = redis_hits(*servers[i]);

  // Turn 3 right after the kill: a request that meets the dead server is retried by
  // HAProxy on another one (conn-failure, redispatch), possibly not the one the hash
  // ring settles on once the server is marked down; it must not fail.
  for (Session& s : sessions) run_turn(s);
  if (HasFatalFailure()) return;
  std::this_thread::sleep_for(800ms);  // down after 2 failed checks (~0.4 s)
  client_retries = 0;
  for (int turn = 4; turn < 6; ++turn)
    for (Session& s : sessions) run_turn(s);
  if (HasFatalFailure()) return;
  EXPECT_EQ(client_retries, 0) << "requests failed after HAProxy marked " << victim << " down";

  int moved = 0;
  for (const Session& s : sessions) {
    const bool was_on_victim = s.servers[0] == victim;
    for (int turn = 3; turn < 6; ++turn) EXPECT_NE(s.servers[turn], victim) << s.key;
    EXPECT_EQ(s.servers[5], s.servers[4]) << s.key << " moved again after " << victim << " was marked down";
    if (!was_on_victim) {
      for (int turn = 3; turn < 6; ++turn)
        EXPECT_EQ(s.servers[turn], s.servers[0]) << s.key << " moved though its server stayed up";
      continue;
    }
    ++moved;
    // The first turn on another server reuses the earlier turns' KV from Redis.
    for (int turn = 3; turn < 6; ++turn)
      EXPECT_GE(s.cached[turn], 16) << s.key << " turn " << turn << " found no KV on " << s.servers[turn];
  }
  EXPECT_EQ(moved, sessions_on[victim]);
  int64_t new_hits = 0;
  for (int i = 0; i < 3; ++i)
    if (i != vi) new_hits += redis_hits(*servers[i]) - hits_before[i];
  EXPECT_GE(new_hits, moved) << "the moved sessions' KV did not come from Redis";
  for (int i = 0; i < 3; ++i) {
    if (i == vi) continue;
    auto c = servers[i]->client();
    EXPECT_EQ(get(c, "/v1/cache/stats").body["tiers"].value("writes_skipped", -1), 0) << "pc" << i + 1;
  }
  EXPECT_FALSE(ha.exited()) << read_file(dir + "/haproxy.log");
}

// A chat session of the trace: its messages so far and the key HAProxy routes it by.
struct Chat {
  std::string key;
  json messages = json::array();
  std::string owner;  // the member that answered its last turn
};

// What one chat turn reported.
struct ChatTurn {
  bool ok = false;
  std::string server, text, reason;
  int64_t cached = 0, prompt = 0, completion = 0;
  int64_t spliced = -1;
};

std::string user_message(const Chat& c, size_t turn) {
  return "Turn " + std::to_string(turn) + " of " + c.key + ": tell me what happened to the little " +
         std::string(kNames[turn % 20]) + " at the " + kPlaces[turn % 5] + ".";
}

// Sends the session's next turn (its next user message) to `port`, retried as send_turn
// does; on success appends the user message and the reply to the session.
ChatTurn chat_turn(int port, Chat& c, bool routed) {
  ChatTurn t;
  json messages = c.messages;
  messages.push_back({{"role", "user"}, {"content", user_message(c, messages.size() / 2)}});
  const json body = {{"messages", messages}, {"max_tokens", 8}, {"temperature", 0}, {"ignore_eos", true}};
  httplib::Headers h;
  if (routed) h.emplace("X-Session-Id", c.key);
  for (int attempt = 0; attempt < 5 && !t.ok; ++attempt) {
    httplib::Client cl("127.0.0.1", port);
    cl.set_read_timeout(60);
    const httplib::Result r = cl.Post("/v1/chat/completions", h, body.dump(), "application/json");
    if (!r || r->status != 200) {
      std::this_thread::sleep_for(100ms);
      continue;
    }
    const json j = json::parse(r->body, nullptr, false);
    if (!j.is_object()) continue;
    t.ok = true;
    t.server = r->get_header_value("X-Promptcache-Server");
    t.text = j["choices"][0]["message"]["content"];
    t.cached = j["usage"]["prompt_tokens_details"]["cached_tokens"];
    t.prompt = j["usage"]["prompt_tokens"];
    t.completion = j["usage"]["completion_tokens"];
    const json& pc = j["promptcache"];
    t.spliced = pc.value("spliced_replies", int64_t(-1));
    t.reason = pc["reason"].is_string() ? pc["reason"].get<std::string>() : "";
  }
  if (t.ok) {
    messages.push_back({{"role", "assistant"}, {"content", t.text}});
    c.messages = std::move(messages);
    if (!t.server.empty()) c.owner = t.server;
  }
  return t;
}

std::vector<std::string> chat_server_args(const std::string& redis_url, int port = 0) {
  std::vector<std::string> a = {"-m", shared_path("models/stories260K.gguf"), "--chat-template-file",
                                shared_path("templates-2026/Qwen-Qwen2.5-7B-Instruct.jinja"), "--threads", "1",
                                "--kv-memory", "64MiB"};
  if (!redis_url.empty()) a.insert(a.end(), {"--redis", redis_url});
  if (port) a.insert(a.end(), {"--port", std::to_string(port)});
  return a;
}

json cache_stats(ServeProcess& srv) {
  auto c = srv.client();
  return get(c, "/v1/cache/stats").body;
}

// Polls `ok` every 50 ms for up to `seconds`; whether it held.
bool eventually(double seconds, const std::function<bool()>& ok) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    if (ok()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return ok();
}

TEST(Cluster, MovedChatSessionsSpliceTheirRepliesAcrossKillsAndARedisRestart) {
  constexpr int kSessions = 8, kTurns = 6;
  std::vector<Chat> base(kSessions);
  for (int i = 0; i < kSessions; ++i) base[i].key = "chat-" + std::to_string(i);

  // The reference: every session's turns on one server, no tier.
  std::vector<std::vector<ChatTurn>> ref(kSessions);
  {
    ServeProcess one(chat_server_args(""));
    std::vector<Chat> chats = base;
    for (int turn = 0; turn < kTurns; ++turn)
      for (int i = 0; i < kSessions; ++i) {
        ref[i].push_back(chat_turn(one.port(), chats[i], false));
        ASSERT_TRUE(ref[i].back().ok) << chats[i].key << " turn " << turn << " on the reference server";
      }
    // The trace exercises splicing: later turns resend replies the server generated,
    // and each turn hits its whole history.
    for (int i = 0; i < kSessions; ++i)
      for (int turn = 1; turn < kTurns; ++turn) {
        EXPECT_EQ(ref[i][turn].spliced, turn) << i << " " << turn;
        EXPECT_GE(ref[i][turn].cached, ref[i][turn - 1].prompt + ref[i][turn - 1].completion - 1) << i << " " << turn;
      }
  }

  RedisServer redis;
  ASSERT_TRUE(redis.available()) << "redis-server is not installed (scripts/setup.sh installs it)";
  ASSERT_TRUE(redis.running());
  std::vector<std::unique_ptr<ServeProcess>> servers;
  for (int i = 0; i < 3; ++i) servers.push_back(std::make_unique<ServeProcess>(chat_server_args(redis.url())));
  std::vector<int> ports;
  for (auto& s : servers) ports.push_back(s->port());
  const std::string dir = temp_dir();
  const int front = free_port();
  std::string haproxy, cfg;
  write_haproxy_config(dir, front, ports, &haproxy, &cfg);
  if (HasFatalFailure()) return;
  HaproxyProcess ha(haproxy, cfg, dir + "/haproxy.log");
  ASSERT_TRUE(eventually(10, [&] {
    httplib::Client c("127.0.0.1", front);
    const httplib::Result r = c.Get("/health");
    return r && r->status == 200;
  })) << read_file(dir + "/haproxy.log");

  std::vector<Chat> chats = base;
  // Checks a turn against the reference; `moved`: it ran where the session had not been.
  auto check = [&](int i, int turn, const ChatTurn& t, bool moved) {
    ASSERT_TRUE(t.ok) << chats[i].key << " turn " << turn;
    const ChatTurn& r = ref[i][turn];
    EXPECT_EQ(t.text, r.text) << chats[i].key << " turn " << turn << " on " << t.server;
    EXPECT_EQ(t.spliced, r.spliced) << chats[i].key << " turn " << turn;
    EXPECT_NE(t.reason, "unknown_reply") << chats[i].key << " turn " << turn;
    if (turn == 0) return;
    // The session's history: the previous prompt and the reply's KV (all but its last
    // token). From Redis, KV comes in page-aligned entries (16 tokens): within a page.
    const int64_t history = r.prompt > 0 ? ref[i][turn - 1].prompt + ref[i][turn - 1].completion - 1 : 0;
    EXPECT_GE(t.cached, moved ? history - 15 : history) << chats[i].key << " turn " << turn;
  };
  int turn = 0;
  for (; turn < 2; ++turn)
    for (int i = 0; i < kSessions; ++i) check(i, turn, chat_turn(front, chats[i], true), false);
  if (HasFatalFailure()) return;

  // Kill the member with the most sessions; once HAProxy marked it down its sessions
  // move, and their turns splice replies generated on the dead server.
  std::map<std::string, int> on;
  for (const Chat& c : chats) ++on[c.owner];
  std::string victim = on.begin()->first;
  for (const auto& [srv, n] : on)
    if (n > on[victim]) victim = srv;
  const int vi = std::stoi(victim.substr(2)) - 1;
  ::kill(servers[vi]->pid(), SIGKILL);
  servers[vi]->wait_exit(5);
  std::this_thread::sleep_for(800ms);  // down after 2 failed checks (~0.4 s)
  int moved = 0;
  for (int i = 0; i < kSessions; ++i) {
    const bool was_there = chats[i].owner == victim;
    const ChatTurn t = chat_turn(front, chats[i], true);
    check(i, turn, t, was_there);
    EXPECT_NE(t.server, victim);
    moved += was_there;
  }
  ++turn;
  EXPECT_EQ(moved, on[victim]);
  ASSERT_GE(moved, 1);
  if (HasFatalFailure()) return;

  // Redis dies: every turn is still served (from memory, where each session now is);
  // the servers say Redis is down.
  redis.kill();
  for (int i = 0; i < kSessions; ++i) check(i, turn, chat_turn(front, chats[i], true), false);
  ++turn;
  for (int k = 0; k < 3; ++k) {
    if (k == vi) continue;
    EXPECT_TRUE(eventually(5, [&] {
      auto c = servers[k]->client();
      return get(c, "/health").body.value("redis", "") == "down";
    })) << "pc" << k + 1;
  }
  // Restarted empty: each server notices and writes its resident entries and replies again.
  ASSERT_TRUE(redis.start());
  for (int k = 0; k < 3; ++k) {
    if (k == vi) continue;
    EXPECT_TRUE(eventually(10, [&] {
      json st = cache_stats(*servers[k]);
      return st["tiers"].value("tier_resets", 0) >= 1 && st["conversation_memory"]["shared"].value("resets", 0) >= 1;
    })) << "pc" << k + 1 << " did not notice the Redis restart";
    EXPECT_TRUE(eventually(10, [&] { return cache_stats(*servers[k])["tiers"].value("in_flight", 1) == 0; }));
  }
  std::this_thread::sleep_for(300ms);  // the replies' stores (a queue of their own)
  // Every session's next turn straight to the other live member: the KV and replies it
  // finds there were written to Redis again after its restart.
  for (int i = 0; i < kSessions; ++i) {
    const int own = std::stoi(chats[i].owner.substr(2)) - 1;
    int other = (own + 1) % 3;
    if (other == vi) other = (other + 1) % 3;
    check(i, turn, chat_turn(ports[other], chats[i], false), true);
  }
  ++turn;
  if (HasFatalFailure()) return;

  // Restarted on its port, the killed server rejoins: new sessions reach it, and the
  // sessions the hash ring gives back to it resume there from Redis.
  servers[vi] = std::make_unique<ServeProcess>(chat_server_args(redis.url(), ports[vi]));
  std::this_thread::sleep_for(600ms);  // up after one good check
  int new_on_victim = 0;
  for (int i = 0; i < 16; ++i) {
    Chat c;
    c.key = "new-" + std::to_string(i);
    const ChatTurn t = chat_turn(front, c, true);
    ASSERT_TRUE(t.ok) << c.key;
    new_on_victim += t.server == victim;
  }
  EXPECT_GE(new_on_victim, 1) << "no new session reached the restarted " << victim;
  // (Their previous turn ran on another member: every session continues from Redis.)
  int back = 0;
  for (int i = 0; i < kSessions; ++i) {
    const ChatTurn t = chat_turn(front, chats[i], true);
    check(i, turn, t, true);
    back += t.server == victim;
  }
  ++turn;
  EXPECT_EQ(back, moved) << "the ring gives " << victim << " its sessions back";
  ASSERT_EQ(turn, kTurns);
  for (auto& s : servers) {
    json st = cache_stats(*s);
    EXPECT_EQ(st["tiers"].value("writes_skipped", -1), 0) << "port " << s->port();
    EXPECT_GE(st["tiers"].value("writes", 0), 1) << "port " << s->port();
  }
  EXPECT_FALSE(ha.exited()) << read_file(dir + "/haproxy.log");
}

// --redis naming a server that is not there: the server starts, warns, serves, and says
// Redis is down in /health (still 200) and /metrics until Redis comes up.
TEST(Cluster, UnreachableRedisIsReportedAndServingGoesOn) {
  RedisServer redis;
  ASSERT_TRUE(redis.available()) << "redis-server is not installed (scripts/setup.sh installs it)";
  redis.kill();
  ServeProcess srv(chat_server_args(redis.url()));
  EXPECT_NE(read_file(srv.log_path()).find("Redis at " + redis.url() + " is unreachable"), std::string::npos)
      << read_file(srv.log_path());
  auto c = srv.client();
  const Reply h = get(c, "/health");
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(h.body.value("redis", ""), "down");
  EXPECT_NE(get(c, "/metrics").raw.find("promptcache_redis_up 0"), std::string::npos);
  Chat chat;
  chat.key = "alone";
  EXPECT_TRUE(chat_turn(srv.port(), chat, false).ok);
  EXPECT_TRUE(chat_turn(srv.port(), chat, false).ok);
  ASSERT_TRUE(redis.start());
  EXPECT_TRUE(eventually(6, [&] { return get(c, "/health").body.value("redis", "") == "up"; }));
  EXPECT_NE(get(c, "/metrics").raw.find("promptcache_redis_up 1"), std::string::npos);
}

// A body beyond HAProxy's buffer still reaches a server whole (routed without its body
// key); the header routes it to the session's server.
TEST(Cluster, BodyBeyondTheBufferIsForwardedAndTheHeaderRoutesIt) {
  std::vector<std::unique_ptr<ServeProcess>> servers;
  for (int i = 0; i < 2; ++i)
    servers.push_back(std::make_unique<ServeProcess>(std::vector<std::string>{
        "-m", shared_path("models/stories260K.gguf"), "--threads", "1", "--kv-memory", "32MiB"}));
  const std::string dir = temp_dir();
  const int front = free_port();
  std::string haproxy, cfg;
  write_haproxy_config(dir, front, {servers[0]->port(), servers[1]->port()}, &haproxy, &cfg);
  if (::testing::Test::HasFatalFailure()) return;
  HaproxyProcess ha(haproxy, cfg, dir + "/haproxy.log");
  std::set<std::string> answered_by;
  for (int i = 0; i < 4; ++i) {
    const std::string body = json{{"prompt", "Once upon a time"}, {"max_tokens", 2},
                                  {"metadata", {{"pad", std::string(2 << 20, 'y')}}}}.dump();
    bool answered = false;
    for (int k = 0; k < 200 && !answered; ++k) {
      httplib::Client c("127.0.0.1", front);
      const httplib::Result r = c.Post("/v1/completions", {{"X-Session-Id", "big-body"}}, body, "application/json");
      if (!r) {
        std::this_thread::sleep_for(25ms);  // HAProxy still starting
        continue;
      }
      answered = true;
      EXPECT_EQ(r->status, 200) << r->body;
      answered_by.insert(r->get_header_value("X-Promptcache-Server"));
    }
    ASSERT_TRUE(answered) << read_file(dir + "/haproxy.log");
  }
  EXPECT_EQ(answered_by.size(), 1u);
}


// Draining behind HAProxy: SIGTERM to the server of a session whose stream is running;
// the stream completes, the session's next requests are answered by the other server
// (a 503 server_draining is retried there by HAProxy, then the check takes the
// draining server out), and the drained server exits 0.
TEST(Cluster, DrainingServerFinishesItsStreamAndHandsOverItsSessions) {
  std::vector<std::unique_ptr<ServeProcess>> servers;
  for (int i = 0; i < 2; ++i)
    servers.push_back(std::make_unique<ServeProcess>(std::vector<std::string>{
        "-m", shared_path("models/stories260K.gguf"), "--threads", "1", "--parallel", "1", "--kv-memory",
        "32MiB"}));
  const std::string dir = temp_dir();
  const int front = free_port();
  std::string haproxy, cfg;
  write_haproxy_config(dir, front, {servers[0]->port(), servers[1]->port()}, &haproxy, &cfg);
  if (::testing::Test::HasFatalFailure()) return;
  HaproxyProcess ha(haproxy, cfg, dir + "/haproxy.log");
  const httplib::Headers key = {{"X-Session-Id", "draining-session"}};
  std::string owner;
  for (int k = 0; k < 200 && owner.empty(); ++k) {
    httplib::Client c("127.0.0.1", front);
    const httplib::Result r = c.Post("/v1/completions", key, R"({"prompt":"Once","max_tokens":2})", "application/json");
    if (r && r->status == 200) owner = r->get_header_value("X-Promptcache-Server");
    else std::this_thread::sleep_for(25ms);  // HAProxy still starting
  }
  ASSERT_TRUE(owner == "pc1" || owner == "pc2") << owner << read_file(dir + "/haproxy.log");
  const int oi = owner == "pc1" ? 0 : 1;

  std::atomic<bool> started{false};
  std::string stream_body;
  int stream_status = 0;
  std::thread stream([&] {
    httplib::Client c("127.0.0.1", front);
    c.set_read_timeout(60);
    httplib::Request r;
    r.method = "POST";
    r.path = "/v1/completions";
    r.headers = key;
    r.body = json{{"prompt", "Once upon a time"}, {"max_tokens", 1500}, {"ignore_eos", true},
                  {"stream", true}}.dump();
    r.set_header("Content-Type", "application/json");
    r.content_receiver = [&](const char* d, size_t n, uint64_t, uint64_t) {
      stream_body.append(d, n);
      started = true;
      return true;
    };
    const httplib::Result res = c.send(r);
    if (res) stream_status = res->status;
  });
  for (int i = 0; i < 1000 && !started; ++i) std::this_thread::sleep_for(5ms);
  ASSERT_TRUE(started);
  servers[oi]->signal(SIGTERM);
  for (int i = 0; i < 5; ++i) {
    httplib::Client c("127.0.0.1", front);
    const httplib::Result r = c.Post("/v1/completions", key, R"({"prompt":"Once","max_tokens":2})", "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(r->get_header_value("X-Promptcache-Server"), oi == 0 ? "pc2" : "pc1");
  }
  stream.join();
  EXPECT_EQ(stream_status, 200);
  const std::vector<std::string> events = sse_events(stream_body);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back(), "[DONE]");
  EXPECT_EQ(stream_body.find("\"error\""), std::string::npos);
  EXPECT_EQ(servers[oi]->wait_exit(10), 0);
}

}  // namespace
}  // namespace pc::test
