// Internals shared by the scalar and AVX2 row operations (elementwise.cc,
// elementwise_avx2.cc).
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/fixed_exp.h"

namespace pc {

// silu(g) * u = g / (1 + exp(-g)) * u, with the project's exp (fixed_exp.h):
// the AVX2 form does exactly these operations per lane.
inline float swiglu1(float g, float u) { return g / (1.f + fixed_exp(-g)) * u; }

// gelu_tanh(g) * u: x3 = (g * g) * g; t = tanh(kGeluC * (g + kGeluA * x3));
// ((0.5 * g) * (1 + t)) * u, tanh = fixed_tanh.
inline constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)
inline constexpr float kGeluA = 0.044715f;
inline float geglu1(float g, float u) {
  const float x3 = g * g * g;
  const float t = fixed_tanh(kGeluC * (g + kGeluA * x3));
  return 0.5f * g * (1.f + t) * u;
}
// cap * tanh(x * inv), inv = 1 / cap.
inline float softcap1(float x, float cap, float inv) { return cap * fixed_tanh(x * inv); }

// RMS norm: ss = the sum of x[i]^2 in double, as four partial sums (lane l
// takes i = l mod 4 below n rounded down to 4, in order), then
// (s0 + s1) + (s2 + s3), then the n % 4 last squares in order; then
// y[i] = (x[i] * scale) * w[i] with
inline float rms_norm_scale(double ss, int64_t n, float eps) {
  return float(1.0 / std::sqrt(ss / double(n) + eps));
}

// Only call when the CPU runs AVX2 (x86-64 builds: elementwise.cc's scalar
// forms elsewhere); bitwise equal to those scalar forms.
void swiglu_avx2(const float* gate, const float* up, float* out, int64_t n);
void geglu_tanh_avx2(const float* gate, const float* up, float* out, int64_t n);
void softcap_avx2(float* x, int64_t n, float cap);
void rms_norm_avx2(const float* x, const float* w, float* y, int64_t n, float eps);
void add_inplace_avx2(float* y, const float* x, int64_t n);
void f32_to_f16_row_avx2(const float* x, uint16_t* y, int64_t n);

}  // namespace pc
