// The machine's memory read bandwidth, measured the way decode reads weights:
// every thread of a pool streams its own contiguous share of a buffer much
// larger than the caches, front to back, with vector loads.
#pragma once
#include <cstdint>

namespace pc {

class ThreadPool;

struct ReadBandwidth {
  double gb_per_s = 0;    // best pass: bytes / seconds / 1e9
  int64_t bytes = 0;      // buffer size read per pass
  int passes = 0;
};

// Reads a `bytes` buffer (allocated, filled, then freed here) `passes` times on
// all of the pool's threads and returns the fastest pass. Throws pc::Error if
// the buffer cannot be allocated.
ReadBandwidth measure_read_bandwidth(ThreadPool& pool, int64_t bytes = int64_t(1) << 30, int passes = 5);

}  // namespace pc
