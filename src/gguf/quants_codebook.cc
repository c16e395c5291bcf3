// Formats whose 4-bit codes index a table of values: IQ4_NL and IQ4_XS (the
// non-linear kIq4nlValues) and MXFP4 (E2M1 codes, kMxfp4Values, with a
// power-of-two E8M0 scale). Block layouts: quants.h. The dequantizers are the
// formats' reference definitions: one float product of the scale (d, or
// d * (ls - 32), itself exact) and the table value per element.
#include <algorithm>
#include <cmath>

#include "gguf/quants_internal.h"

namespace pc::quant {

namespace {

// Index of the table entry nearest to v (the first of two equally near).
int nearest_code(const int8_t (&table)[16], float v) {
  int best = 0;
  float best_err = std::fabs(v - table[0]);
  for (int i = 1; i < 16; ++i) {
    const float err = std::fabs(v - table[i]);
    if (err < best_err) {
      best_err = err;
      best = i;
    }
  }
  return best;
}

// The element of largest magnitude, with its sign (0 for an all-zero block).
float signed_absmax(const float* x, int n) {
  float amax = 0, max = 0;
  for (int j = 0; j < n; ++j)
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  return max;
}

// 32 elements as codes against scale d: low nibbles 0-15, high nibbles 16-31.
void pack_codes(const int8_t (&table)[16], const float* x, float d, uint8_t qs[16]) {
  const float id = d != 0 ? 1.0f / d : 0.0f;
  for (int j = 0; j < 16; ++j)
    qs[j] = static_cast<uint8_t>(nearest_code(table, x[j] * id) | (nearest_code(table, x[j + 16] * id) << 4));
}

void unpack_codes(const int8_t (&table)[16], const uint8_t qs[16], float d, float* y) {
  for (int j = 0; j < 16; ++j) {
    y[j] = d * float(table[qs[j] & 0xf]);
    y[j + 16] = d * float(table[qs[j] >> 4]);
  }
}

}  // namespace

// IQ4_NL: the largest-magnitude element maps to -127, the table's first value.
void quantize_iq4_nl(const float* x, BlockIQ4_NL* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += 32) {
    y[b].d = fp32_to_fp16(signed_absmax(x, 32) / -127.0f);
    pack_codes(kIq4nlValues, x, fp16_to_fp32(y[b].d), y[b].qs);
  }
}

void dequantize_iq4_nl(const BlockIQ4_NL* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += 32) unpack_codes(kIq4nlValues, x[b].qs, fp16_to_fp32(x[b].d), y);
}

// IQ4_XS: each sub-block's own scale (as IQ4_NL's) quantized to a 6-bit
// ls - 32 in [-32, 31] against d, the largest-magnitude one mapping to -32.
void quantize_iq4_xs(const float* x, BlockIQ4_XS* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += 256) {
    float scale[8];
    for (int i = 0; i < 8; ++i) scale[i] = signed_absmax(x + 32 * i, 32) / -127.0f;
    BlockIQ4_XS& o = y[b];
    o.d = fp32_to_fp16(signed_absmax(scale, 8) / -32.0f);
    const float d = fp16_to_fp32(o.d);
    const float id = d != 0 ? 1.0f / d : 0.0f;
    o.scales_h = 0;
    for (int i = 0; i < 4; ++i) o.scales_l[i] = 0;
    for (int i = 0; i < 8; ++i) {
      const int ls = std::clamp(nearest_int(scale[i] * id), -32, 31) + 32;
      o.scales_l[i / 2] |= static_cast<uint8_t>((ls & 0xf) << (4 * (i % 2)));
      o.scales_h |= static_cast<uint16_t>((ls >> 4) << (2 * i));
      pack_codes(kIq4nlValues, x + 32 * i, d * float(ls - 32), o.qs + 16 * i);
    }
  }
}

void dequantize_iq4_xs(const BlockIQ4_XS* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = fp16_to_fp32(x[b].d);
    for (int i = 0; i < 8; ++i, y += 32) {
      const int ls = ((x[b].scales_l[i / 2] >> (4 * (i % 2))) & 0xf) | (((x[b].scales_h >> (2 * i)) & 3) << 4);
      unpack_codes(kIq4nlValues, x[b].qs + 16 * i, d * float(ls - 32), y);
    }
  }
}

// MXFP4: the smallest power-of-two scale 2^(e-128) with 12 * scale >= max |x|
// (12: the largest doubled E2M1 value), so no element saturates.
void quantize_mxfp4(const float* x, BlockMXFP4* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += 32) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    int e = 0;
    if (amax > 0) {
      e = std::clamp(std::ilogb(amax) + 128 - 3, 0, 255);
      while (e < 255 && 12.0f * e8m0_half_to_fp32(uint8_t(e)) < amax) ++e;
      while (e > 0 && 12.0f * e8m0_half_to_fp32(uint8_t(e - 1)) >= amax) --e;
    }
    y[b].e = static_cast<uint8_t>(e);
    pack_codes(kMxfp4Values, x, e8m0_half_to_fp32(y[b].e), y[b].qs);
  }
}

void dequantize_mxfp4(const BlockMXFP4* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += 32) unpack_codes(kMxfp4Values, x[b].qs, e8m0_half_to_fp32(x[b].e), y);
}

}  // namespace pc::quant
