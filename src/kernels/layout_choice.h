// Which layout decode reads fastest on this machine, stored or X16
// (kernels/weight_repack.h), measured once per type and process.
//
// On AVX-512 the X16 kernels are native and decode every type faster than the
// stored ones; on AVX2 they run on the 16-lane emulation (simd16_emu.h), and
// whether that beats the AVX2 row kernels on weights streamed from memory
// depends on the core: on a Zen 4 at the AVX2 level X16 decoded Q4_K 1.18x
// faster, on a 128-bit-unit AVX2 VM the stored K-quants decoded 1.5x faster
// while its X16 Q8_0 / Q4_0 / IQ4_XS won (docs/benchmarks.md). Both layouts
// give the same bits, so the choice is one of speed alone; at the AVX2 level it
// is measured: one-row matmuls (decode) on a buffer larger than the caches, the
// two layouts alternating.
#pragma once
#include <cstdint>
#include <vector>

#include "gguf/types.h"

namespace pc {

// The weights time_decode_layouts() streams in each layout by default: more
// than most machines' L2 and many L3s, as decode reads them from memory.
inline constexpr int64_t kDecodeTimingBytes = int64_t(32) << 20;

// fastest_decode_layout() keeps the X16 layout unless its decode rate over the
// stored layout's (LayoutTiming::x16_over_stored) is below this: X16 also runs
// prompts faster on most machines, and a closer result is within the noise.
inline constexpr double kDecodeX16MinRatio = 0.97;

struct LayoutTiming {
  GgmlType stored = GgmlType::F32;
  GgmlType x16 = GgmlType::F32;
  double stored_gb_per_s = 0;  // best pass of a one-row matmul over the buffer
  double x16_gb_per_s = 0;
  // The median over the pairs of passes of X16's rate over the stored
  // layout's: each pair's two passes ran back to back, so a pass that one
  // burst of noise sped up or slowed down moves the median little.
  double x16_over_stored = 0;
  int64_t bytes = 0;           // the buffer of each layout
  double seconds = 0;          // the whole measurement: filling, repacking, timing
};

// Times decode (one-row matmuls on `threads` threads, the kernels of
// cpu_level()) of `bytes` of weights stored as `stored` and of the same weights
// in its X16 layout: a warm-up pair of passes, then `pairs` pairs (one pass of
// each layout back to back, which one first alternating); the best pass of
// each and the median pair's ratio. Throws pc::Error if `stored` has no X16
// layout or the buffers cannot be allocated.
LayoutTiming time_decode_layouts(GgmlType stored, int64_t bytes = kDecodeTimingBytes, int pairs = 5,
                                 int threads = 1);

// The layout decode reads `bytes` of weights stored as t fastest in, with the
// kernels in use: matmul_repacked_type(t) on AVX-512 (and t on the scalar
// path); at the AVX2 level, t's X16 layout unless time_decode_layouts() found
// the stored layout faster (x16_over_stored below kDecodeX16MinRatio). Measured on the first call for t that has at least
// kDecodeTimingBytes of weights (0.1-0.3 s) and remembered for the process;
// fewer bytes than that take the X16 layout unmeasured (it reads
// cache-resident weights faster, and so small a share of decode's time
// matters little). Thread-safe.
GgmlType fastest_decode_layout(GgmlType t, int64_t bytes);

// The measurements fastest_decode_layout() has made so far, in the order made.
std::vector<LayoutTiming> measured_decode_layouts();

}  // namespace pc
