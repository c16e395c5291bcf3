// Portable reference kernels (CpuLevel::Scalar). Plain C++, no intrinsics.
//
// Each output element is computed on its own by a dot-product function of
// (weight row, activation row) alone, so the result cannot depend on the batch
// size, the tiling or the thread count. Reduction orders:
//   float weights: 8 interleaved partial sums (lane l takes k = l mod 8), then
//     the fixed tree ((s0+s4)+(s2+s6)) + ((s1+s5)+(s3+s7)), then the k % 8 tail
//     in order;
//   quantized weights: exact int32 dot product per block, then
//     sum += (d_w * d_x) * float(isum) block after block, in order; for the
//     types with an offset per block (Q4_1, Q5_1: x = d*q + m) then also
//     sum += (m_w * d_x) * float(xsum), xsum the block's activation quants'
//     sum; Q4_K / Q5_K subtract (dmin * d_x) * float(msum) likewise.
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

// The 4-bit code and the 5-bit level (Q5_0 / Q5_1) of element j of a 32-block.
inline int nibble(const uint8_t* qs, int j) { return j < 16 ? qs[j] & 0xF : qs[j - 16] >> 4; }
inline int q5_level(const uint8_t* qs, const uint8_t* qh, int j) { return nibble(qs, j) | (q5_high_bit(qh, j) << 4); }

inline int32_t block_xsum(const int8_t* q) {
  int32_t s = 0;
  for (int i = 0; i < 32; ++i) s += q[i];
  return s;
}

float dot_q4_1(const uint8_t* wrow, const int8_t* xq, const float* xd, int64_t k) {
  const auto* w = reinterpret_cast<const BlockQ4_1*>(wrow);
  float sum = 0.f;
  for (int64_t b = 0; b < k / 32; ++b) {
    const int8_t* q = xq + 32 * b;
    int32_t isum = 0;
    for (int j = 0; j < 32; ++j) isum += nibble(w[b].qs, j) * q[j];
    sum = sum + (half_to_float(w[b].d) * xd[b]) * float(isum);
    sum = sum + (half_to_float(w[b].m) * xd[b]) * float(block_xsum(q));
  }
  return sum;
}

float dot_q5_0(const uint8_t* wrow, const int8_t* xq, const float* xd, int64_t k) {
  const auto* w = reinterpret_cast<const BlockQ5_0*>(wrow);
  float sum = 0.f;
  for (int64_t b = 0; b < k / 32; ++b) {
    const int8_t* q = xq + 32 * b;
    int32_t isum = 0;
    for (int j = 0; j < 32; ++j) isum += (q5_level(w[b].qs, w[b].qh, j) - 16) * q[j];
    sum = sum + (half_to_float(w[b].d) * xd[b]) * float(isum);
  }
  return sum;
}

float dot_q5_1(const uint8_t* wrow, const int8_t* xq, const float* xd, int64_t k) {
  const auto* w = reinterpret_cast<const BlockQ5_1*>(wrow);
  float sum = 0.f;
  for (int64_t b = 0; b < k / 32; ++b) {
    const int8_t* q = xq + 32 * b;
    int32_t isum = 0;
    for (int j = 0; j < 32; ++j) isum += q5_level(w[b].qs, w[b].qh, j) * q[j];
    sum = sum + (half_to_float(w[b].d) * xd[b]) * float(isum);
    sum = sum + (half_to_float(w[b].m) * xd[b]) * float(block_xsum(q));
  }
  return sum;
}

// 32 table codes (IQ4_NL, MXFP4, an IQ4_XS sub-block) times 32 activation quants.
inline int32_t code_dot(const int8_t (&table)[16], const uint8_t* qs, const int8_t* q) {
  int32_t isum = 0;
  for (int j = 0; j < 32; ++j) isum += int32_t(table[nibble(qs, j)]) * q[j];
  return isum;
}

float dot_iq4_nl(const uint8_t* wrow, const int8_t* xq, const float* xd, int64_t k) {
  const auto* w = reinterpret_cast<const BlockIQ4_NL*>(wrow);
  float sum = 0.f;
  for (int64_t b = 0; b < k / 32; ++b)
    sum = sum + (half_to_float(w[b].d) * xd[b]) * float(code_dot(kIq4nlValues, w[b].qs, xq + 32 * b));
  return sum;
}

float dot_mxfp4(const uint8_t* wrow, const int8_t* xq, const float* xd, int64_t k) {
  const auto* w = reinterpret_cast<const BlockMXFP4*>(wrow);
  float sum = 0.f;
  for (int64_t b = 0; b < k / 32; ++b)
    sum = sum + (e8m0_half_to_fp32(w[b].e) * xd[b]) * float(code_dot(kMxfp4Values, w[b].qs, xq + 32 * b));
  return sum;
}

float dot_q5_k(const uint8_t* wrow, const int8_t* xq, const float* xd, const int16_t* xbs,
               int64_t k) {
  const auto* w = reinterpret_cast<const BlockQ5_K*>(wrow);
  float sum = 0.f;
  for (int64_t b = 0; b < k / 256; ++b) {
    const BlockQ5_K& blk = w[b];
    uint8_t sc[8], mn[8];
    q4k_scales(blk.scales, sc, mn);
    const int8_t* q = xq + 256 * b;
    const int16_t* bs = xbs + 16 * b;
    int32_t isum = 0, msum = 0;
    for (int c = 0; c < 4; ++c) {
      int32_t lo = 0, hi = 0;
      for (int l = 0; l < 32; ++l) {
        const int h = blk.qh[l] >> (2 * c);
        lo += int32_t((blk.qs[32 * c + l] & 0xF) | ((h & 1) << 4)) * q[64 * c + l];
        hi += int32_t((blk.qs[32 * c + l] >> 4) | ((h & 2) << 3)) * q[64 * c + 32 + l];
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

float dot_iq4_xs(const uint8_t* wrow, const int8_t* xq, const float* xd, int64_t k) {
  const auto* w = reinterpret_cast<const BlockIQ4_XS*>(wrow);
  float sum = 0.f;
  for (int64_t b = 0; b < k / 256; ++b) {
    const BlockIQ4_XS& blk = w[b];
    int32_t isum = 0;
    for (int i = 0; i < 8; ++i) {
      const int ls = ((blk.scales_l[i / 2] >> (4 * (i % 2))) & 0xF) | (((blk.scales_h >> (2 * i)) & 3) << 4);
      isum += (ls - 32) * code_dot(kIq4nlValues, blk.qs + 16 * i, xq + 256 * b + 32 * i);
    }
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
// Types whose dot product needs no bsums.
template <float (*kDot)(const uint8_t*, const int8_t*, const float*, int64_t)>
void task_dot(const MatmulArgs& a, int64_t r0, int64_t r1, int64_t c0, int64_t c1, uint8_t*) {
  for (int64_t c = c0; c < c1; ++c)
    for (int64_t r = r0; r < r1; ++r) a.y[r * a.ldy + c] = kDot(a.w + c * a.row_bytes, a.xq(r), a.xd(r), a.k);
}
void task_q5_k(const MatmulArgs& a, int64_t r0, int64_t r1, int64_t c0, int64_t c1, uint8_t*) {
  for (int64_t c = c0; c < c1; ++c)
    for (int64_t r = r0; r < r1; ++r)
      a.y[r * a.ldy + c] = dot_q5_k(a.w + c * a.row_bytes, a.xq(r), a.xd(r), a.xbs(r), a.k);
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
    case GgmlType::Q4_1: return task_dot<dot_q4_1>;
    case GgmlType::Q5_0: return task_dot<dot_q5_0>;
    case GgmlType::Q5_1: return task_dot<dot_q5_1>;
    case GgmlType::IQ4_NL: return task_dot<dot_iq4_nl>;
    case GgmlType::MXFP4: return task_dot<dot_mxfp4>;
    case GgmlType::Q5_K: return task_q5_k;
    case GgmlType::IQ4_XS: return task_dot<dot_iq4_xs>;
    default: return x16_via_scalar(t);
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
    } else {
      int s = 0;
      for (int i = 0; i < 32; ++i) s += qs[b * qk + i];
      bs[b] = static_cast<int16_t>(s);
    }
  }
}

}  // namespace pc::kern
