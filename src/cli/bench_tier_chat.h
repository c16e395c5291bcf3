// The chat section of `promptcache bench tiers` (--chat): bytes a long conversation
// writes to each tier against its final KV, and reuse of the whole history by a
// restarted server and a second one (src/cli/bench_tier_chat.cc).
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace pc::cli {

struct TierChatOptions {
  std::string model;            // GGUF file; empty: generate one of `shape`
  std::string shape = "tiny";
  std::string scratch;          // where the model and the disk tier go
  std::string redis_url;        // empty: the disk alone
  int turns = 100;
  int turn_tokens = 512;        // user tokens each turn adds
  int reply_tokens = 8;         // tokens generated each turn
  int threads = 1;
};

// Runs the chat, prints its table and returns the figures as JSON.
nlohmann::json run_tier_chat(const TierChatOptions& opt);

}  // namespace pc::cli
