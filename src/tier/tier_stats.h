// A tier's state and counters since it was opened: plain data, reported by
// KvTier::stats() and carried up to the cache API and /metrics unchanged.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pc {

// Sizes a tier cannot know are -1.
struct TierStats {
  std::string name;             // KvTier::name()
  bool connected = true;        // usable now (a remote tier reachable; a local one: always)
  int64_t entries = -1;         // entries stored; -1: not known (Redis)
  int64_t bytes = -1;           // bytes stored; -1: not known
  int64_t tokens = -1;          // tokens whose KV the entries hold; -1: not known (Redis)
  int64_t capacity_bytes = -1;  // -1: no capacity of ours (Redis: the server's maxmemory)
  int64_t ttl_seconds = -1;     // idle entries expire after this; -1: never
  int64_t hits = 0;             // lookups that found an entry
  int64_t misses = 0;
  int64_t puts = 0;             // entries stored
  int64_t put_failures = 0;     // puts that stored nothing
  int64_t errors = 0;           // I/O or transport failures
  int64_t corrupt_deleted = 0;  // invalid entries deleted
  int64_t bytes_written = 0;    // entry bytes stored by puts since the tier was opened
  int64_t bytes_read = 0;       // entry bytes read by lookups and copies
  // Counters only this kind of tier has, by name, in a fixed order (published as they are).
  std::vector<std::pair<std::string, int64_t>> counters;
  // Settings worth publishing, by name (disk: "dir").
  std::vector<std::pair<std::string, std::string>> info;

  // The named counter's value; -1 when this tier has none of that name.
  int64_t counter(std::string_view counter_name) const {
    for (const auto& [n, v] : counters)
      if (n == counter_name) return v;
    return -1;
  }
};

// The counts every tier keeps of its own traffic (TierStats's fields of the
// same names): a tier's own Counters extends it with those only it has.
struct TierTraffic {
  int64_t hits = 0, misses = 0;
  int64_t puts = 0, put_failures = 0;
  int64_t corrupt_deleted = 0;
  int64_t bytes_written = 0, bytes_read = 0;

  // Copies them into s.
  void fill(TierStats& s) const {
    s.hits = hits;
    s.misses = misses;
    s.puts = puts;
    s.put_failures = put_failures;
    s.corrupt_deleted = corrupt_deleted;
    s.bytes_written = bytes_written;
    s.bytes_read = bytes_read;
  }
};

}  // namespace pc
