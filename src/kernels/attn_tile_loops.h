// The loops the SIMD attention tiles share (paged_attention_avx2.cc,
// paged_attention_avx512_impl.h). Included inside each kernel file's target
// region, so that these functions, and the tile lambdas inlined into them,
// carry that file's target options.
#pragma once

#include <immintrin.h>

#include "kernels/paged_attention_internal.h"

namespace pc {

// f(d) for d in [0, n) (n a multiple of D), a cursor step every D (when the
// cursor issues: a decode's tiles), unrolled by 2: a score tile's head
// dimensions. AVX2's tiles step every 2 dimensions; AVX-512's 16-lane tiles
// every one: stepping every 2 there, Llama-3-8B heads' decode attention ran
// 0.68x as fast on a Zen 5 (tinyllama heads 1.02x).
template <int D, class F>
__attribute__((always_inline)) inline void attn_dims(AttnPrefetchCursor& pfc, int n, F&& f) {
  static_assert(D == 1 || D == 2);
  if (!pfc.issuing()) {
#pragma GCC unroll 2
    for (int d = 0; d < n; ++d) f(d);
  } else if constexpr (D == 2) {
#pragma GCC unroll 1
    for (int d = 0; d < n; d += 2) {
      pfc.step();
      f(d);
      f(d + 1);
    }
  } else {
    for (int d = 0; d < n; ++d) {
      pfc.step();
      f(d);
    }
  }
  pfc.skip(n / D);
}

// f(u) for the len slots of a block, a cursor step each when the cursor
// issues; a whole block (8 slots) as a fixed loop of 8: an update tile's slots.
template <class F>
__attribute__((always_inline)) inline void attn_block_slots(AttnPrefetchCursor& pfc, int len, F&& f) {
  if (len == 8) {
    if (!pfc.issuing()) {
#pragma GCC unroll 1
      for (int u = 0; u < 8; ++u) f(u);
    } else {
#pragma GCC unroll 1
      for (int u = 0; u < 8; ++u) {
        pfc.step();
        f(u);
      }
    }
  } else {
    for (int u = 0; u < len; ++u) {
      pfc.step();
      f(u);
    }
  }
  pfc.skip(len);
}

// Whether any block of a chunk rescales the QT queries' accumulators: any of
// their factors c[i][0, n_blk) not 1 (c[i] holds kAttnChunkBlocks entries,
// those past n_blk stale: masked off), one vector compare a query. The update
// tiles then multiply every block by its factors (by 1 where the maximum did
// not grow: exact), one branch per chunk instead of one per block, which new
// maxima make unpredictable (the first chunks of every softmax segment).
template <int QT>
__attribute__((always_inline)) inline bool attn_chunk_rescales(const float* const* c, int n_blk) {
  static_assert(kAttnChunkBlocks == 8, "a chunk's factors one vector a query");
  int grew = 0;
#pragma GCC unroll 8
  for (int i = 0; i < QT; ++i)
    grew |= _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(c[i]), _mm256_set1_ps(1.f), _CMP_NEQ_UQ));
  return (grew & ((1 << n_blk) - 1)) != 0;
}

}  // namespace pc
