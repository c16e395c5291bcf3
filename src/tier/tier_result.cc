#include "tier/tier_result.h"

namespace pc {

const char* to_string(TierStatus s) {
  switch (s) {
    case TierStatus::kOk: return "ok";
    case TierStatus::kMiss: return "miss";
    case TierStatus::kUnavailable: return "tier unavailable";
    case TierStatus::kNoSpace: return "no space left";
    case TierStatus::kTooLarge: return "entry larger than the tier capacity";
    case TierStatus::kIoError: return "I/O error";
    case TierStatus::kInvalid: return "invalid entry";
  }
  return "unknown tier status";
}

}  // namespace pc
