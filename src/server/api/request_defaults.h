// What a generation request gets for a sampling field it does not set: the server's
// --temp, --top-p, --top-k, --seed and -n/--n-predict (llama-server's server-level
// defaults), shown in /props default_generation_settings.params.
#pragma once
#include <cstdint>
#include <optional>

namespace pc::server {

struct RequestDefaults {
  double temperature = 1.0;       // [0, 2]; 0 = greedy
  double top_p = 1.0;             // (0, 1]; 1 = off
  int32_t top_k = 0;              // 0 = off
  std::optional<uint64_t> seed;   // none: a random seed per request
  int32_t n_predict = -1;         // max_tokens when a request gives none; -1 = the route's own
                                  // default (chat: up to the context; completions: 16)
};

}  // namespace pc::server
