// Portable reference kernels (CpuLevel::Scalar). Plain C++, no intrinsics.
//
// Each output element is computed on its own by a dot-product function of
// (weight row, activation row) alone, so the result cannot depend on the batch
// size, the tiling or the thread count. Reduction orders:
//   float weights: 8 interleaved partial sums (lane l takes k = l mod 8), then
//     the fixed tree ((s0+s4)+(s2+s6)) + ((s1+s5)+(s3+s7)), then the k % 8 tail
//     in order;
//   quantized weights: exact int32 dot product per block, then
//     sum += (d_w * d_x) * float(isum) block after block, in order.
#include <cmath>
#include <cstring>

#include "gguf/quants.h"
#include "kernels/matmul_internal.h"

namespace pc::kern {

namespace {

template <class Load>
float dot_float(const uint8_t* w, const float* x, int64_t k, Load load) {
  float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  const int64_t k8 = k & ~int64_t(7);
  for (int64_t i = 0; i < k8; i += 8)
    for (int l = 0; l < 8; ++l) s[l] = s[l] + x[i + l] * load(w, i + l);
  float t0 = s[0] + s[4], t1 = s[1] + s[5], t2 = s[2] + s[6], t3 = s[3] + s[7];
  float u0 = t0 + t2, u1 = t1 + t3;
  float r = u0 + u1;
  for (int64_t i = k8; i < k; ++i) r = r + x[i] * load(w, i);
  return r;
}

inline float load_f32(const uint8_t* w, int64_t i) {
  float v;
  std::memcpy(&v, w + 4 * i, 4);
  return v;
}
inline float load_f16(const uint8_t* w, int64_t i) {
  uint16_t h;
  std::memcpy(&h, w + 2 * i, 2);
  return half_to_float(h);
}
inline float load_bf16(const uint8_t* w, int64_t i) {
  uint16_t h;
  std::memcpy(&h, w + 2 * i, 2);
  return bf16_to_float(h);
}

float dot_q8_0(const uint8_t* wrow, const int8_t* xq, const float* xd, int64_t k) {
  const auto* w = reinterpret_cast<const BlockQ8_0*>(wrow);
  float sum = 0.f;
  for (int64_t b = 0; b < k / 32; ++b) {
    int32_t isum = 0;
    for (int i = 0; i < 32; ++i) isum += int32_t(w[b].qs[i]) * xq[32 * b + i];
    sum = sum + (half_to_float(w[b].d) * xd[b]) * float(isum);
  }
  return sum;
}

float dot_q4_0(const uint8_t* wrow, const int8_t* xq, const float* xd, int64_t k) {
  const auto* w = reinterpret_cast<const BlockQ4_0*>(wrow);
  float sum = 0.f;
  for (int64_t b = 0; b < k / 32; ++b) {
    const int8_t* q = xq + 32 * b;
    int32_t isum = 0;
    for (int i = 0; i < 16; ++i) {
      isum += (int32_t(w[b].qs[i] & 0xF) - 8) * q[i];
      isum += (int32_t(w[b].qs[i] >> 4) - 8) * q[i + 16];
    }
    sum = sum + (half_to_float(w[b].d) * xd[b]) * float(isum);
  }
  return sum;
}

float dot_q4_k(const uint8_t* wrow, const int8_t* xq, const float* xd, const int16_t* xbs,
               int64_t k) {
  const auto* w = reinterpret_cast<const BlockQ4_K*>(wrow);
  float sum = 0.f;
  for (int64_t b = 0; b < k / 256; ++b) {
    const BlockQ4_K& blk = w[b];
    uint8_t sc[8], mn[8];
    q4k_scales(blk.scales, sc, mn);
    const int8_t* q = xq + 256 * b;
    const int16_t* bs = xbs + 16 * b;
    int32_t isum = 0, msum = 0;
    for (int c = 0; c < 4; ++c) {
      int32_t lo = 0, hi = 0;
      for (int l = 0; l < 32; ++l) {
        lo += int32_t(blk.qs[32 * c + l] & 0xF) * q[64 * c + l];
        hi += int32_t(blk.qs[32 * c + l] >> 4) * q[64 * c + 32 + l];
      }
      isum += lo * sc[2 * c] + hi * sc[2 * c + 1];
    }
    for (int j = 0; j < 8; ++j) msum += int32_t(mn[j]) * (bs[2 * j] + bs[2 * j + 1]);
    const float d = half_to_float(blk.d), dmin = half_to_float(blk.dmin);
    sum = sum + (d * xd[b]) * float(isum);
    sum = sum - (dmin * xd[b]) * float(msum);
  }
  return sum;
}

float dot_q6_k(const uint8_t* wrow, const int8_t* xq, const float* xd, int64_t k) {
  const auto* w = reinterpret_cast<const BlockQ6_K*>(wrow);
  float sum = 0.f;
  for (int64_t b = 0; b < k / 256; ++b) {
    const BlockQ6_K& blk = w[b];
    const int8_t* q = xq + 256 * b;
    int32_t sub[16] = {};
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = blk.ql + 64 * h;
      const uint8_t* qh = blk.qh + 32 * h;
      const int base = 128 * h;
      for (int l = 0; l < 32; ++l) {
        const int q0 = (ql[l] & 0xF) | ((qh[l] & 3) << 4);
        const int q1 = (ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4);
        const int q2 = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
        const int q3 = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
        sub[(base + l) / 16] += (q0 - 32) * q[base + l];
        sub[(base + l + 32) / 16] += (q1 - 32) * q[base + l + 32];
        sub[(base + l + 64) / 16] += (q2 - 32) * q[base + l + 64];
        sub[(base + l + 96) / 16] += (q3 - 32) * q[base + l + 96];
      }
    }
    int32_t isum = 0;
    for (int j = 0; j < 16; ++j) isum += sub[j] * blk.scales[j];
    sum = sum + (half_to_float(blk.d) * xd[b]) * float(isum);
  }
  return sum;
}

template <class Load>
void task_float(const MatmulArgs& a, int64_t r0, int64_t r1, int64_t c0, int64_t c1, Load load) {
  for (int64_t c = c0; c < c1; ++c)
    for (int64_t r = r0; r < r1; ++r)
      a.y[r * a.ldy + c] = dot_float(a.w + c * a.row_bytes, a.x + r * a.k, a.k, load);
}

void task_f32(const MatmulArgs& a, int64_t r0, int64_t r1, int64_t c0, int64_t c1, uint8_t*) {
  task_float(a, r0, r1, c0, c1, load_f32);
}
void task_f16(const MatmulArgs& a, int64_t r0, int64_t r1, int64_t c0, int64_t c1, uint8_t*) {
  task_float(a, r0, r1, c0, c1, load_f16);
}
void task_bf16(const MatmulArgs& a, int64_t r0, int64_t r1, int64_t c0, int64_t c1, uint8_t*) {
  task_float(a, r0, r1, c0, c1, load_bf16);
}
void task_q8_0(const MatmulArgs& a, int64_t r0, int64_t r1, int64_t c0, int64_t c1, uint8_t*) {
  for (int64_t c = c0; c < c1; ++c)
    for (int64_t r = r0; r < r1; ++r)
      a.y[r * a.ldy + c] = dot_q8_0(a.w + c * a.row_bytes, a.xq(r), a.xd(r), a.k);
}
void task_q4_0(const MatmulArgs& a, int64_t r0, int64_t r1, int64_t c0, int64_t c1, uint8_t*) {
  for (int64_t c = c0; c < c1; ++c)
    for (int64_t r = r0; r < r1; ++r)
      a.y[r * a.ldy + c] = dot_q4_0(a.w + c * a.row_bytes, a.xq(r), a.xd(r), a.k);
}
void task_q4_k(const MatmulArgs& a, int64_t r0, int64_t r1, int64_t c0, int64_t c1, uint8_t*) {
  for (int64_t c = c0; c < c1; ++c)
    for (int64_t r = r0; r < r1; ++r)
      a.y[r * a.ldy + c] = dot_q4_k(a.w + c * a.row_bytes, a.xq(r), a.xd(r), a.xbs(r), a.k);
}
void task_q6_k(const MatmulArgs& a, int64_t r0, int64_t r1, int64_t c0, int64_t c1, uint8_t*) {
  for (int64_t c = c0; c < c1; ++c)
    for (int64_t r = r0; r < r1; ++r)
      a.y[r * a.ldy + c] = dot_q6_k(a.w + c * a.row_bytes, a.xq(r), a.xd(r), a.k);
}

}  // namespace

TaskKernel scalar_kernel(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return task_f32;
    case GgmlType::F16: return task_f16;
    case GgmlType::BF16: return task_bf16;
    case GgmlType::Q8_0: return task_q8_0;
    case GgmlType::Q4_0: return task_q4_0;
    case GgmlType::Q4_K: return task_q4_k;
    case GgmlType::Q6_K: return task_q6_k;
    default: return nullptr;
  }
}

void scalar_quantize_row(const float* x, int64_t k, const ActLayout& l, uint8_t* out) {
  auto* qs = reinterpret_cast<int8_t*>(out);
  auto* d = reinterpret_cast<float*>(out + l.d_off);
  auto* bs = reinterpret_cast<int16_t*>(out + l.bsum_off);
  const int64_t qk = l.qk;
  for (int64_t b = 0; b < k / qk; ++b) {
    const float* xb = x + b * qk;
    float amax = 0.f;
    for (int64_t i = 0; i < qk; ++i) amax = std::fmax(amax, std::fabs(xb[i]));
    const float id = amax > 0.f ? 127.f / amax : 0.f;
    // Q8_0 activation blocks carry an F16 scale, as the Q8_0 format does (and as
    // llama.cpp's CPU path does): the products use the rounded scale.
    d[b] = qk == 32 ? fp16_to_fp32(fp32_to_fp16(amax / 127.f)) : amax / 127.f;
    for (int64_t i = 0; i < qk; ++i) qs[b * qk + i] = static_cast<int8_t>(std::nearbyint(xb[i] * id));
    if (qk == 256) {
      for (int g = 0; g < 16; ++g) {
        int s = 0;
        for (int i = 0; i < 16; ++i) s += qs[b * qk + 16 * g + i];
        bs[b * 16 + g] = static_cast<int16_t>(s);
      }
    }
  }
}

}  // namespace pc::kern
