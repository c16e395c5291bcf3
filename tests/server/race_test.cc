// Races of exact and approximate chat requests at small KV memory: 16 clients against
// `--parallel 8` with shared system prompts and multi-part user messages, so that
// sequences are preempted while others decode and prefill. No request may fail or
// abort the server, and every exact answer must be bitwise the answer the same
// request gets alone on a fresh server (tokens and their log-probabilities).
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include "server_fixture.h"

namespace pc::test {
namespace {

std::vector<std::string> race_args(const std::string& kv_memory, const std::string& parallel) {
  return {"-m", shared_path("models/stories260K.gguf"), "--chat-template-file",
          shared_path("templates-2026/Qwen-Qwen2.5-7B-Instruct.jinja"), "--kv-memory", kv_memory,
          "--parallel", parallel, "--queue", "64", "--threads", "1"};
}

std::string paragraph(int seed, int sentences) {
  static const char* words[] = {"Lily", "Max", "ball", "park", "red", "dog", "ran", "happy", "tree", "sun"};
  std::string p;
  for (int s = 0; s < sentences; ++s) {
    p += "The";
    for (int w = 0; w < 7; ++w) p += std::string(" ") + words[(seed * 7 + s * 3 + w * w) % 10];
    p += ". ";
  }
  return p;
}

// Request k: one of three system prompts, a user message of 3-4 text parts (~1,300
// tokens in all), exact or approximate reuse.
json race_request(int k, bool approximate) {
  json parts = json::array();
  const int n_parts = 3 + k % 2;
  for (int i = 0; i < n_parts; ++i)
    parts.push_back({{"type", "text"}, {"text", paragraph((k + i) % 5 + 10 * i, 12)}});
  json body = {{"messages",
                {{{"role", "system"}, {"content", "You are helper number " + std::to_string(k % 3) + ". " +
                                                      paragraph(100 + k % 3, 14)}},
                 {{"role", "user"}, {"content", parts}}}},
               {"max_tokens", 24 + 8 * (k % 3)},
               {"temperature", 0},
               {"logprobs", true}};
  if (approximate) body["cache_reuse"] = "approximate";
  return body;
}

// What an exact answer must reproduce: the generated text and every token's logprob.
std::string fingerprint(const json& r) {
  std::string out = r["choices"][0]["message"]["content"].get<std::string>();
  for (const json& t : r["choices"][0]["logprobs"]["content"]) out += "|" + t["token"].get<std::string>() + "@" +
                                                                       t["logprob"].dump();
  return out;
}

constexpr int kDistinct = 10;

TEST(ServerRace, ExactAnswersUnderPreemptionEqualSoloRunsAtSmallKvMemory) {
  std::map<int, std::string> solo;
  for (int k = 0; k < kDistinct; ++k) {
    ServeProcess fresh(race_args("64MiB", "1"));
    auto c = fresh.client();
    const Reply r = post(c, "/v1/chat/completions", race_request(k, false));
    ASSERT_EQ(r.status, 200) << r.raw;
    ASSERT_GT(r.body["usage"]["prompt_tokens"].get<int>(), 900) << r.raw;
    solo[k] = fingerprint(r.body);
  }
  for (const char* kv : {"2MiB", "4MiB", "8MiB"}) {
    ServeProcess srv(race_args(kv, "8"));
    std::mutex mu;
    std::vector<std::string> failures;
    std::atomic<int> exact_checked{0}, approximate{0};
    std::vector<std::thread> clients;
    for (int t = 0; t < 16; ++t)
      clients.emplace_back([&, t] {
        auto c = srv.client();
        c.set_read_timeout(120, 0);
        for (int i = 0; i < 4; ++i) {
          const int k = (t * 3 + i * 7) % kDistinct;
          const bool approx = (t + i) % 3 == 0;
          const Reply r = post(c, "/v1/chat/completions", race_request(k, approx));
          std::lock_guard lk(mu);
          if (r.status != 200) {
            failures.push_back(std::string(kv) + " request " + std::to_string(k) + ": " +
                               std::to_string(r.status) + " " + r.raw.substr(0, 300));
          } else if (approx) {
            ++approximate;
          } else if (fingerprint(r.body) != solo[k]) {
            failures.push_back(std::string(kv) + " request " + std::to_string(k) + " differs from its solo run");
          } else {
            ++exact_checked;
          }
        }
      });
    for (std::thread& th : clients) th.join();
    EXPECT_TRUE(failures.empty()) << failures.size() << " failures, first: " << failures.front();
    EXPECT_GT(exact_checked.load(), 16) << kv;
    EXPECT_GT(approximate.load(), 8) << kv;
    // The server lives, and at the smallest memory sequences were preempted (the race
    // this test is about happened).
    auto c = srv.client();
    EXPECT_EQ(get(c, "/health").status, 200) << kv;
    const Reply stats = get(c, "/v1/cache/stats");
    ASSERT_EQ(stats.status, 200) << stats.raw;
    if (std::string(kv) == "2MiB") { EXPECT_GT(stats.body["engine"]["preemptions"].get<int64_t>(), 0) << stats.raw; }
  }
}

}  // namespace
}  // namespace pc::test
