// Internals shared by the scalar and AVX2 attention paths.
#pragma once
#include "kernels/fixed_exp.h"
#include "kernels/paged_attention.h"
#include "kv/k_layout.h"

namespace pc {

// The walk of the arithmetic (paged_attention.cc): f(K, kw, V, nb) for each
// block of a query's visible slots in order — a page's slots [b, b + nb),
// b a multiple of 8, nb <= 8 — with K the block's keys ([head_dim][kw], kw
// its width in the page: key u, dimension d at K[d * kw + u]; k_layout.h)
// and V its values ([nb][head_dim]), in the page's slab for a.kv_head.
template <class F>
inline void for_each_key_block(const PagedAttentionArgs& a, int n_ctx, F&& f) {
  const size_t slab = size_t(a.kv_head) * a.page_size * a.head_dim;
  for (int t0 = 0, p = 0; t0 < n_ctx; ++p) {
    const int pg = a.fills ? a.fills[p] : a.page_size;
    const int nk = n_ctx - t0 < pg ? n_ctx - t0 : pg;
    for (int b = 0; b < nk; b += 8)
      f(a.k_pages[p] + slab + size_t(b) * a.head_dim, k_block_width(a.page_size, b),
        a.v_pages[p] + slab + size_t(b) * a.head_dim, nk - b < 8 ? nk - b : 8);
    t0 += pg;
  }
}

// Multi-token form (paged_attention.h); only call when the CPU runs AVX2.
// Returns false (and does nothing) for a head_dim it has no kernel for.
bool paged_attention_tokens_avx2(const PagedAttentionArgs& a, int group,
                                 const PagedAttentionTokens& t, float* scratch);


}  // namespace pc
