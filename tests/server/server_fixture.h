// Runs a real `promptcache serve` process on a loopback port for a test suite
// and talks to it over HTTP.
#pragma once
#include <httplib.h>
#include <sys/types.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace pc::test {

using json = nlohmann::json;

class ServeProcess {
 public:
  // Starts `promptcache serve -m MODEL --port 0 ARGS...` and waits until it listens.
  explicit ServeProcess(std::vector<std::string> args);
  ~ServeProcess();  // SIGTERM, then SIGKILL after 5 s
  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  httplib::Client client(const std::string& api_key = "") const;
  const std::string& log_path() const { return log_; }
  pid_t pid() const { return pid_; }
  // Sends a signal to the process (nothing once it has exited).
  void signal(int sig) const;
  // Waits up to `seconds` for the process to exit; its exit status (WEXITSTATUS), 128 +
  // the signal that killed it, or -1 when it is still running after the wait.
  int wait_exit(double seconds);

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  std::string log_;
};

// Path of the promptcache executable (PC_CLI_PATH, or beside the test binary).
std::string promptcache_path();
std::string shared_path(const std::string& rel);
// A random-weight "micro" model with the Qwen2 vocabulary (it spells any text), 4096
// tokens of context, written once per process as temp_dir()/name (a name per test
// file: test processes run in parallel).
std::string micro_qwen2_model(const std::string& name);

// POST JSON; returns {status, parsed body} (body null when not JSON).
struct Reply {
  int status = 0;
  json body;
  std::string raw;
};
Reply post(httplib::Client& c, const std::string& path, const json& body);
// POST of a body text as given (json would sort its keys).
Reply post_text(httplib::Client& c, const std::string& path, const std::string& text);
// A tool's JSON schema whose properties are not in sorted order ("zeta" before "alpha"):
// for tests that the client's key order reaches the prompt.
extern const char* const kUnsortedSchema;
Reply get(httplib::Client& c, const std::string& path);
// The `data:` payloads of an SSE body, in order ("[DONE]" included as a string).
std::vector<std::string> sse_events(const std::string& body);

}  // namespace pc::test
