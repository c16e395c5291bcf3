// One streamed (server-sent events) chat completion as the benchmark clients see it.
#pragma once
#include <string>

#include <httplib.h>
#include <nlohmann/json.hpp>

namespace pc::cli {

struct StreamedChat {
  double ttft_ms = -1;              // to the first non-empty content delta; -1: none came
  std::string text;                 // the content deltas, joined
  nlohmann::json usage;             // the usage object of the stream's last usage event
  nlohmann::json promptcache;       // the last "promptcache" object an event carried
  std::string error;                // empty when the stream was whole and had usage
};

// POSTs `body` (a chat request with "stream": true) to /v1/chat/completions and reads
// the stream to its end. An error event, a failed or non-200 request, or a stream
// without usage sets `error`.
StreamedChat stream_chat(httplib::Client& cli, const std::string& body);

}  // namespace pc::cli
