#include "server_fixture.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <mutex>
#include <map>
#include <thread>

#include "model/make_model.h"
#include "test_util.h"

namespace pc::test {

std::string promptcache_path() {
  if (!cli_path().empty()) return cli_path();
  return (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "promptcache").string();
}

std::string shared_path(const std::string& rel) { return shared_dir() + "/" + rel; }

ServeProcess::ServeProcess(std::vector<std::string> args) {
  log_ = temp_dir() + "/serve.log";
  std::vector<std::string> argv = {promptcache_path(), "serve"};
  // Port 0 (any free one) unless the test names one (a restart on the same port).
  if (std::find(args.begin(), args.end(), "--port") == args.end()) argv.insert(argv.end(), {"--port", "0"});
  // Tests run in parallel (ctest -j): two compute threads per server unless a
  // test asks otherwise, not every core of the machine each.
  if (std::find(args.begin(), args.end(), "--threads") == args.end() &&
      std::find(args.begin(), args.end(), "-t") == args.end())
    argv.insert(argv.end(), {"--threads", "2"});
  argv.insert(argv.end(), args.begin(), args.end());
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    FILE* f = std::freopen(log_.c_str(), "w", stderr);
    (void)f;
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    execv(cargv[0], cargv.data());
    _exit(127);
  }
  const std::regex re(R"(listening on http://[^:]+:(\d+))");
  for (int i = 0; i < 600; ++i) {
    std::ifstream in(log_);
    std::stringstream ss;
    ss << in.rdbuf();
    std::smatch m;
    const std::string text = ss.str();
    if (std::regex_search(text, m, re)) {
      port_ = std::stoi(m[1]);
      return;
    }
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      throw std::runtime_error("promptcache serve exited: " + text);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  throw std::runtime_error("promptcache serve did not start listening within 30 s");
}

ServeProcess::~ServeProcess() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  for (int i = 0; i < 100; ++i) {
    if (waitpid(pid_, nullptr, WNOHANG) == pid_) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
}

void ServeProcess::signal(int sig) const {
  if (pid_ > 0) kill(pid_, sig);
}

int ServeProcess::wait_exit(double seconds) {
  if (pid_ <= 0) return -1;
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (std::chrono::steady_clock::now() >= until) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

httplib::Client ServeProcess::client(const std::string& api_key) const {
  httplib::Client c("127.0.0.1", port_);
  c.set_read_timeout(120);
  if (!api_key.empty()) c.set_bearer_token_auth(api_key);
  return c;
}

namespace {
Reply to_reply(const httplib::Result& r) {
  Reply out;
  if (!r) throw std::runtime_error("HTTP request failed: " + httplib::to_string(r.error()));
  out.status = r->status;
  out.raw = r->body;
  out.body = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
  if (out.body.is_discarded()) out.body = nullptr;
  return out;
}
}  // namespace

Reply post(httplib::Client& c, const std::string& path, const json& body) {
  return to_reply(c.Post(path.c_str(), body.dump(), "application/json"));
}

Reply post_text(httplib::Client& c, const std::string& path, const std::string& text) {
  return to_reply(c.Post(path.c_str(), text, "application/json"));
}

const char* const kUnsortedSchema =
    R"({"type": "object", "properties": {"zeta": {"type": "string"}, "alpha": {"type": "integer"}}, "required": ["zeta"]})";

Reply get(httplib::Client& c, const std::string& path) { return to_reply(c.Get(path.c_str())); }

std::vector<std::string> sse_events(const std::string& body) {
  std::vector<std::string> out;
  std::istringstream in(body);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("data: ", 0) == 0) out.push_back(line.substr(6));
  return out;
}

std::string micro_qwen2_model(const std::string& name) {
  static std::mutex mu;
  static std::map<std::string, std::string> made;  // name -> path
  std::lock_guard lk(mu);
  auto it = made.find(name);
  if (it != made.end()) return it->second;
  MakeModelOptions o;
  o.shape = "micro";
  o.vocab_path = shared_path("vocab/ggml-vocab-qwen2.gguf");
  o.tied_output = true;
  o.context_length = 4096;
  const std::string out = temp_dir() + "/" + name;
  make_random_model(o, out);
  made.emplace(name, out);
  return out;
}

}  // namespace pc::test
