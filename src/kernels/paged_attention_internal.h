// Internals shared by the scalar and AVX2 attention paths.
#pragma once
#include "kernels/fixed_exp.h"
#include "kernels/paged_attention.h"

namespace pc {

// The walk of the arithmetic (paged_attention.cc): f(K, V, b, nb) for each
// block of a query's visible slots in order; K and V point at the page's
// slab for a.kv_head, the block is the page's slots [b, b + nb), nb <= 8.
template <class F>
inline void for_each_key_block(const PagedAttentionArgs& a, int n_ctx, F&& f) {
  const size_t slab = size_t(a.kv_head) * a.page_size * a.head_dim;
  for (int t0 = 0, p = 0; t0 < n_ctx; ++p) {
    const int pg = a.fills ? a.fills[p] : a.page_size;
    const int nk = n_ctx - t0 < pg ? n_ctx - t0 : pg;
    for (int b = 0; b < nk; b += 8) f(a.k_pages[p] + slab, a.v_pages[p] + slab, b, nk - b < 8 ? nk - b : 8);
    t0 += pg;
  }
}

// Multi-token form (paged_attention.h); only call when the CPU runs AVX2.
// Returns false (and does nothing) for a head_dim it has no kernel for.
bool paged_attention_tokens_avx2(const PagedAttentionArgs& a, int group,
                                 const PagedAttentionTokens& t, float* scratch);


}  // namespace pc
