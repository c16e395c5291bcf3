// The formats Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4, Q5_K and IQ4_XS: dequantization
// equals the GGUF reference definitions (ggml-common.h / ggml-quants.c) bit for
// bit on random blocks and on edge blocks (scales of 0, largest and smallest
// codes, every E8M0 exponent), and the quantizers round-trip within their step.
//
// The reference here is written independently of src/gguf: it reads each block
// as raw bytes at the format's offsets and evaluates the definition's expression
// exactly in double, then rounds once to float. Every product in those
// definitions is exact in float (scale significands of at most 11 + 6 bits
// times codes of at most 7), so the reference C code's float result is that
// same single rounding of the exact value (with or without FMA contraction).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "common/error.h"
#include "gguf/quants.h"

namespace pc {
namespace {

// IEEE half -> double, from the bit fields.
double half(const uint8_t* p) {
  const int h = p[0] | (p[1] << 8);
  const int sign = h >> 15, exp = (h >> 10) & 31, mant = h & 1023;
  double v = exp == 0 ? std::ldexp(mant, -24) : std::ldexp(1024 + mant, exp - 25);
  if (exp == 31) v = mant ? NAN : INFINITY;
  return sign ? -v : v;
}

const int kIq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
// E2M1: sign bit 3, then exponent (bits 1-2, bias 1) and mantissa (bit 0), doubled.
// Code 8 (E2M1's -0) is +0: ggml's table of doubled values holds an integer 0.
double e2m1_doubled(int code) {
  const int e = (code >> 1) & 3, m = code & 1;
  const double mag = e == 0 ? m * 0.5 : std::ldexp(1.0 + m * 0.5, e - 1);
  return mag == 0 ? 0.0 : (code & 8 ? -2.0 : 2.0) * mag;
}

// Code of element j (0..31) of a 32-group whose 16 code bytes start at qs.
int code(const uint8_t* qs, int j) { return j < 16 ? qs[j] & 15 : qs[j - 16] >> 4; }

// Reference values of one block of `t` at p.
std::vector<double> reference(GgmlType t, const uint8_t* p) {
  std::vector<double> y;
  switch (t) {
    case GgmlType::Q4_1:  // d, m, qs[16]
      for (int j = 0; j < 32; ++j) y.push_back(code(p + 4, j) * half(p) + half(p + 2));
      break;
    case GgmlType::Q5_0:
    case GgmlType::Q5_1: {  // d, [m], qh (uint32 LE), qs[16]
      const bool q51 = t == GgmlType::Q5_1;
      const uint8_t* qh = p + (q51 ? 4 : 2);
      const uint32_t h = qh[0] | qh[1] << 8 | qh[2] << 16 | uint32_t(qh[3]) << 24;
      for (int j = 0; j < 32; ++j) {
        const int q = code(qh + 4, j) | ((h >> j) & 1) << 4;
        y.push_back(q51 ? q * half(p) + half(p + 2) : (q - 16) * half(p));
      }
      break;
    }
    case GgmlType::IQ4_NL:  // d, qs[16]
      for (int j = 0; j < 32; ++j) y.push_back(half(p) * kIq4nl[code(p + 2, j)]);
      break;
    case GgmlType::MXFP4:  // e, qs[16]: 2^(e-127) times the E2M1 value
      for (int j = 0; j < 32; ++j) y.push_back(std::ldexp(e2m1_doubled(code(p + 1, j)) / 2, p[0] - 127));
      break;
    case GgmlType::Q5_K: {  // d, dmin, scales[12], qh[32], qs[128]
      const uint8_t* s = p + 4;
      for (int i = 0; i < 256; ++i) {
        const int sub = i / 32, c = i / 64, l = i % 32, high_half = (i / 32) % 2;
        int sc, mn;
        if (sub < 4) {
          sc = s[sub] & 63;
          mn = s[sub + 4] & 63;
        } else {
          sc = (s[sub + 4] & 15) | (s[sub - 4] >> 6) << 4;
          mn = (s[sub + 4] >> 4) | (s[sub] >> 6) << 4;
        }
        const uint8_t ql = p[48 + 32 * c + l];
        const int q = (high_half ? ql >> 4 : ql & 15) | ((p[16 + l] >> (2 * c + high_half)) & 1) << 4;
        y.push_back(half(p) * sc * q - half(p + 2) * mn);
      }
      break;
    }
    case GgmlType::IQ4_XS: {  // d, scales_h (u16 LE), scales_l[4], qs[128]
      const int sh = p[2] | p[3] << 8;
      for (int i = 0; i < 256; ++i) {
        const int sub = i / 32;
        const int ls = ((p[4 + sub / 2] >> (4 * (sub % 2))) & 15) | ((sh >> (2 * sub)) & 3) << 4;
        y.push_back(half(p) * (ls - 32) * kIq4nl[code(p + 8 + 16 * sub, i % 32)]);
      }
      break;
    }
    default: ADD_FAILURE() << "no reference for " << ggml_type_name(t);
  }
  return y;
}

const GgmlType kNewTypes[] = {GgmlType::Q4_1, GgmlType::Q5_0,  GgmlType::Q5_1,  GgmlType::IQ4_NL,
                              GgmlType::MXFP4, GgmlType::Q5_K, GgmlType::IQ4_XS};

// Byte offsets of the F16 fields of a block (d, and m / dmin where present).
std::vector<int> half_fields(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_1:
    case GgmlType::Q5_1:
    case GgmlType::Q5_K: return {0, 2};
    case GgmlType::MXFP4: return {};
    default: return {0};
  }
}

void put_half(uint8_t* p, uint16_t h) {
  p[0] = uint8_t(h);
  p[1] = uint8_t(h >> 8);
}

// Random bytes, with each F16 field a random finite half (a tenth of them 0,
// another tenth the largest, 65504, or its negative).
std::vector<uint8_t> random_blocks(GgmlType t, int64_t nb, uint64_t seed) {
  std::mt19937_64 gen(seed);
  const int64_t bytes = ggml_block_bytes(t);
  std::vector<uint8_t> data(nb * bytes);
  for (uint8_t& b : data) b = uint8_t(gen());
  for (int64_t b = 0; b < nb; ++b)
    for (int off : half_fields(t)) {
      uint16_t h;
      do h = uint16_t(gen()); while (((h >> 10) & 31) == 31);
      const int pick = int(gen() % 10);
      if (pick == 0) h = 0;
      if (pick == 1) h = gen() % 2 ? 0x7bff : 0xfbff;
      put_half(&data[b * bytes + off], h);
    }
  return data;
}

void expect_reference(GgmlType t, const std::vector<uint8_t>& data, const char* what) {
  const int64_t bytes = ggml_block_bytes(t), be = ggml_block_elems(t);
  const int64_t nb = int64_t(data.size()) / bytes;
  std::vector<float> y(nb * be);
  dequantize_row(t, data.data(), y.data(), nb * be);
  for (int64_t b = 0; b < nb; ++b) {
    const std::vector<double> ref = reference(t, data.data() + b * bytes);
    for (int64_t i = 0; i < be; ++i) {
      const float want = static_cast<float>(ref[i]);
      ASSERT_EQ(std::memcmp(&y[b * be + i], &want, 4), 0)
          << ggml_type_name(t) << " " << what << " block " << b << " element " << i << ": " << y[b * be + i]
          << " want " << want;
    }
  }
}

TEST(QuantFormats, RandomBlocksMatchReferenceBitwise) {
  for (GgmlType t : kNewTypes) expect_reference(t, random_blocks(t, 4000 / (ggml_block_elems(t) / 32), 11), "random");
}

// Edge blocks: every code byte 0x00 (smallest code) or 0xFF (largest), with
// scales of 0, 1, the largest half and negative ones; every E8M0 exponent.
TEST(QuantFormats, EdgeBlocksMatchReferenceBitwise) {
  for (GgmlType t : kNewTypes) {
    const int64_t bytes = ggml_block_bytes(t);
    std::vector<uint8_t> data;
    const uint16_t scales[] = {0x0000, 0x8000, 0x3c00, 0x7bff, 0xfbff, 0x0001};
    for (uint8_t fill : {uint8_t(0x00), uint8_t(0xFF), uint8_t(0x0F), uint8_t(0xF0)})
      for (uint16_t d : scales)
        for (uint16_t m : scales) {
          std::vector<uint8_t> blk(bytes, fill);
          const std::vector<int> fields = half_fields(t);
          if (!fields.empty()) put_half(&blk[fields[0]], d);
          if (fields.size() > 1) put_half(&blk[fields[1]], m);
          data.insert(data.end(), blk.begin(), blk.end());
        }
    if (t == GgmlType::MXFP4)
      for (int e = 0; e < 256; ++e) {
        std::vector<uint8_t> blk(bytes);
        blk[0] = uint8_t(e);
        for (int j = 0; j < 16; ++j) blk[1 + j] = uint8_t(j | (15 - j) << 4);  // every code
        data.insert(data.end(), blk.begin(), blk.end());
      }
    expect_reference(t, data, "edge");
  }
}

// A few values written out from the format descriptions.
TEST(QuantFormats, HandBuiltBlocks) {
  {  // Q5_0: bit e of qh is bit 4 of element e's level; element 17 is qs[1]'s high nibble.
    BlockQ5_0 b{};
    b.d = fp32_to_fp16(0.5f);
    b.qs[1] = 0x30;                  // element 1: 0, element 17: 3
    b.qh[2] = 0x02;                  // bit 17
    float y[32];
    dequantize_row(GgmlType::Q5_0, &b, y, 32);
    EXPECT_EQ(y[1], 0.5f * (0 - 16));
    EXPECT_EQ(y[17], 0.5f * (3 + 16 - 16));
    EXPECT_EQ(y[16], 0.5f * -16);
  }
  {  // MXFP4 with e = 127 (scale 2^0): the E2M1 values themselves.
    BlockMXFP4 b{};
    b.e = 127;
    for (int j = 0; j < 16; ++j) b.qs[j] = uint8_t(j);
    float y[32];
    dequantize_row(GgmlType::MXFP4, &b, y, 32);
    const float e2m1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, 0, -0.5f, -1, -1.5f, -2, -3, -4, -6};
    for (int j = 0; j < 16; ++j) EXPECT_EQ(y[j], e2m1[j]) << j;
    EXPECT_EQ(e8m0_half_to_fp32(0), 0x1p-128f);
    EXPECT_EQ(e8m0_half_to_fp32(1), 0x1p-127f);
    EXPECT_EQ(e8m0_half_to_fp32(255), 0x1p127f);
  }
  {  // IQ4_XS: sub-block 3's scale ls = 0x5 | 2 << 4 = 37 → d * 5.
    BlockIQ4_XS b{};
    b.d = fp32_to_fp16(0.25f);
    b.scales_l[1] = 0x50;
    b.scales_h = uint16_t(2 << 6);
    b.qs[16 * 3] = 0xF0;             // sub-block 3: element 0 code 0, element 16 code 15
    float y[256];
    dequantize_row(GgmlType::IQ4_XS, &b, y, 256);
    EXPECT_EQ(y[96], 0.25f * 5 * -127);
    EXPECT_EQ(y[96 + 16], 0.25f * 5 * 113);
    EXPECT_EQ(y[0], 0.25f * -32 * -127);  // ls 0: scale -32
  }
}

std::vector<float> gaussian(size_t n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = dist(gen);
  return x;
}

double rel_rmse_after_round_trip(GgmlType t, const std::vector<float>& x) {
  const int64_t n = int64_t(x.size());
  std::vector<uint8_t> q(ggml_row_bytes(t, n));
  quantize_row(t, x.data(), q.data(), n);
  std::vector<float> y(n);
  dequantize_row(t, q.data(), y.data(), n);
  double e = 0, s = 0;
  for (int64_t i = 0; i < n; ++i) {
    e += double(y[i] - x[i]) * (y[i] - x[i]);
    s += double(x[i]) * x[i];
  }
  return std::sqrt(e / s);
}

// Relative RMS error of quantize → dequantize on Gaussian data: about half a
// step of each format (4-bit codes ~0.1, 5-bit ~0.05; MXFP4's power-of-two
// scales and 8 magnitudes ~0.15).
TEST(QuantFormats, RoundTrip) {
  struct Bound { GgmlType t; double max; } bounds[] = {
      {GgmlType::Q4_1, 0.12}, {GgmlType::Q5_0, 0.06},  {GgmlType::Q5_1, 0.06}, {GgmlType::IQ4_NL, 0.12},
      {GgmlType::MXFP4, 0.2}, {GgmlType::Q5_K, 0.06}, {GgmlType::IQ4_XS, 0.12},
  };
  const std::vector<float> x = gaussian(8192, 3);
  for (const Bound& b : bounds) {
    const double e = rel_rmse_after_round_trip(b.t, x);
    EXPECT_LT(e, b.max) << ggml_type_name(b.t);
    EXPECT_GT(e, 0.0) << ggml_type_name(b.t);
  }
  // Zero rows quantize to zeros, constant rows to nearly the constant.
  for (GgmlType t : kNewTypes) {
    std::vector<float> zero(512, 0.0f), y(512);
    std::vector<uint8_t> q(ggml_row_bytes(t, 512));
    quantize_row(t, zero.data(), q.data(), 512);
    dequantize_row(t, q.data(), y.data(), 512);
    for (float v : y) ASSERT_EQ(v, 0.0f) << ggml_type_name(t);
    std::vector<float> cst(512, -1.5f);
    quantize_row(t, cst.data(), q.data(), 512);
    dequantize_row(t, q.data(), y.data(), 512);
    for (float v : y) ASSERT_NEAR(v, -1.5f, 0.05f) << ggml_type_name(t);
  }
}

TEST(QuantFormats, SupportedAndNamed) {
  for (GgmlType t : kNewTypes) EXPECT_TRUE(ggml_type_supported(t)) << ggml_type_name(t);
  EXPECT_FALSE(ggml_type_supported(GgmlType::Q3_K));
  EXPECT_EQ(ggml_type_name(GgmlType::MXFP4), "MXFP4");
  EXPECT_EQ(ggml_block_bytes(GgmlType::MXFP4), 17);
  EXPECT_NE(ggml_supported_type_names().find("IQ4_XS"), std::string::npos);
}

}  // namespace
}  // namespace pc
