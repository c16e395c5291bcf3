// Internals shared by the scalar and AVX2 attention paths.
#pragma once
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

// head_dim must be a multiple of 8; only call when the CPU runs AVX2.
void paged_attention_avx2(const PagedAttentionArgs& a, const float* q, int group, float* out,
                          float* scratch);
// Multi-token form (paged_attention.h); returns false (and does nothing) for a
// head_dim it has no register-blocked kernel for.
bool paged_attention_tokens_avx2(const PagedAttentionArgs& a, int group,
                                 const PagedAttentionTokens& t, float* scratch);

// The softmax's exp, defined by these float operations so that the scalar
// and vector paths agree bitwise (and cost a dozen vector instructions for 8
// lanes instead of a libm call per value):
//   x < -87 (or -inf): +0;  NaN: NaN;  x > 88: as x = 88
//   n = nearbyint(x * kLog2e)
//   r = fma(n, -kLn2Hi, x);  r = fma(n, kLn2LoNeg, r)        (|r| <= ~0.35)
//   p = sum_{i<=7} r^i / i!  by Estrin's scheme (short dependency chains):
//       r2 = r*r; r4 = r2*r2; pij = fma(ci_j, r, ci) for (0,1) (2,3) (4,5) (6,7);
//       p = fma(fma(p67, r2, p45), r4, fma(p23, r2, p01))
//   exp = p * 2^n                                             (2^n built from bits)
// Relative error ~1e-7 against the exact exp (tests/kernels/paged_attention_test.cc).
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kLn2Hi = 0.693359375f;        // exact in 9 bits
inline constexpr float kLn2LoNeg = 2.12194440e-4f;   // ln 2 = kLn2Hi - kLn2LoNeg (to float precision)
inline constexpr float kExpC[8] = {1.f, 1.f, 0.5f, 1.f / 6, 1.f / 24, 1.f / 120, 1.f / 720, 1.f / 5040};  // 1/i!
float attention_exp(float x);
// In place, n <= 8 values (AVX2; only call when the CPU runs it).
void attention_exp8_avx2(float* x, int n);

}  // namespace pc
