// Internals shared by the scalar and AVX2 attention paths.
#pragma once
#include <cmath>
#include <limits>

#include "kernels/fixed_exp.h"
#include "kernels/paged_attention.h"
#include "kv/k_layout.h"

namespace pc {

// The walk of the arithmetic (paged_attention.cc): f(K, kw, V, nb, pos) for
// each block of a query's visible slots in order — a page's slots [b, b + nb),
// b a multiple of 8, nb <= 8, the block's first slot at sequence position pos
// — with K the block's keys ([head_dim][kw], kw its width in the page: key u,
// dimension d at K[d * kw + u]; k_layout.h) and V its values ([nb][head_dim]),
// in the page's slab for a.kv_head. Only blocks with lo <= pos < hi.
template <class F>
inline void for_each_key_block(const PagedAttentionArgs& a, int n_ctx, F&& f, int lo = 0,
                               int hi = std::numeric_limits<int>::max()) {
  const size_t slab = size_t(a.kv_head) * a.page_size * a.head_dim;
  for (int t0 = 0, p = 0; t0 < n_ctx && t0 < hi; ++p) {
    const int pg = a.fills ? a.fills[p] : a.page_size;
    const int nk = n_ctx - t0 < pg ? n_ctx - t0 : pg;
    if (t0 + nk > lo)
      for (int b = 0; b < nk; b += 8) {
        if (t0 + b < lo) continue;
        if (t0 + b >= hi) return;
        f(a.k_pages[p] + slab + size_t(b) * a.head_dim, k_block_width(a.page_size, b),
          a.v_pages[p] + slab + size_t(b) * a.head_dim, nk - b < 8 ? nk - b : 8, t0 + b);
      }
    t0 += pg;
  }
}

// The slots [lo, hi) whose blocks a call of the tokens form covers: all, or
// one softmax segment (PagedAttentionTokens::seg).
inline void segment_range(const PagedAttentionArgs& a, int seg, int* lo, int* hi) {
  *lo = seg < 0 ? 0 : seg * a.segment;
  *hi = seg < 0 ? std::numeric_limits<int>::max() : (seg + 1) * a.segment;
}

// Merges the state of the next segment (mk, sk, acck) into the state of the
// segments before it (mm, sm, accm), as paged_attention.cc states: an empty
// state (m = -inf) on either side takes the other unchanged.
inline void merge_attention_state(int hd, float* mm, float* sm, float* accm, float mk, float sk,
                                  const float* acck) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  if (mk == kNegInf) return;
  if (*mm == kNegInf) {
    *mm = mk;
    *sm = sk;
    for (int d = 0; d < hd; ++d) accm[d] = acck[d];
    return;
  }
  const float m = mk > *mm ? mk : *mm;
  const float cm = fixed_exp(*mm - m), ck = fixed_exp(mk - m);
  *sm = *sm * cm + sk * ck;
  for (int d = 0; d < hd; ++d) accm[d] = std::fma(acck[d], ck, accm[d] * cm);
  *mm = m;
}

// Multi-token form (paged_attention.h); only call when the CPU runs AVX2.
// Returns false (and does nothing) for a head_dim it has no kernel for.
bool paged_attention_tokens_avx2(const PagedAttentionArgs& a, int group,
                                 const PagedAttentionTokens& t, float* scratch);
// attention_merge() for one query, likewise (false: no kernel for head_dim).
bool attention_merge_avx2(int head_dim, const AttentionState* parts, int n_seg, int64_t qi, float* out);


}  // namespace pc
