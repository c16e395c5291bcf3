#include "kernels/elementwise.h"

#include <cmath>

#include "gguf/quants.h"
#include "kernels/cpu.h"
#include "kernels/elementwise_internal.h"

namespace pc {

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) {
#if defined(__x86_64__)
  if (cpu_level() >= CpuLevel::Avx2) {
    rms_norm_avx2(x, w, y, n, eps);
    return;
  }
#endif
  // The sum of squares in double (each square is exact in double) in the
  // order elementwise_internal.h states: four partial sums, fixed order.
  double s[4] = {0, 0, 0, 0};
  const int64_t n4 = n & ~int64_t(3);
  for (int64_t i = 0; i < n4; i += 4)
    for (int l = 0; l < 4; ++l) s[l] += double(x[i + l]) * x[i + l];
  double ss = (s[0] + s[1]) + (s[2] + s[3]);
  for (int64_t i = n4; i < n; ++i) ss += double(x[i]) * x[i];
  const float scale = rms_norm_scale(ss, n, eps);
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale * w[i];
}

Rope::Rope(const RopeParams& p) : freq_(p.n_rot / 2), attn_factor_(p.attn_factor), neox_(p.neox) {
  for (int64_t i = 0; i < int64_t(freq_.size()); ++i) {
    double f = double(p.freq_scale) * std::pow(double(p.base), -2.0 * double(i) / double(p.n_rot));
    if (p.factors) f /= p.factors[i];
    freq_[i] = f;
  }
}

void Rope::angles(int32_t pos, float* cs) const {
  for (size_t i = 0; i < freq_.size(); ++i) {
    const double theta = double(pos) * freq_[i];
    cs[2 * i] = float(std::cos(theta) * attn_factor_);
    cs[2 * i + 1] = float(std::sin(theta) * attn_factor_);
  }
}

void Rope::apply(float* x, const float* cs) const {
  const int64_t half = int64_t(freq_.size());
  for (int64_t i = 0; i < half; ++i) {
    const float c = cs[2 * i], s = cs[2 * i + 1];
    const int64_t a = neox_ ? i : 2 * i;
    const int64_t b = neox_ ? i + half : 2 * i + 1;
    const float x0 = x[a], x1 = x[b];
    x[a] = x0 * c - x1 * s;
    x[b] = x0 * s + x1 * c;
  }
}

void swiglu(const float* gate, const float* up, float* out, int64_t n) {
  if (cpu_level() >= CpuLevel::Avx2) {
    swiglu_avx2(gate, up, out, n);
    return;
  }
  for (int64_t i = 0; i < n; ++i) out[i] = swiglu1(gate[i], up[i]);
}

void geglu_tanh(const float* gate, const float* up, float* out, int64_t n) {
  if (cpu_level() >= CpuLevel::Avx2) {
    geglu_tanh_avx2(gate, up, out, n);
    return;
  }
  for (int64_t i = 0; i < n; ++i) out[i] = geglu1(gate[i], up[i]);
}

void softcap_inplace(float* x, int64_t n, float cap) {
  if (cpu_level() >= CpuLevel::Avx2) {
    softcap_avx2(x, n, cap);
    return;
  }
  const float inv = 1.f / cap;
  for (int64_t i = 0; i < n; ++i) x[i] = softcap1(x[i], cap, inv);
}

void f32_to_f16_row(const float* x, uint16_t* y, int64_t n) {
#if defined(__x86_64__)
  if (cpu_level() >= CpuLevel::Avx2) {
    f32_to_f16_row_avx2(x, y, n);
    return;
  }
#endif
  for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
}

void add_inplace(float* y, const float* x, int64_t n) {
#if defined(__x86_64__)
  if (cpu_level() >= CpuLevel::Avx2) {
    add_inplace_avx2(y, x, n);
    return;
  }
#endif
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

}  // namespace pc
