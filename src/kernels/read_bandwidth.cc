// Read-bandwidth measurement (see read_bandwidth.h). Each task sums its slice
// with 256-bit loads (AVX2 where the CPU level allows, 64-bit words otherwise),
// keeping the sum so the loads cannot be removed.
#include "kernels/read_bandwidth.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "common/error.h"
#include "kernels/cpu.h"
#include "kernels/thread_pool.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace pc {

namespace {

uint64_t sum_words(const uint64_t* p, int64_t n) {
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (int64_t i = 0; i + 4 <= n; i += 4) {
    s0 += p[i];
    s1 += p[i + 1];
    s2 += p[i + 2];
    s3 += p[i + 3];
  }
  return s0 ^ s1 ^ s2 ^ s3;
}

#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("avx2"))) uint64_t sum_avx2(const uint64_t* p, int64_t n) {
  __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
  const __m256i* v = reinterpret_cast<const __m256i*>(p);
  for (int64_t i = 0; i + 16 <= n; i += 16, v += 4) {  // one 128-byte pair of lines a step
    a = _mm256_add_epi64(a, _mm256_load_si256(v));
    b = _mm256_add_epi64(b, _mm256_load_si256(v + 1));
    c = _mm256_add_epi64(c, _mm256_load_si256(v + 2));
    d = _mm256_add_epi64(d, _mm256_load_si256(v + 3));
  }
  const __m256i s = _mm256_xor_si256(_mm256_xor_si256(a, b), _mm256_xor_si256(c, d));
  alignas(32) uint64_t w[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(w), s);
  return w[0] ^ w[1] ^ w[2] ^ w[3];
}
#endif

}  // namespace

ReadBandwidth measure_read_bandwidth(ThreadPool& pool, int64_t bytes, int passes) {
  bytes = std::max<int64_t>(bytes & ~int64_t(4095), 4096);
  struct Free {
    void operator()(uint64_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint64_t, Free> buf(static_cast<uint64_t*>(std::aligned_alloc(4096, size_t(bytes))));
  if (!buf) throw Error("read bandwidth: cannot allocate " + std::to_string(bytes) + " bytes");
  const int64_t words = bytes / 8;
  // Filled by the pool's threads (first touch places pages near the thread that reads them).
  const int64_t tasks = pool.size();
  const int64_t per = (words / tasks) & ~int64_t(15);
  pool.parallel_for(tasks, [&](int64_t t, int) {
    uint64_t* p = buf.get() + t * per;
    for (int64_t i = 0; i < per; ++i) p[i] = uint64_t(i) * 0x9E3779B97F4A7C15ull;
  });
  bool avx2 = false;
#if defined(__x86_64__) || defined(__i386__)
  avx2 = cpu_level() >= CpuLevel::Avx2;
#endif
  std::atomic<uint64_t> sink{0};
  ReadBandwidth r;
  r.bytes = per * tasks * 8;
  r.passes = passes;
  for (int pass = 0; pass < passes; ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(tasks, [&](int64_t t, int) {
      const uint64_t* p = buf.get() + t * per;
      uint64_t s = 0;
#if defined(__x86_64__) || defined(__i386__)
      s = avx2 ? sum_avx2(p, per) : sum_words(p, per);
#else
      s = sum_words(p, per);
#endif
      sink.fetch_xor(s, std::memory_order_relaxed);
    });
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.gb_per_s = std::max(r.gb_per_s, double(r.bytes) / sec * 1e-9);
  }
  return r;
}

}  // namespace pc
