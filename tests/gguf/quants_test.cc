// Reference conversions: fp16/bf16 exactness, bit layouts of each block type built
// by hand, quantize→dequantize error bounds, and the real Q8_0 model's weights.
#include "gguf/quants.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "gguf/gguf.h"
#include "test_util.h"

namespace pc {
namespace {

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(Quants, Fp16KnownValues) {
  struct { float f; uint16_t h; } cases[] = {
      {0.0f, 0x0000}, {-0.0f, 0x8000}, {1.0f, 0x3c00}, {-2.0f, 0xc000}, {0.5f, 0x3800},
      {65504.0f, 0x7bff}, {0.1f, 0x2e66}, {1.0f / 3, 0x3555}, {0x1p-14f, 0x0400},
      {0x1p-24f, 0x0001}, {0x1.ff8p-15f, 0x03ff}, {-0x1p-24f, 0x8001},
      {INFINITY, 0x7c00}, {-INFINITY, 0xfc00},
      {65519.99f, 0x7bff}, {65520.0f, 0x7c00}, {1e6f, 0x7c00},  // overflow ties to inf
      {1.0f + 0x1p-11f, 0x3c00},         // tie → even (down)
      {1.0f + 3 * 0x1p-11f, 0x3c02},     // tie → even (up)
      {1.0f + 0x1p-11f + 0x1p-20f, 0x3c01},
      {0x1p-25f, 0x0000},                // tie between 0 and the smallest subnormal → 0
      {0x1.8p-25f, 0x0001},              // above the tie → smallest subnormal
      {3 * 0x1p-25f, 0x0002},            // 1.5 ulp: tie → even (2)
      {0x1.ffcp-15f, 0x0400},            // rounds up out of the subnormals
      {1e-10f, 0x0000},
  };
  for (auto& c : cases) {
    EXPECT_EQ(fp32_to_fp16(c.f), c.h) << c.f;
  }
  EXPECT_EQ(fp16_to_fp32(0x0001), 0x1p-24f);
  EXPECT_EQ(fp16_to_fp32(0x03ff), 0x1.ff8p-15f);
  EXPECT_EQ(fp16_to_fp32(0x7bff), 65504.0f);
  EXPECT_EQ(fp16_to_fp32(0xfc00), -INFINITY);
  EXPECT_TRUE(std::signbit(fp16_to_fp32(0x8000)));
  EXPECT_TRUE(std::isnan(fp16_to_fp32(0x7e00)));
  EXPECT_TRUE(std::isnan(fp16_to_fp32(fp32_to_fp16(NAN))));
  EXPECT_TRUE(std::isnan(fp16_to_fp32(fp32_to_fp16(from_bits(0x7f800001)))));  // signalling payload
}

TEST(Quants, Fp16AllValuesRoundTrip) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float f = fp16_to_fp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(fp32_to_fp16(f), h) << std::hex << h;
  }
}

#if defined(__FLT16_MAX__)
// The compiler's own float → _Float16 conversion rounds to nearest even too.
TEST(Quants, Fp16MatchesCompilerConversion) {
  std::mt19937 gen(7);
  for (int i = 0; i < 2000000; ++i) {
    uint32_t bits = gen();
    if (i % 2) bits = (bits & 0x87ffffffu) | 0x30000000u;  // half the cases near the half range
    float f = from_bits(bits);
    if (std::isnan(f)) continue;
    _Float16 h = static_cast<_Float16>(f);
    uint16_t hb;
    std::memcpy(&hb, &h, 2);
    ASSERT_EQ(fp32_to_fp16(f), hb) << std::hexfloat << f;
    ASSERT_EQ(fp16_to_fp32(hb), static_cast<float>(h));
  }
}
#endif

TEST(Quants, Bf16) {
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(fp32_to_bf16(-2.0f), 0xc000);
  EXPECT_EQ(fp32_to_bf16(from_bits(0x3f808000)), 0x3f80);  // tie → even (down)
  EXPECT_EQ(fp32_to_bf16(from_bits(0x3f818000)), 0x3f82);  // tie → even (up)
  EXPECT_EQ(fp32_to_bf16(from_bits(0x3f808001)), 0x3f81);
  EXPECT_EQ(fp32_to_bf16(INFINITY), 0x7f80);
  EXPECT_EQ(fp32_to_bf16(from_bits(0x7f7fffff)), 0x7f80);  // max float rounds to inf
  EXPECT_EQ(fp32_to_bf16(from_bits(0x00010000)), 0x0001);  // subnormal kept
  EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(NAN))));
  EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(from_bits(0x7f800001)))));
  for (uint32_t h = 0; h < 65536; ++h) {
    float f = bf16_to_fp32(static_cast<uint16_t>(h));
    if (!std::isnan(f)) {
      ASSERT_EQ(fp32_to_bf16(f), h);
    }
  }
}

// --- bit layouts, from blocks built by hand -------------------------------------

TEST(Quants, Q4_0Layout) {
  BlockQ4_0 b;
  b.d = fp32_to_fp16(0.5f);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float y[32];
  dequantize_row(GgmlType::Q4_0, &b, y, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * (j - 8));
    EXPECT_EQ(y[j + 16], 0.5f * (15 - j - 8));
  }
}

TEST(Quants, Q8_0Layout) {
  BlockQ8_0 b[2];
  for (int k = 0; k < 2; ++k) {
    b[k].d = fp32_to_fp16(k ? 0.25f : 2.0f);
    for (int j = 0; j < 32; ++j) b[k].qs[j] = static_cast<int8_t>(j * 8 - 128);
  }
  float y[64];
  dequantize_row(GgmlType::Q8_0, b, y, 64);
  for (int j = 0; j < 32; ++j) {
    EXPECT_EQ(y[j], 2.0f * (j * 8 - 128));
    EXPECT_EQ(y[32 + j], 0.25f * (j * 8 - 128));
  }
}

// Q4_K scale bytes written from the format description (not from the quantizer):
// sub-block j < 4: scale in s[j] bits 0-5, min in s[j+4] bits 0-5; j >= 4: low 4
// bits of scale / min in s[j+4] bits 0-3 / 4-7, high 2 bits in bits 6-7 of s[j-4] /
// s[j].
TEST(Quants, Q4_KLayout) {
  const int sc[8] = {1, 17, 33, 63, 5, 40, 20, 60};
  const int mn[8] = {2, 18, 34, 62, 7, 50, 31, 45};
  BlockQ4_K b{};
  b.d = fp32_to_fp16(0.5f);
  b.dmin = fp32_to_fp16(0.25f);
  for (int j = 0; j < 4; ++j) {
    b.scales[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    b.scales[j + 4] = static_cast<uint8_t>(mn[j] | ((mn[j + 4] >> 4) << 6));
    b.scales[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4));
  }
  for (int i = 0; i < 128; ++i) b.qs[i] = static_cast<uint8_t>((i * 7 + 3) & 0xff);
  float y[256];
  dequantize_row(GgmlType::Q4_K, &b, y, 256);
  for (int e = 0; e < 256; ++e) {
    const int j = e / 32, chunk = e / 64, l = e % 32;
    const uint8_t byte = b.qs[chunk * 32 + l];
    const int q = (e % 64) < 32 ? byte & 15 : byte >> 4;
    ASSERT_EQ(y[e], 0.5f * sc[j] * q - 0.25f * mn[j]) << e;
  }
  // The quantizer's own packing decodes to the same sub-block structure.
  std::vector<float> x(256);
  for (int e = 0; e < 256; ++e) x[e] = 0.5f * sc[e / 32] * ((e * 5) % 16) - 0.25f * mn[e / 32];
  BlockQ4_K r;
  quantize_row(GgmlType::Q4_K, x.data(), &r, 256);
  dequantize_row(GgmlType::Q4_K, &r, y, 256);
  for (int e = 0; e < 256; ++e) EXPECT_NEAR(y[e], x[e], 0.35f) << e;
}

// Q6_K: element e (within its half n = e / 128 * 128, l = e % 32, group g = e % 128 / 32)
// keeps its low 4 bits in ql[n/2 + l + 32*(g&1)] (low nibble for g < 2, high for g >= 2)
// and its high 2 bits in qh[n/4 + l] at bit 2*g; scale index e / 16.
TEST(Quants, Q6_KLayout) {
  BlockQ6_K b{};
  b.d = fp32_to_fp16(0.125f);
  for (int i = 0; i < 16; ++i) b.scales[i] = static_cast<int8_t>(i * 17 - 128);
  int q[256];
  for (int e = 0; e < 256; ++e) q[e] = (e * 37 + 11) % 64;
  for (int e = 0; e < 256; ++e) {
    const int n = e / 128 * 128, l = e % 32, g = e % 128 / 32;
    uint8_t& lo = b.ql[n / 2 + l + 32 * (g & 1)];
    lo |= static_cast<uint8_t>((q[e] & 15) << (g >= 2 ? 4 : 0));
    b.qh[n / 4 + l] |= static_cast<uint8_t>((q[e] >> 4) << (2 * g));
  }
  float y[256];
  dequantize_row(GgmlType::Q6_K, &b, y, 256);
  for (int e = 0; e < 256; ++e) ASSERT_EQ(y[e], 0.125f * b.scales[e / 16] * (q[e] - 32)) << e;
  // Requantizing stays close (the quantizer chooses its own scales).
  BlockQ6_K r;
  quantize_row(GgmlType::Q6_K, y, &r, 256);
  float y2[256];
  dequantize_row(GgmlType::Q6_K, &r, y2, 256);
  for (int e = 0; e < 256; ++e)  // within one of the original quantization steps
    EXPECT_NEAR(y2[e], y[e], 0.125f * std::abs(b.scales[e / 16]) + 1e-6f) << e;
}

TEST(Quants, Q8_KBsums) {
  std::vector<float> x(512);
  for (int i = 0; i < 512; ++i) x[i] = std::sin(i * 0.37f) * (i < 256 ? 3.0f : 0.01f);
  BlockQ8_K b[2];
  quantize_row(GgmlType::Q8_K, x.data(), b, 512);
  for (int k = 0; k < 2; ++k)
    for (int i = 0; i < 16; ++i) {
      int s = 0;
      for (int l = 0; l < 16; ++l) s += b[k].qs[16 * i + l];
      EXPECT_EQ(b[k].bsums[i], s);
    }
}

// --- round-trip error bounds -------------------------------------------------------

std::vector<float> gaussian(size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> x(n);
  for (float& v : x) v = dist(gen);
  return x;
}

std::vector<float> round_trip(GgmlType t, const std::vector<float>& x, std::vector<uint8_t>* q = nullptr) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> buf(ggml_row_bytes(t, n));
  quantize_row(t, x.data(), buf.data(), n);
  std::vector<float> y(n);
  dequantize_row(t, buf.data(), y.data(), n);
  if (q) *q = buf;
  return y;
}

double rel_rmse(const std::vector<float>& x, const std::vector<float>& y) {
  double e = 0, s = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    e += (x[i] - y[i]) * double(x[i] - y[i]);
    s += x[i] * double(x[i]);
  }
  return std::sqrt(e / s);
}

TEST(Quants, RoundTripFloatTypes) {
  const auto x = gaussian(1024, 1, 3.0f);
  EXPECT_EQ(round_trip(GgmlType::F32, x), x);
  const auto h = round_trip(GgmlType::F16, x);
  const auto b = round_trip(GgmlType::BF16, x);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_LE(std::fabs(h[i] - x[i]), std::fabs(x[i]) * 0x1p-11f + 0x1p-25f);
    EXPECT_LE(std::fabs(b[i] - x[i]), std::fabs(x[i]) * 0x1p-8f);
  }
}

TEST(Quants, RoundTripQ8_0) {
  const auto x = gaussian(4096, 2);
  std::vector<uint8_t> q;
  const auto y = round_trip(GgmlType::Q8_0, x, &q);
  const BlockQ8_0* b = reinterpret_cast<const BlockQ8_0*>(q.data());
  // Elements are scaled by the unrounded 127/amax but rebuilt with the F16 scale d:
  // half a step, plus up to 127 × (d's F16 rounding, 2^-11 relative) ≈ 0.062 d.
  for (size_t i = 0; i < x.size(); ++i)
    ASSERT_LE(std::fabs(y[i] - x[i]), fp16_to_fp32(b[i / 32].d) * 0.57f + 1e-6f) << i;
  EXPECT_LT(rel_rmse(x, y), 0.01);
}

TEST(Quants, RoundTripQ8_K) {
  const auto x = gaussian(4096, 3);
  std::vector<uint8_t> q;
  const auto y = round_trip(GgmlType::Q8_K, x, &q);
  const BlockQ8_K* b = reinterpret_cast<const BlockQ8_K*>(q.data());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_LE(std::fabs(y[i] - x[i]), b[i / 256].d * 0.5f * 1.0001f + 1e-7f) << i;
}

TEST(Quants, RoundTripQ4_0) {
  const auto x = gaussian(4096, 4);
  std::vector<uint8_t> q;
  const auto y = round_trip(GgmlType::Q4_0, x, &q);
  const BlockQ4_0* b = reinterpret_cast<const BlockQ4_0*>(q.data());
  for (size_t i = 0; i < x.size(); ++i)  // one step at most (the clamped +8 end), else half
    ASSERT_LE(std::fabs(y[i] - x[i]), std::fabs(fp16_to_fp32(b[i / 32].d)) * 1.0f + 1e-6f) << i;
  EXPECT_LT(rel_rmse(x, y), 0.10);
}

TEST(Quants, RoundTripQ4_K) {
  const auto x = gaussian(8192, 5);
  const auto y = round_trip(GgmlType::Q4_K, x);
  EXPECT_LT(rel_rmse(x, y), 0.10);
  // Shifted data (all positive sub-blocks) and mixed magnitudes across sub-blocks.
  auto z = gaussian(4096, 6);
  for (size_t i = 0; i < z.size(); ++i) z[i] = z[i] * ((i / 32) % 3 + 1) + ((i / 256) % 2 ? 5.0f : 0.0f);
  EXPECT_LT(rel_rmse(z, round_trip(GgmlType::Q4_K, z)), 0.10);
}

TEST(Quants, RoundTripQ6_K) {
  const auto x = gaussian(8192, 7);
  std::vector<uint8_t> q;
  const auto y = round_trip(GgmlType::Q6_K, x, &q);
  EXPECT_LT(rel_rmse(x, y), 0.03);
  const BlockQ6_K* b = reinterpret_cast<const BlockQ6_K*>(q.data());
  // Half a step, except where the sub-block scale's 8-bit rounding made the range a
  // little short and the element was clamped at a level (-32 or 31).
  for (size_t i = 0; i < x.size(); ++i) {
    const float step = std::fabs(fp16_to_fp32(b[i / 256].d) * b[i / 256].scales[i % 256 / 16]);
    ASSERT_LE(std::fabs(y[i] - x[i]), 1.5f * step + 1e-6f) << i;
  }
}

TEST(Quants, ZeroAndConstantBlocks) {
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_K}) {
    SCOPED_TRACE(ggml_type_name(t));
    std::vector<float> zero(512, 0.0f), cst(512, -1.5f);
    for (float v : round_trip(t, zero)) ASSERT_EQ(v, 0.0f);
    for (float v : round_trip(t, cst)) ASSERT_NEAR(v, -1.5f, 0.01f);
  }
}

TEST(Quants, UnsupportedAndBadLengths) {
  float x[256] = {};
  uint8_t buf[1024];
  EXPECT_THROW(quantize_row(GgmlType::Q3_K, x, buf, 256), Error);
  EXPECT_THROW(dequantize_row(GgmlType::Q2_K, buf, x, 256), Error);
  EXPECT_THROW(quantize_row(GgmlType::Q8_0, x, buf, 31), Error);
  EXPECT_THROW(dequantize_row(GgmlType::Q4_K, buf, x, 128), Error);
  EXPECT_THROW(dequantize_row(static_cast<GgmlType>(99), buf, x, 32), Error);
}

// --- the real Q8_0 model --------------------------------------------------------------

TEST(Quants, RealQ8_0ModelEmbedding) {
  auto f = GgufFile::open(test::shared_dir() + "/models/TinyStories-656K-Q8_0.gguf");
  const GgufTensorInfo* t = f->tensor("token_embd.weight");
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->type, GgmlType::Q8_0);
  const int64_t n = t->ne[0], rows = t->ne[1];
  const int64_t row_bytes = ggml_row_bytes(t->type, n);
  std::vector<float> y(n);
  double sum_abs = 0;
  float max_abs = 0;
  int blocks_at_127 = 0, blocks = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* src = t->data + r * row_bytes;
    dequantize_row(t->type, src, y.data(), n);
    for (float v : y) {
      ASSERT_TRUE(std::isfinite(v));
      sum_abs += std::fabs(v);
      max_abs = std::max(max_abs, std::fabs(v));
    }
    // ggml's quantizer maps each block's largest magnitude to ±127, so the block
    // layout is right if almost every block has a ±127 (and a positive scale).
    const BlockQ8_0* b = reinterpret_cast<const BlockQ8_0*>(src);
    for (int64_t k = 0; k < n / 32; ++k, ++blocks) {
      EXPECT_GT(fp16_to_fp32(b[k].d), 0.0f);
      bool at127 = false;
      for (int j = 0; j < 32; ++j) at127 |= std::abs(b[k].qs[j]) == 127;
      blocks_at_127 += at127;
    }
    // Our quantizer reproduces the stored bytes from the dequantized row.
    if (r % 64 == 0) {
      std::vector<uint8_t> re(row_bytes);
      quantize_row(GgmlType::Q8_0, y.data(), re.data(), n);
      EXPECT_EQ(std::memcmp(re.data(), src, row_bytes), 0) << "row " << r;
    }
  }
  const double mean_abs = sum_abs / double(n * rows);
  EXPECT_GT(mean_abs, 1e-3);
  EXPECT_LT(mean_abs, 10.0);
  EXPECT_LT(max_abs, 100.0f);
  EXPECT_GT(blocks_at_127, blocks * 99 / 100);
}

TEST(Quants, RealF32ModelDequantizesToItself) {
  auto f = GgufFile::open(test::shared_dir() + "/models/stories260K.gguf");
  const GgufTensorInfo* t = f->tensor("blk.0.attn_q.weight");
  ASSERT_NE(t, nullptr);
  std::vector<float> y(t->ne[0]);
  dequantize_row(GgmlType::F32, t->data, y.data(), t->ne[0]);
  EXPECT_EQ(std::memcmp(y.data(), t->data, y.size() * 4), 0);
}

}  // namespace
}  // namespace pc
