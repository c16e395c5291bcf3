// Frozen copy of the AVX2 matmul kernels from before the issue #7 rewrite
// (matmul_avx2_ref.cc), the bitwise reference for the current kernels.
#pragma once
#include <cstdint>

#include "kernels/matmul.h"

namespace pc::test::ref {

// y = x · Wᵀ exactly as the old AVX2 path computed it (single thread). Returns
// false when there is no such path (not x86, unsupported type, empty shape).
// Call only on a machine that runs AVX2+FMA+F16C.
bool matmul_avx2_ref(const WeightView& w, const float* x, int64_t m, float* y);

}  // namespace pc::test::ref
