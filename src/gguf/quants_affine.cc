// Formats with a linear scale (and for some an offset) per block: Q4_1, Q5_0,
// Q5_1 (32 elements) and Q5_K (256). Block layouts: quants.h. The dequantizers
// are the formats' reference definitions; every product d * q here is exact in
// float (at most 11 + 6 + 5 significant bits), so the one rounding is that of
// the final add or subtract, as in the reference C code whether or not its
// compiler contracts it into an FMA.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "gguf/quants_internal.h"

namespace pc::quant {

namespace {

// Q4_1 / Q5_1: cover [min, max] of the block with 2^bits levels; d and m are
// stored as F16 and the elements quantized against the stored values.
template <int kLevels>
void quantize_min_block(const float* x, uint16_t& d_out, uint16_t& m_out, uint8_t q[32]) {
  const float lo = *std::min_element(x, x + 32), hi = *std::max_element(x, x + 32);
  d_out = fp32_to_fp16((hi - lo) / float(kLevels - 1));
  m_out = fp32_to_fp16(lo);
  const float d = fp16_to_fp32(d_out), m = fp16_to_fp32(m_out);
  const float id = d != 0 ? 1.0f / d : 0.0f;
  for (int j = 0; j < 32; ++j) q[j] = static_cast<uint8_t>(std::clamp(nearest_int((x[j] - m) * id), 0, kLevels - 1));
}

// Q5_0: d = max / -16 where max is the element of largest magnitude, so it maps to 0.
void quantize_sym5_block(const float* x, uint16_t& d_out, uint8_t q[32]) {
  float amax = 0, max = 0;
  for (int j = 0; j < 32; ++j)
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  d_out = fp32_to_fp16(max / -16.0f);
  const float d = fp16_to_fp32(d_out);
  const float id = d != 0 ? 1.0f / d : 0.0f;
  for (int j = 0; j < 32; ++j) q[j] = static_cast<uint8_t>(std::clamp(nearest_int(x[j] * id) + 16, 0, 31));
}

// Low nibbles of elements 0-15 and high nibbles of 16-31 into qs; bit 4 of
// element j into bit j of qh (little-endian).
void pack_nibbles(const uint8_t q[32], uint8_t qs[16]) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>((q[j] & 0xf) | ((q[j + 16] & 0xf) << 4));
}
void pack_q5_high(const uint8_t q[32], uint8_t qh[4]) {
  std::memset(qh, 0, 4);
  for (int j = 0; j < 32; ++j) qh[j / 8] |= static_cast<uint8_t>(((q[j] >> 4) & 1) << (j % 8));
}

// The 5-bit level of element j of a Q5_0 / Q5_1 block.
int q5_level(const uint8_t qs[16], const uint8_t qh[4], int j) {
  const int nibble = j < 16 ? qs[j] & 0xf : qs[j - 16] >> 4;
  return nibble | (q5_high_bit(qh, j) << 4);
}

}  // namespace

void quantize_q4_1(const float* x, BlockQ4_1* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += 32) {
    uint8_t q[32];
    quantize_min_block<16>(x, y[b].d, y[b].m, q);
    pack_nibbles(q, y[b].qs);
  }
}

void dequantize_q4_1(const BlockQ4_1* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += 32) {
    const float d = fp16_to_fp32(x[b].d), m = fp16_to_fp32(x[b].m);
    for (int j = 0; j < 16; ++j) {
      y[j] = float(x[b].qs[j] & 0xf) * d + m;
      y[j + 16] = float(x[b].qs[j] >> 4) * d + m;
    }
  }
}

void quantize_q5_0(const float* x, BlockQ5_0* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += 32) {
    uint8_t q[32];
    quantize_sym5_block(x, y[b].d, q);
    pack_nibbles(q, y[b].qs);
    pack_q5_high(q, y[b].qh);
  }
}

void dequantize_q5_0(const BlockQ5_0* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += 32) {
    const float d = fp16_to_fp32(x[b].d);
    for (int j = 0; j < 32; ++j) y[j] = float(q5_level(x[b].qs, x[b].qh, j) - 16) * d;
  }
}

void quantize_q5_1(const float* x, BlockQ5_1* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += 32) {
    uint8_t q[32];
    quantize_min_block<32>(x, y[b].d, y[b].m, q);
    pack_nibbles(q, y[b].qs);
    pack_q5_high(q, y[b].qh);
  }
}

void dequantize_q5_1(const BlockQ5_1* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += 32) {
    const float d = fp16_to_fp32(x[b].d), m = fp16_to_fp32(x[b].m);
    for (int j = 0; j < 32; ++j) y[j] = float(q5_level(x[b].qs, x[b].qh, j)) * d + m;
  }
}

// Q5_K: Q4_K's scheme with 32 levels (see quants.cc, quantize_q4_k_block).
void quantize_q5_k(const float* x, BlockQ5_K* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += 256) {
    float scale[8], minv[8], max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; ++j) {
      const float* v = x + 32 * j;
      const float lo = std::min(0.0f, *std::min_element(v, v + 32));
      const float hi = *std::max_element(v, v + 32);
      scale[j] = (hi - lo) / 31.0f;
      minv[j] = -lo;
      max_scale = std::max(max_scale, scale[j]);
      max_min = std::max(max_min, minv[j]);
    }
    const float is = max_scale > 0 ? 63.0f / max_scale : 0.0f;
    const float im = max_min > 0 ? 63.0f / max_min : 0.0f;
    int ls[8], lm[8];
    for (int j = 0; j < 8; ++j) {
      ls[j] = std::min(63, nearest_int(is * scale[j]));
      lm[j] = std::min(63, nearest_int(im * minv[j]));
    }
    BlockQ5_K& o = y[b];
    o.d = fp32_to_fp16(max_scale / 63.0f);
    o.dmin = fp32_to_fp16(max_min / 63.0f);
    k4_pack_scales(ls, lm, o.scales);
    const float d = fp16_to_fp32(o.d), dmin = fp16_to_fp32(o.dmin);
    uint8_t q[256];
    for (int j = 0; j < 8; ++j) {
      const float dj = d * ls[j], mj = dmin * lm[j];
      const float idj = dj != 0 ? 1.0f / dj : 0.0f;
      for (int l = 0; l < 32; ++l)
        q[32 * j + l] = static_cast<uint8_t>(std::clamp(nearest_int((x[32 * j + l] + mj) * idj), 0, 31));
    }
    std::memset(o.qh, 0, sizeof o.qh);
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l) {
        const uint8_t lo = q[64 * c + l], hi = q[64 * c + 32 + l];
        o.qs[32 * c + l] = static_cast<uint8_t>((lo & 0xf) | ((hi & 0xf) << 4));
        o.qh[l] |= static_cast<uint8_t>(((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
      }
  }
}

void dequantize_q5_k(const BlockQ5_K* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = fp16_to_fp32(x[b].d), dmin = fp16_to_fp32(x[b].dmin);
    for (int c = 0; c < 4; ++c) {
      const uint8_t* ql = x[b].qs + 32 * c;
      for (int half = 0; half < 2; ++half) {
        int sc, m;
        k4_scale_min(2 * c + half, x[b].scales, sc, m);
        const float dj = d * float(sc), mj = dmin * float(m);
        for (int l = 0; l < 32; ++l) {
          const int nibble = half ? ql[l] >> 4 : ql[l] & 0xf;
          const int high = (x[b].qh[l] >> (2 * c + half)) & 1;
          *y++ = dj * float(nibble | (high << 4)) - mj;
        }
      }
    }
  }
}

}  // namespace pc::quant
