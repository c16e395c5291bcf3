// Why a sequence ended.
#pragma once

namespace pc {

enum class FinishReason {
  kNone,       // still running
  kStop,       // an end-of-generation token, a stop string, or the caller stopped it
  kLength,     // max_tokens reached
  kError,      // the request failed (GenerateResult::error says why)
  kCancelled,  // the client went away before it finished (server)
};

// The OpenAI API's spelling: "stop", "length", "error", "cancelled" ("" for kNone).
inline const char* to_string(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kError: return "error";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kNone: break;
  }
  return "";
}

}  // namespace pc
