// int8 multiply-add peak (see int8_peak.h). Independent accumulators hide the
// instructions' latency (vpdpbusd: ~5 cycles at one or two issued a cycle); the
// operands stay in registers, so no load or cache limits the rate.
#include "kernels/int8_peak.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>

#include "kernels/thread_pool.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace pc {

namespace {

constexpr int kChains = 12;  // PC_CHAINS below
constexpr int64_t kIters = int64_t(1) << 21;  // per thread and pass: ~25M instructions

#if defined(__x86_64__)
// Twelve named accumulators (an array of them made the compiler copy each one
// between two registers every iteration).
#define PC_CHAINS(STEP) \
  STEP(a0) STEP(a1) STEP(a2) STEP(a3) STEP(a4) STEP(a5) STEP(a6) STEP(a7) STEP(a8) STEP(a9) STEP(a10) STEP(a11)

// kChains vpdpbusd chains on VEC (LANES int32 lanes), compiled for TARGET,
// with the intrinsics SET1, DP (the vpdpbusd) and XOR defined around each
// use: AVX-512's on zmm, AVX-VNNI's VEX form on ymm.
#define PC_DPBUSD_CHAINS(NAME, TARGET, VEC, LANES)                  \
  __attribute__((target(TARGET))) uint32_t NAME(uint32_t seed) {    \
    const VEC a = SET1(int(seed | 0x01010101u));                     \
    const VEC b = SET1(int(seed * 2654435761u));                     \
    int k = 0;                                                       \
    PC_CHAINS(PC_INIT)                                               \
    for (int64_t i = 0; i < kIters; ++i) {                           \
      PC_CHAINS(PC_STEP)                                             \
    }                                                                \
    VEC s = SET1(0);                                                 \
    PC_CHAINS(PC_FOLD)                                               \
    uint32_t w[LANES];                                               \
    std::memcpy(w, &s, sizeof w);                                    \
    uint32_t r = 0;                                                  \
    for (uint32_t x : w) r ^= x;                                     \
    return r;                                                        \
  }
#define PC_INIT(x) auto x = SET1(k++);
#define PC_STEP(x) x = DP(x, a, b);
#define PC_FOLD(x) s = XOR(s, x);
#define SET1 _mm512_set1_epi32
#define DP _mm512_dpbusd_epi32
#define XOR _mm512_xor_si512
PC_DPBUSD_CHAINS(vnni_chains, "avx512f,avx512bw,avx512vnni", __m512i, 16)
#undef SET1
#undef DP
#undef XOR
// AvxVnni: the same chains on ymm with the VEX-encoded vpdpbusd.
#define SET1 _mm256_set1_epi32
#define DP _mm256_dpbusd_avx_epi32
#define XOR _mm256_xor_si256
PC_DPBUSD_CHAINS(avxvnni_chains, "avx2,avxvnni", __m256i, 8)
#undef SET1
#undef DP
#undef XOR
#undef PC_INIT
#undef PC_STEP
#undef PC_FOLD
#undef PC_DPBUSD_CHAINS

// The AVX2 step as the kernels run it: vpmaddubsw + vpmaddwd on operands that
// are not the accumulator, summed by vpaddd. Each chain has its own operand, which
// an empty asm makes look new every iteration so the products are not hoisted out
// of the loop; four chains leave the compiler enough of the 16 ymm registers to
// keep every accumulator and operand in one (six spilled them to the stack).
#define PC_CHAINS4(STEP) STEP(a0, u0) STEP(a1, u1) STEP(a2, u2) STEP(a3, u3)
constexpr int kChainsAvx2 = 4;

__attribute__((target("avx2"))) uint32_t maddubs_chains(uint32_t seed) {
  const __m256i b = _mm256_set1_epi32(int(seed * 2654435761u));
  const __m256i ones = _mm256_set1_epi16(1);
  int k = int(seed);
#define PC_INIT(x, u) __m256i x = _mm256_setzero_si256(), u = _mm256_set1_epi32(k++);
  PC_CHAINS4(PC_INIT)
#undef PC_INIT
  for (int64_t i = 0; i < kIters; ++i) {
#define PC_STEP(x, u) \
  asm volatile("" : "+x"(u)); \
  x = _mm256_add_epi32(x, _mm256_madd_epi16(_mm256_maddubs_epi16(u, b), ones));
    PC_CHAINS4(PC_STEP)
#undef PC_STEP
  }
  __m256i s = _mm256_setzero_si256();
#define PC_FOLD(x, u) s = _mm256_xor_si256(s, x);
  PC_CHAINS4(PC_FOLD)
#undef PC_FOLD
  alignas(32) uint32_t w[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(w), s);
  uint32_t r = 0;
  for (uint32_t x : w) r ^= x;
  return r;
}
#undef PC_CHAINS4
#undef PC_CHAINS
#endif

}  // namespace

Int8Peak measure_int8_peak(ThreadPool& pool, CpuLevel level, int passes) {
  Int8Peak r;
  r.threads = pool.size();
  r.passes = passes;
#if defined(__x86_64__)
  if (level == CpuLevel::Scalar) return r;
  const bool vnni = level == CpuLevel::Avx512, ymm_vnni = level == CpuLevel::AvxVnni;
  r.instruction = vnni ? "vpdpbusd" : ymm_vnni ? "vpdpbusd (ymm)" : "vpmaddubsw+vpmaddwd";
  // Multiply-adds per chain step: a vpdpbusd's 64 lanes (32 on ymm), a vpmaddubsw's 32.
  const double macs = double(kIters) * (vnni ? kChains * 64 : ymm_vnni ? kChains * 32 : kChainsAvx2 * 32) * r.threads;
  std::atomic<uint32_t> sink{0};
  for (int pass = 0; pass < passes; ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(r.threads, [&](int64_t t, int) {
      const uint32_t seed = uint32_t(t + pass + 3);
      sink.fetch_xor(vnni ? vnni_chains(seed) : ymm_vnni ? avxvnni_chains(seed) : maddubs_chains(seed),
                     std::memory_order_relaxed);
    });
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.gmacs = std::max(r.gmacs, macs / sec * 1e-9);
  }
#else
  (void)pool;
  (void)level;
#endif
  return r;
}

}  // namespace pc
