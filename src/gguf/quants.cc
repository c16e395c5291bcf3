// Reference conversions between F32 and the stored weight formats (see quants.h for
// the block layouts). Scalar code: the definition SIMD kernels are tested against.
#include "gguf/quants.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/error.h"

namespace pc {

namespace {

uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float bits_f32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Round to nearest, ties to even (the default FP rounding mode).
inline int nearest_int(float f) { return static_cast<int>(std::lrintf(f)); }

}  // namespace

// ---------------------------------------------------------------------------
// Half precision: 1 sign, 5 exponent (bias 15), 10 mantissa bits.

float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  const uint32_t mant = h & 0x3ff;
  if (exp == 0x1f) return bits_f32(sign | 0x7f800000 | (mant << 13));  // inf / nan
  if (exp == 0) {                                                      // zero / subnormal
    float v = static_cast<float>(mant) * 0x1p-24f;                     // exact
    return sign ? -v : v;
  }
  return bits_f32(sign | ((exp + 112) << 23) | (mant << 13));  // rebias 15 → 127
}

uint16_t fp32_to_fp16(float f) {
  const uint32_t x = f32_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000;
  uint32_t a = x & 0x7fffffff;
  if (a > 0x7f800000) return static_cast<uint16_t>(sign | 0x7e00 | ((a >> 13) & 0x3ff));  // nan
  // 65520 (0x477ff000) is halfway between the largest half, 65504, and 2^16; the tie
  // goes to the even neighbour, which is infinity.
  if (a >= 0x477ff000) return static_cast<uint16_t>(sign | 0x7c00);
  if (a < 0x38800000) {
    // Below 2^-14 the result is subnormal: a multiple of 2^-24. Adding 0.5 puts the
    // value where one float ulp is 2^-24, so the FPU does the rounding (to nearest
    // even); the low bits of the sum are then the half's mantissa (0x400 = 2^-14).
    float v = bits_f32(a) + 0.5f;
    return static_cast<uint16_t>(sign | (f32_bits(v) - 0x3f000000));
  }
  // Normal: rebias the exponent (127 → 15) and round the 13 dropped bits to nearest
  // even; a mantissa carry correctly bumps the exponent.
  const uint32_t odd = (a >> 13) & 1;
  a += 0xc8000000u + 0xfff + odd;  // 0xc8000000 = -(112 << 23) mod 2^32
  return static_cast<uint16_t>(sign | (a >> 13));
}

// bfloat16: the top half of an F32.
float bf16_to_fp32(uint16_t h) { return bits_f32(static_cast<uint32_t>(h) << 16); }

uint16_t fp32_to_bf16(float f) {
  const uint32_t x = f32_bits(f);
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x40);  // quiet nan
  return static_cast<uint16_t>((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

namespace {

// ---------------------------------------------------------------------------
// Q8_0: 32 elements, x = d * q, q in [-127, 127].

void quantize_q8_0(const float* x, BlockQ8_0* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += 32) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    // The scale is stored as F16, but elements are scaled by the unrounded 127/amax
    // (as llama.cpp does): the SIMD activation quantizers in src/kernels produce
    // exactly these bytes.
    y[b].d = fp32_to_fp16(amax / 127.0f);
    const float id = amax != 0 ? 127.0f / amax : 0.0f;
    for (int j = 0; j < 32; ++j) y[b].qs[j] = static_cast<int8_t>(std::clamp(nearest_int(x[j] * id), -127, 127));
  }
}

void dequantize_q8_0(const BlockQ8_0* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += 32) {
    const float d = fp16_to_fp32(x[b].d);
    for (int j = 0; j < 32; ++j) y[j] = d * x[b].qs[j];
  }
}

// ---------------------------------------------------------------------------
// Q4_0: 32 elements, x = d * (q - 8), q in [0, 15]; element j < 16 in the low
// nibble of qs[j], element j + 16 in its high nibble. d = max / -8 where max is the
// element of largest magnitude (with its sign), so that element maps to q = 0.

void quantize_q4_0(const float* x, BlockQ4_0* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += 32) {
    float amax = 0, max = 0;
    for (int j = 0; j < 32; ++j)
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    y[b].d = fp32_to_fp16(max / -8.0f);
    const float d = fp16_to_fp32(y[b].d);
    const float id = d != 0 ? 1.0f / d : 0.0f;
    for (int j = 0; j < 16; ++j) {
      int q0 = std::clamp(nearest_int(x[j] * id) + 8, 0, 15);
      int q1 = std::clamp(nearest_int(x[j + 16] * id) + 8, 0, 15);
      y[b].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void dequantize_q4_0(const BlockQ4_0* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += 32) {
    const float d = fp16_to_fp32(x[b].d);
    for (int j = 0; j < 16; ++j) {
      y[j] = d * ((x[b].qs[j] & 0xf) - 8);
      y[j + 16] = d * ((x[b].qs[j] >> 4) - 8);
    }
  }
}

// ---------------------------------------------------------------------------
// Q4_K: 256 elements in 8 sub-blocks of 32. Sub-block j has a 6-bit scale sc[j] and
// 6-bit min m[j]: x = d*sc[j]*q - dmin*m[j], q in [0, 15]. The 12 scale bytes:
//   bytes 0-3:  sc[0..3] in bits 0-5, bits 4-5 of sc[4..7] in bits 6-7
//   bytes 4-7:  m[0..3]  in bits 0-5, bits 4-5 of m[4..7]  in bits 6-7
//   bytes 8-11: low 4 bits of sc[4..7] in bits 0-3, low 4 bits of m[4..7] in bits 4-7
// qs: each 64 elements take 32 bytes; the first 32 in low nibbles, the next 32 in
// high nibbles.

void q4k_get_scale_min(int j, const uint8_t* s, int& sc, int& m) {
  if (j < 4) {
    sc = s[j] & 63;
    m = s[j + 4] & 63;
  } else {
    sc = (s[j + 4] & 0xf) | ((s[j - 4] >> 6) << 4);
    m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

void q4k_pack_scales(const int* ls, const int* lm, uint8_t* s) {
  std::memset(s, 0, 12);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      s[j] = static_cast<uint8_t>(ls[j]);
      s[j + 4] = static_cast<uint8_t>(lm[j]);
    } else {
      s[j + 4] = static_cast<uint8_t>((ls[j] & 0xf) | ((lm[j] & 0xf) << 4));
      s[j - 4] |= static_cast<uint8_t>((ls[j] >> 4) << 6);
      s[j] |= static_cast<uint8_t>((lm[j] >> 4) << 6);
    }
  }
}

void quantize_q4_k_block(const float* x, BlockQ4_K* y) {
  // Per sub-block: cover [min(x, 0), max(x)] with 16 levels. The min is stored as a
  // non-negative offset, so a sub-block that is all positive starts at 0.
  float scale[8], minv[8], max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    const float* v = x + 32 * j;
    float lo = std::min(0.0f, *std::min_element(v, v + 32));
    float hi = *std::max_element(v, v + 32);
    scale[j] = (hi - lo) / 15.0f;
    minv[j] = -lo;
    max_scale = std::max(max_scale, scale[j]);
    max_min = std::max(max_min, minv[j]);
  }
  // Quantize the 8 scales and mins to 6 bits against the super-block maxima.
  const float is = max_scale > 0 ? 63.0f / max_scale : 0.0f;
  const float im = max_min > 0 ? 63.0f / max_min : 0.0f;
  int ls[8], lm[8];
  for (int j = 0; j < 8; ++j) {
    ls[j] = std::min(63, nearest_int(is * scale[j]));
    lm[j] = std::min(63, nearest_int(im * minv[j]));
  }
  y->d = fp32_to_fp16(max_scale / 63.0f);
  y->dmin = fp32_to_fp16(max_min / 63.0f);
  q4k_pack_scales(ls, lm, y->scales);
  // Quantize each element with the effective (stored) sub-block scale and min.
  const float d = fp16_to_fp32(y->d), dmin = fp16_to_fp32(y->dmin);
  uint8_t q[256];
  for (int j = 0; j < 8; ++j) {
    const float dj = d * ls[j], mj = dmin * lm[j];
    const float idj = dj != 0 ? 1.0f / dj : 0.0f;
    for (int l = 0; l < 32; ++l)
      q[32 * j + l] = static_cast<uint8_t>(std::clamp(nearest_int((x[32 * j + l] + mj) * idj), 0, 15));
  }
  for (int c = 0; c < 256; c += 64)
    for (int l = 0; l < 32; ++l) y->qs[c / 2 + l] = static_cast<uint8_t>(q[c + l] | (q[c + l + 32] << 4));
}

void dequantize_q4_k(const BlockQ4_K* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = fp16_to_fp32(x[b].d), dmin = fp16_to_fp32(x[b].dmin);
    const uint8_t* q = x[b].qs;
    for (int c = 0, j = 0; c < 256; c += 64, j += 2, q += 32) {
      int sc, m;
      q4k_get_scale_min(j, x[b].scales, sc, m);
      const float d1 = d * sc, m1 = dmin * m;
      q4k_get_scale_min(j + 1, x[b].scales, sc, m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xf) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
    }
  }
}

// ---------------------------------------------------------------------------
// Q6_K: 256 elements in 16 sub-blocks of 16; x = d * scales[i] * (q - 32) with
// q in [0, 63] and scales int8. Per 128 elements (n = 0, 128), for l in [0, 32):
//   ql[n/2 + l]      = q[n+l] & 15      | (q[n+l+64] & 15) << 4
//   ql[n/2 + l + 32] = q[n+l+32] & 15   | (q[n+l+96] & 15) << 4
//   qh[n/4 + l]      = q[n+l] >> 4 | (q[n+l+32] >> 4) << 2 | (q[n+l+64] >> 4) << 4 | (q[n+l+96] >> 4) << 6

void quantize_q6_k_block(const float* x, BlockQ6_K* y) {
  // Sub-block scale maps its largest-magnitude element to -32 (the full range).
  float scale[16], max_scale = 0, amax_scale = 0;
  for (int i = 0; i < 16; ++i) {
    float amax = 0, max = 0;
    for (int l = 0; l < 16; ++l)
      if (std::fabs(x[16 * i + l]) > amax) {
        amax = std::fabs(x[16 * i + l]);
        max = x[16 * i + l];
      }
    scale[i] = max / -32.0f;
    if (std::fabs(scale[i]) > amax_scale) {
      amax_scale = std::fabs(scale[i]);
      max_scale = scale[i];
    }
  }
  std::memset(y, 0, sizeof *y);
  if (amax_scale == 0) return;  // all zero: d = 0
  const float iscale = -128.0f / max_scale;  // the largest scale becomes -128
  y->d = fp32_to_fp16(1.0f / iscale);
  for (int i = 0; i < 16; ++i)
    y->scales[i] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scale[i])));
  const float d = fp16_to_fp32(y->d);
  uint8_t q[256];
  for (int i = 0; i < 16; ++i) {
    const float di = d * y->scales[i];
    const float idi = di != 0 ? 1.0f / di : 0.0f;
    for (int l = 0; l < 16; ++l)
      q[16 * i + l] = static_cast<uint8_t>(std::clamp(nearest_int(x[16 * i + l] * idi), -32, 31) + 32);
  }
  for (int n = 0; n < 256; n += 128)
    for (int l = 0; l < 32; ++l) {
      const uint8_t q1 = q[n + l], q2 = q[n + l + 32], q3 = q[n + l + 64], q4 = q[n + l + 96];
      y->ql[n / 2 + l] = static_cast<uint8_t>((q1 & 0xf) | ((q3 & 0xf) << 4));
      y->ql[n / 2 + l + 32] = static_cast<uint8_t>((q2 & 0xf) | ((q4 & 0xf) << 4));
      y->qh[n / 4 + l] = static_cast<uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
    }
}

void dequantize_q6_k(const BlockQ6_K* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = fp16_to_fp32(x[b].d);
    const uint8_t* ql = x[b].ql;
    const uint8_t* qh = x[b].qh;
    const int8_t* sc = x[b].scales;
    for (int n = 0; n < 256; n += 128, y += 128, ql += 64, qh += 32, sc += 8)
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xf) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * sc[is] * q1;
        y[l + 32] = d * sc[is + 2] * q2;
        y[l + 64] = d * sc[is + 4] * q3;
        y[l + 96] = d * sc[is + 6] * q4;
      }
  }
}

// ---------------------------------------------------------------------------
// Q8_K: 256 elements, x = d * q with an F32 d; bsums[i] = sum of q[16i .. 16i+15].

void quantize_q8_k(const float* x, BlockQ8_K* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += 256) {
    float amax = 0;
    for (int j = 0; j < 256; ++j) amax = std::max(amax, std::fabs(x[j]));
    y[b].d = amax / 127.0f;
    const float id = amax != 0 ? 127.0f / amax : 0.0f;
    for (int j = 0; j < 256; ++j) y[b].qs[j] = static_cast<int8_t>(std::clamp(nearest_int(x[j] * id), -127, 127));
    for (int i = 0; i < 16; ++i) {
      int s = 0;
      for (int l = 0; l < 16; ++l) s += y[b].qs[16 * i + l];
      y[b].bsums[i] = static_cast<int16_t>(s);
    }
  }
}

void dequantize_q8_k(const BlockQ8_K* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += 256)
    for (int j = 0; j < 256; ++j) y[j] = x[b].d * x[b].qs[j];
}

void check_row(const char* fn, GgmlType type, int64_t n) {
  const int64_t be = ggml_block_elems(type);
  if (be == 0 || n < 0 || n % be != 0)
    throw Error(std::string(fn) + ": " + std::to_string(n) + " elements is not a whole number of " +
                ggml_type_name(type) + " blocks");
}

}  // namespace

void dequantize_row(GgmlType type, const void* src, float* dst, int64_t n) {
  check_row("dequantize_row", type, n);
  const int64_t nb = n / ggml_block_elems(type);
  switch (type) {
    case GgmlType::F32: std::memcpy(dst, src, n * sizeof(float)); return;
    case GgmlType::F16: {
      const uint16_t* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(s[i]);
      return;
    }
    case GgmlType::BF16: {
      const uint16_t* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(s[i]);
      return;
    }
    case GgmlType::Q8_0: dequantize_q8_0(static_cast<const BlockQ8_0*>(src), dst, nb); return;
    case GgmlType::Q4_0: dequantize_q4_0(static_cast<const BlockQ4_0*>(src), dst, nb); return;
    case GgmlType::Q4_K: dequantize_q4_k(static_cast<const BlockQ4_K*>(src), dst, nb); return;
    case GgmlType::Q6_K: dequantize_q6_k(static_cast<const BlockQ6_K*>(src), dst, nb); return;
    case GgmlType::Q8_K: dequantize_q8_k(static_cast<const BlockQ8_K*>(src), dst, nb); return;
    default: throw Error("dequantize_row: unsupported type " + ggml_type_name(type));
  }
}

void quantize_row(GgmlType type, const float* src, void* dst, int64_t n) {
  check_row("quantize_row", type, n);
  const int64_t nb = n / ggml_block_elems(type);
  switch (type) {
    case GgmlType::F32: std::memcpy(dst, src, n * sizeof(float)); return;
    case GgmlType::F16: {
      uint16_t* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = fp32_to_fp16(src[i]);
      return;
    }
    case GgmlType::BF16: {
      uint16_t* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = fp32_to_bf16(src[i]);
      return;
    }
    case GgmlType::Q8_0: quantize_q8_0(src, static_cast<BlockQ8_0*>(dst), nb); return;
    case GgmlType::Q4_0: quantize_q4_0(src, static_cast<BlockQ4_0*>(dst), nb); return;
    case GgmlType::Q4_K:
      for (int64_t b = 0; b < nb; ++b) quantize_q4_k_block(src + 256 * b, static_cast<BlockQ4_K*>(dst) + b);
      return;
    case GgmlType::Q6_K:
      for (int64_t b = 0; b < nb; ++b) quantize_q6_k_block(src + 256 * b, static_cast<BlockQ6_K*>(dst) + b);
      return;
    case GgmlType::Q8_K: quantize_q8_k(src, static_cast<BlockQ8_K*>(dst), nb); return;
    default: throw Error("quantize_row: unsupported type " + ggml_type_name(type));
  }
}

}  // namespace pc
