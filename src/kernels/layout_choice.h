// Which layout a request runs fastest in on this machine, stored or X16
// (kernels/weight_repack.h), measured once per type and process.
//
// On AVX-512 the X16 kernels are native and run every type faster than the
// stored ones; on AVX2 they run on the 16-lane emulation (simd16_emu.h), and
// whether that beats the AVX2 row kernels depends on the core and on the
// work: on a Zen 4 at the AVX2 level X16 decoded Q4_K 1.18x faster, on a
// 128-bit-unit AVX2 VM the stored K-quants decoded 1.5x faster while its X16
// Q8_0 / Q4_0 / IQ4_XS won, and on a Zen 3 the two decoded Q5_K within a few
// percent of each other while X16 ran its prompts 1.7x faster
// (docs/benchmarks.md). Both layouts give the same bits, so the choice is one
// of speed alone; at the AVX2 level it is measured, for decode (one-row
// matmuls on a buffer larger than the caches) and for prompts (a batch of
// kRefPromptTokens rows on cache-sized weights), the two layouts alternating,
// and weighed as one reference request: kRefPromptTokens prompt tokens, then
// kRefDecodeTokens generated ones (llama-bench's pp512 and tg128).
#pragma once
#include <cstdint>
#include <vector>

#include "gguf/types.h"

namespace pc {

// The weights time_layouts() streams in each layout for decode: more than
// most machines' L2 and many L3s, as decode reads them from memory.
inline constexpr int64_t kDecodeTimingBytes = int64_t(32) << 20;

// The weights the prompt batch is timed on: cache-sized, as a prompt's matmul
// tasks hold their block of weights in cache while the batch's rows pass.
inline constexpr int64_t kPromptTimingBytes = int64_t(256) << 10;

// The reference request the choice weighs the two timings by: a prompt of
// this many tokens (one forward step of the default --batch-tokens, and the
// prompt batch's rows in the timing), then this many generated tokens.
inline constexpr int kRefPromptTokens = 512;
inline constexpr int kRefDecodeTokens = 128;

// fastest_layout() keeps the X16 layout unless the reference request's time as
// stored over its time as X16 (LayoutTiming::x16_request_speedup) is below
// this: a closer result is within the noise.
inline constexpr double kX16MinSpeedup = 0.97;

struct LayoutTiming {
  GgmlType stored = GgmlType::F32;
  GgmlType x16 = GgmlType::F32;
  // Decode: the best pass of a one-row matmul over `bytes` of weights.
  double stored_gb_per_s = 0;
  double x16_gb_per_s = 0;
  // The median over the pairs of passes of X16's rate over the stored
  // layout's: each pair's two passes ran back to back, so a pass that one
  // burst of noise sped up or slowed down moves the median little.
  double x16_over_stored = 0;
  // Prompts: the best pass of a kRefPromptTokens-row matmul over
  // `prompt_bytes` of weights, in multiply-adds a second, and the median
  // pair's ratio as for decode.
  double stored_prompt_gmacs = 0;
  double x16_prompt_gmacs = 0;
  double x16_prompt_over_stored = 0;
  // The reference request's time over weights of one size, as stored over as
  // X16: with T = kRefPromptTokens / (prompt rate) + kRefDecodeTokens /
  // (decode rate), the stored layout's rates its best passes and X16's those
  // times the median ratios. Above 1, X16 finishes the request sooner.
  double x16_request_speedup = 0;
  int64_t bytes = 0;         // decode's buffer of each layout
  int64_t prompt_bytes = 0;  // the prompt batch's weights of each layout
  double seconds = 0;        // the whole measurement: filling, repacking, timing
};

// Times decode (one-row matmuls on `threads` threads, the kernels of
// cpu_level()) of `bytes` of weights stored as `stored` and of the same weights
// in its X16 layout, then prompts (kRefPromptTokens-row matmuls) over the
// first `prompt_bytes` of them: for each, a warm-up pair of passes, then
// `pairs` pairs (one pass of each layout back to back, which one first
// alternating); the best pass of each and the median pair's ratio. Throws
// pc::Error if `stored` has no X16 layout or the buffers cannot be allocated.
LayoutTiming time_layouts(GgmlType stored, int64_t bytes = kDecodeTimingBytes, int pairs = 5, int threads = 1,
                          int64_t prompt_bytes = kPromptTimingBytes);

// The layout the reference request over `bytes` of weights stored as t runs
// fastest in, with the kernels in use: matmul_repacked_type(t) on AVX-512 (and
// t on the scalar path); at the AVX2 level, t's X16 layout unless
// time_layouts() found the request faster as stored (x16_request_speedup below
// kX16MinSpeedup). Measured on the first call for t that has at least
// kDecodeTimingBytes of weights (0.15-0.4 s) and remembered for the process;
// fewer bytes than that take the X16 layout unmeasured (it reads
// cache-resident weights faster, and so small a share of a token's time
// matters little). Thread-safe.
GgmlType fastest_layout(GgmlType t, int64_t bytes);

// The measurements fastest_layout() has made so far, in the order made.
std::vector<LayoutTiming> measured_layouts();

}  // namespace pc
