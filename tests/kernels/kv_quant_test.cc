// Tests of the KV types' row formats (kernels/kv_quant.h): names, sizes, GGUF's
// block layout where heads are multiples of 32, and the quantization error.
#include "kernels/kv_quant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "gguf/quants.h"

namespace pc {
namespace {

TEST(KvQuant, NamesRoundTripAndUnknownNamesAreRejected) {
  for (KvType t : {KvType::kF16, KvType::kQ8_0, KvType::kQ4_0}) EXPECT_EQ(parse_kv_type(kv_type_name(t)), t);
  EXPECT_FALSE(parse_kv_type("q5_0").has_value());
  EXPECT_FALSE(parse_kv_type("F16").has_value());
  EXPECT_FALSE(parse_kv_type("").has_value());
}

TEST(KvQuant, RowBytes) {
  EXPECT_EQ(kv_row_bytes(KvType::kF16, 128), 256u);
  EXPECT_EQ(kv_row_bytes(KvType::kQ8_0, 128), 4u * 34);  // GGUF block_q8_0
  EXPECT_EQ(kv_row_bytes(KvType::kQ4_0, 128), 4u * 18);  // GGUF block_q4_0
  EXPECT_EQ(kv_row_bytes(KvType::kQ8_0, 16), 18u);       // one block of 16
  EXPECT_EQ(kv_row_bytes(KvType::kQ4_0, 8), 6u);
  EXPECT_EQ(kv_row_bytes(KvType::kQ8_0, 20), 0u);        // cannot store
  EXPECT_EQ(kv_row_bytes(KvType::kQ4_0, 48), 0u);
  EXPECT_EQ(kv_row_bytes(KvType::kF16, 20), 40u);
}

// Heads that are multiples of 32: a row is GGUF's array of blocks, so the
// project's GGUF reference decodes it to the same values.
TEST(KvQuant, RowsOfWholeBlocksAreGgufBlocks) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.f, 2.f);
  for (int hd : {32, 64, 128, 256}) {
    std::vector<float> x(hd), ours(hd), gguf(hd);
    for (auto& v : x) v = nd(rng);
    for (auto [t, g] : {std::pair{KvType::kQ8_0, GgmlType::Q8_0}, std::pair{KvType::kQ4_0, GgmlType::Q4_0}}) {
      std::vector<uint8_t> row(kv_row_bytes(t, hd));
      kv_quantize_row(t, x.data(), hd, row.data());
      kv_dequantize_row(t, row.data(), hd, ours.data());
      dequantize_row(g, row.data(), gguf.data(), hd);
      for (int d = 0; d < hd; ++d) ASSERT_EQ(ours[d], gguf[d]) << kv_type_name(t) << " hd=" << hd << " d=" << d;
    }
  }
}

// The round trip's error is within half a quantization step of each block
// (q8_0: step max|x| / 127), or within a step for q4_0 (step max|x| / 8; the
// largest value of the sign opposite the block's extreme is clamped to 7 steps),
// plus the F16 rounding of the scale (amax / 1000).
TEST(KvQuant, ErrorIsWithinHalfAStep) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (int hd : {8, 16, 64, 128})
    for (KvType t : {KvType::kF16, KvType::kQ8_0, KvType::kQ4_0}) {
      const int B = kv_quant_block(t, hd);
      std::vector<float> x(hd), y(hd);
      std::vector<uint8_t> row(kv_row_bytes(t, hd));
      for (int rep = 0; rep < 50; ++rep) {
        for (auto& v : x) v = nd(rng) * (rep % 5 == 0 ? 3e-2f : 3.f);
        kv_quantize_row(t, x.data(), hd, row.data());
        kv_dequantize_row(t, row.data(), hd, y.data());
        for (int b = 0; b < hd / B; ++b) {
          float amax = 0;
          for (int j = 0; j < B; ++j) amax = std::fmax(amax, std::fabs(x[b * B + j]));
          const float step = t == KvType::kF16 ? amax / 1024 : t == KvType::kQ8_0 ? amax / 127 : amax / 8;
          for (int j = 0; j < B; ++j)
            ASSERT_LE(std::fabs(y[b * B + j] - x[b * B + j]), (t == KvType::kQ4_0 ? 1.f : 0.5f) * step + amax * 1e-3f)
                << kv_type_name(t) << " hd=" << hd;
        }
      }
    }
}

// The integer form the attention kernels' dot products read: scale × level is
// the dequantized value, bitwise, and the levels are within the type's range.
TEST(KvQuant, LevelsTimesScalesAreTheDequantizedRow) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.f, 3.f);
  for (KvType t : {KvType::kQ8_0, KvType::kQ4_0})
    for (int hd : {8, 16, 32, 64, 128}) {
      const int B = kv_quant_block(t, hd);
      std::vector<float> x(hd), deq(hd), scales(hd / B);
      std::vector<uint8_t> row(kv_row_bytes(t, hd));
      std::vector<int8_t> lv(hd);
      for (int rep = 0; rep < 20; ++rep) {
        for (auto& v : x) v = nd(rng);
        kv_quantize_row(t, x.data(), hd, row.data());
        kv_dequantize_row(t, row.data(), hd, deq.data());
        kv_row_levels(t, row.data(), hd, lv.data(), scales.data());
        for (int j = 0; j < hd; ++j) {
          EXPECT_EQ(scales[j / B] * float(lv[j]), deq[j]) << kv_type_name(t) << " hd=" << hd << " j=" << j;
          if (t == KvType::kQ8_0) EXPECT_LE(std::abs(int(lv[j])), 127);
          else EXPECT_TRUE(lv[j] >= -8 && lv[j] <= 7);
        }
      }
    }
}

TEST(KvQuant, ZeroRowsStayZero) {
  for (KvType t : {KvType::kQ8_0, KvType::kQ4_0}) {
    std::vector<float> x(64, 0.f), y(64, 1.f);
    std::vector<uint8_t> row(kv_row_bytes(t, 64));
    kv_quantize_row(t, x.data(), 64, row.data());
    kv_dequantize_row(t, row.data(), 64, y.data());
    for (float v : y) EXPECT_EQ(v, 0.f);
  }
}

}  // namespace
}  // namespace pc
