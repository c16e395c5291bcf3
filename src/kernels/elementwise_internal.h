// Internals shared by the scalar and AVX2 row operations (elementwise.cc,
// elementwise_avx2.cc).
#pragma once
#include <cstdint>

#include "kernels/fixed_exp.h"

namespace pc {

// silu(g) * u = g / (1 + exp(-g)) * u, with the project's exp (fixed_exp.h):
// the AVX2 form does exactly these operations per lane.
inline float swiglu1(float g, float u) { return g / (1.f + fixed_exp(-g)) * u; }

// Only call when the CPU runs AVX2 (a plain loop on other builds).
void swiglu_avx2(const float* gate, const float* up, float* out, int64_t n);

}  // namespace pc
