// Results shared by the tiers below memory (disk, Redis).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tier/entry.h"

namespace pc {

enum class TierStatus {
  kOk = 0,       // stored / found
  kMiss,         // no entry for the key (or only invalid ones, which were deleted)
  kUnavailable,  // the tier cannot be reached now (Redis down, back-off running)
  kNoSpace,      // disk full even after evicting; nothing was stored
  kTooLarge,     // the entry alone exceeds the tier's capacity
  kIoError,      // another I/O failure; nothing was stored
  kInvalid,      // the bytes given to put() are not a valid entry
};
const char* to_string(TierStatus s);

// A lookup: on kOk, `entry` is validated (checksum, namespace, shape, tokens) and
// covers tokens [0, length) of the query.
struct TierLookup {
  TierStatus status = TierStatus::kMiss;
  int32_t length = 0;
  Entry entry;
  std::string message;  // why, when status is not kOk/kMiss
  bool hit() const { return status == TierStatus::kOk; }
};

// A chain walk (KvTier::read_chain): on kOk, `links` are the first links.size() links
// asked for, each validated; kMiss when not even the first was there.
struct TierChain {
  TierStatus status = TierStatus::kMiss;
  std::vector<Entry> links;
  std::string message;  // why the walk stopped early, when a link was invalid or I/O failed
  bool hit() const { return status == TierStatus::kOk && !links.empty(); }
  int32_t tokens() const {
    int32_t n = 0;
    for (const Entry& e : links) n += e.info.n_tokens();
    return n;
  }
};

}  // namespace pc
