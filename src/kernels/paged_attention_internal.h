// Internals shared by the scalar and AVX2 attention paths.
#pragma once
#include "kernels/paged_attention.h"

namespace pc {

// head_dim must be a multiple of 8; only call when the CPU runs AVX2.
void paged_attention_avx2(const PagedAttentionArgs& a, const float* q, int group, float* out,
                          float* scratch);

}  // namespace pc
