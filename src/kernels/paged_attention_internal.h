// Internals shared by the scalar and AVX2 attention paths.
#pragma once
#include "kernels/paged_attention.h"

namespace pc {

// head_dim must be a multiple of 8; only call when the CPU runs AVX2.
void paged_attention_avx2(const PagedAttentionArgs& a, const float* q, int group, float* out,
                          float* scratch);
// Multi-token form (paged_attention.h); returns false (and does nothing) for a
// head_dim it has no register-blocked kernel for.
bool paged_attention_tokens_avx2(const PagedAttentionArgs& a, int group,
                                 const PagedAttentionTokens& t, float* scratch);

// y[i] = std::exp(x[i]) (bitwise, for glibc >= 2.28 on an AVX2+FMA machine),
// vectorized; y may alias x. Only call when the CPU runs AVX2.
void expf_avx2(const float* x, float* y, int n);

}  // namespace pc
