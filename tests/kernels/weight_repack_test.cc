// Repacked weight layouts (kernels/weight_repack.h): lossless, and matmul on
// a repacked matrix gives bitwise what it gives on the stored one, on every
// kernel path, batch size and thread count.
#include "kernels/weight_repack.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "common/error.h"
#include "cpu_levels.h"
#include "gguf/quants.h"
#include "kernels/matmul.h"
#include "kernels/thread_pool.h"

namespace pc {
namespace {

// The stored types with an X16 layout (kernels/weight_repack.h).
constexpr GgmlType kStoredTypes[] = {GgmlType::Q4_K, GgmlType::Q6_K,   GgmlType::Q5_K,  GgmlType::Q8_0,
                                     GgmlType::Q4_0, GgmlType::Q5_0,   GgmlType::Q4_1,  GgmlType::Q5_1,
                                     GgmlType::IQ4_NL, GgmlType::MXFP4, GgmlType::IQ4_XS};

// n rows of k values of type t (one of kStoredTypes): quantized rows of random values, every fourth row
// raw random bytes instead (any scales and mins, any quants; F16 d and
// dmin below 32 in magnitude, subnormals and -0 included, MXFP4 scales
// 2^-28 .. 2^3 with the two subnormal ones among them, so sums stay finite).
std::vector<uint8_t> kquant_rows(GgmlType t, int64_t n, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  const int64_t rb = ggml_row_bytes(t, k), bb = ggml_block_bytes(t);
  std::vector<uint8_t> w(size_t(n * rb));
  std::vector<float> row(static_cast<size_t>(k));
  for (int64_t r = 0; r < n; ++r) {
    uint8_t* dst = w.data() + r * rb;
    if (r % 4 != 3) {
      for (float& v : row) v = nd(rng) * (1 + float(r % 3));
      quantize_row(t, row.data(), dst, k);
      continue;
    }
    for (int64_t i = 0; i < rb; ++i) dst[i] = uint8_t(rng());
    for (int64_t b = 0; b < k / ggml_block_elems(t); ++b) {  // d and dmin start Q4_K and Q5_K blocks
      if (t == GgmlType::MXFP4) {  // e first: 0, 1 (subnormal scales) or 100 .. 130
        const uint32_t e = rng() % 33;
        dst[b * bb] = uint8_t(e < 2 ? e : 98 + e);
        continue;
      }
      if (ggml_block_elems(t) == 32) {  // Q8_0, Q4_0, Q5_0, IQ4_NL: d first; Q4_1, Q5_1: d, m
        reinterpret_cast<BlockQ8_0*>(dst + b * bb)->d = uint16_t((rng() % 0x5000) | (rng() % 2) << 15);
        if (t == GgmlType::Q4_1 || t == GgmlType::Q5_1)
          reinterpret_cast<BlockQ4_1*>(dst + b * bb)->m = uint16_t((rng() % 0x5000) | (rng() % 2) << 15);
        continue;
      }
      if (t == GgmlType::Q6_K) {
        reinterpret_cast<BlockQ6_K*>(dst + b * bb)->d = uint16_t((rng() % 0x5000) | (rng() % 2) << 15);
        continue;
      }
      auto* blk = reinterpret_cast<BlockQ4_K*>(dst + b * bb);  // IQ4_XS: d, then scales_h (any)
      blk->d = uint16_t((rng() % 0x5000) | (rng() % 2) << 15);  // |d| < 32, subnormals and -0 included
      if (t != GgmlType::IQ4_XS) blk->dmin = uint16_t((rng() % 0x5000) | (rng() % 2) << 15);
    }
  }
  return w;
}

std::vector<uint8_t> q4k_rows(int64_t n, int64_t k, uint32_t seed) { return kquant_rows(GgmlType::Q4_K, n, k, seed); }

GgmlType repacked_type(GgmlType t) { return x16_layout(t, /*by_stored=*/true)->x16; }

std::vector<uint8_t> repacked(GgmlType t, const std::vector<uint8_t>& w, int64_t n, int64_t k) {
  std::vector<uint8_t> out(size_t(n * ggml_row_bytes(repacked_type(t), k)));
  repack_rows(t, repacked_type(t), w.data(), out.data(), k, n);
  return out;
}
std::vector<uint8_t> repacked(const std::vector<uint8_t>& q4k, int64_t n, int64_t k) {
  return repacked(GgmlType::Q4_K, q4k, n, k);
}

TEST(WeightRepack, RoundTripsBitwise) {
  uint32_t seed = 7;
  for (int64_t k : {256, 2048})
    for (GgmlType t : kStoredTypes) {
      const X16Layout& l = *x16_layout(t, /*by_stored=*/true);
      ASSERT_EQ(l.stored, t);
      ASSERT_EQ(ggml_row_bytes(l.x16, k), ggml_row_bytes(t, k)) << ggml_type_name(t);
      const int64_t n = 32;
      const std::vector<uint8_t> w = kquant_rows(t, n, k, ++seed);
      const std::vector<uint8_t> r = repacked(t, w, n, k);
      std::vector<uint8_t> back(w.size());
      for (int64_t i = 0; i < n; i += kX16Rows)
        l.unpack(r.data() + i * ggml_row_bytes(l.x16, k), back.data() + i * ggml_row_bytes(t, k), k);
      EXPECT_EQ(back, w) << ggml_type_name(t) << " k=" << k;
    }
  // Every F16 d and many quant bytes of Q8_0, every F16 d and many scale and
  // quant bytes of Q6_K.
  BlockQ8_0 g8[16], g8back[16];
  BlockQ8_0X16 g8r;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    BlockQ8_0& b = g8[h % 16];
    b.d = uint16_t(h);
    for (int i = 0; i < 32; ++i) b.qs[i] = int8_t(h * 11 + i * 37);
    if (h % 16 == 15) {
      repack_group_q8_0x16(reinterpret_cast<const uint8_t*>(g8), reinterpret_cast<uint8_t*>(&g8r), 32);
      unpack_group_q8_0x16(reinterpret_cast<const uint8_t*>(&g8r), reinterpret_cast<uint8_t*>(g8back), 32);
      ASSERT_EQ(std::memcmp(g8, g8back, sizeof g8), 0) << "Q8_0 h=" << h;
    }
  }
  BlockQ6_K g6[16], g6back[16];
  BlockQ6_KX16 g6r;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    BlockQ6_K& b = g6[h % 16];
    b.d = uint16_t(h);
    for (int i = 0; i < 16; ++i) b.scales[i] = int8_t(h * 37 + i * 101);
    for (int i = 0; i < 128; ++i) b.ql[i] = uint8_t(h + i * 13);
    for (int i = 0; i < 64; ++i) b.qh[i] = uint8_t(h * 7 + i * 29);
    if (h % 16 == 15) {
      repack_group_q6_kx16(reinterpret_cast<const uint8_t*>(g6), reinterpret_cast<uint8_t*>(&g6r), 256);
      unpack_group_q6_kx16(reinterpret_cast<const uint8_t*>(&g6r), reinterpret_cast<uint8_t*>(g6back), 256);
      ASSERT_EQ(std::memcmp(g6, g6back, sizeof g6), 0) << "Q6_K h=" << h;
    }
  }
  // Every F16 d and dmin, and many scale, min and quant bytes (16 rows of
  // one block a group).
  BlockQ4_K g[16], gback[16];
  BlockQ4_KX16 gr;
  BlockQ5_K g5[16], g5back[16];
  BlockQ5_KX16 g5r;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    BlockQ4_K& b = g[h % 16];
    b = BlockQ4_K{};
    b.d = uint16_t(h);
    b.dmin = uint16_t(h ^ 0x8000);
    for (int i = 0; i < 12; ++i) b.scales[i] = uint8_t(h * 37 + i * 101);
    for (int i = 0; i < 128; ++i) b.qs[i] = uint8_t(h + i * 13);
    if (h % 16 == 15) {
      repack_group_q4_kx16(reinterpret_cast<const uint8_t*>(g), reinterpret_cast<uint8_t*>(&gr), 256);
      unpack_group_q4_kx16(reinterpret_cast<const uint8_t*>(&gr), reinterpret_cast<uint8_t*>(gback), 256);
      ASSERT_EQ(std::memcmp(g, gback, sizeof g), 0) << "h=" << h;
    }
    BlockQ5_K& b5 = g5[h % 16];
    b5 = BlockQ5_K{};
    b5.d = b.d;
    b5.dmin = b.dmin;
    std::memcpy(b5.scales, b.scales, sizeof b5.scales);
    for (int i = 0; i < 32; ++i) b5.qh[i] = uint8_t(h * 5 + i * 29);
    std::memcpy(b5.qs, b.qs, sizeof b5.qs);
    if (h % 16 == 15) {
      repack_group_q5_kx16(reinterpret_cast<const uint8_t*>(g5), reinterpret_cast<uint8_t*>(&g5r), 256);
      unpack_group_q5_kx16(reinterpret_cast<const uint8_t*>(&g5r), reinterpret_cast<uint8_t*>(g5back), 256);
      ASSERT_EQ(std::memcmp(g5, g5back, sizeof g5), 0) << "Q5_K h=" << h;
    }
  }
}

// Q4_K_X16's parts (weight_repack.h): row c's scale and min of sub-block j
// in scm[j][c] and mnl[j / 2][c], its d and dmin in d[c] and dmin[c], its
// value v in byte 4c + v % 4 of qs[(v % 128) / 4], low nibble when v < 128.
TEST(WeightRepack, Q4KX16Layout) {
  const std::vector<uint8_t> w = q4k_rows(16, 512, 3);
  const std::vector<uint8_t> r = repacked(w, 16, 512);
  for (int64_t b = 0; b < 2; ++b) {
    const auto& out = *reinterpret_cast<const BlockQ4_KX16*>(r.data() + b * sizeof(BlockQ4_KX16));
    for (int c = 0; c < 16; ++c) {
      const auto& in = *reinterpret_cast<const BlockQ4_K*>(w.data() + c * 288 + b * 144);
      uint8_t sc[8], mn[8];
      kern::q4k_scales(in.scales, sc, mn);
      for (int j = 0; j < 8; ++j) {
        EXPECT_EQ(out.scm[j][c] & 63, sc[j]) << j;
        EXPECT_EQ(out.scm[j][c] >> 6, mn[j] >> 4) << j;
        EXPECT_EQ((out.mnl[j / 2][c] >> (4 * (j % 2))) & 15, mn[j] & 15) << j;
      }
      EXPECT_EQ(out.d[c], in.d);
      EXPECT_EQ(out.dmin[c], in.dmin);
      for (int v = 0; v < 256; ++v) {
        const int stored = (v % 64 < 32) ? in.qs[32 * (v / 64) + v % 32] & 0xF : in.qs[32 * (v / 64) + v % 32] >> 4;
        const uint8_t byte = out.qs[(v % 128) / 4][4 * c + v % 4];
        ASSERT_EQ(v < 128 ? byte & 0xF : byte >> 4, stored) << "row " << c << " value " << v;
      }
    }
  }
}

// Q6_K_X16's parts (weight_repack.h): row c's d in d[c], its scale of
// sub-block j in sc[j][c], value v's low 4 bits in byte 4c + v % 4 of
// ql[(v / 4) % 32] (low nibble when v < 128), its top 2 bits at bit
// 2(v / 64) of byte 4c + v % 4 of qh[(v / 4) % 16]; the value itself as
// dequantize_row reads the stored block.
TEST(WeightRepack, Q6KX16Layout) {
  const std::vector<uint8_t> w = kquant_rows(GgmlType::Q6_K, 16, 512, 4);
  const std::vector<uint8_t> r = repacked(GgmlType::Q6_K, w, 16, 512);
  std::vector<float> deq(512);
  for (int c = 0; c < 16; ++c) {
    dequantize_row(GgmlType::Q6_K, w.data() + c * 420, deq.data(), 512);
    for (int64_t b = 0; b < 2; ++b) {
      const auto& out = *reinterpret_cast<const BlockQ6_KX16*>(r.data() + b * sizeof(BlockQ6_KX16));
      const auto& in = *reinterpret_cast<const BlockQ6_K*>(w.data() + c * 420 + b * 210);
      EXPECT_EQ(out.d[c], in.d);
      for (int j = 0; j < 16; ++j) EXPECT_EQ(out.sc[j][c], in.scales[j]) << j;
      const float d = kern::half_to_float(in.d);
      for (int v = 0; v < 256; ++v) {
        const int t = v / 4;
        const int lo4 = (out.ql[t % 32][4 * c + v % 4] >> (v < 128 ? 0 : 4)) & 15;
        const int hi2 = (out.qh[t % 16][4 * c + v % 4] >> (2 * (v / 64))) & 3;
        const float want = deq[size_t(256 * b + v)];
        ASSERT_EQ(d * float(in.scales[v / 16]) * float((lo4 | hi2 << 4) - 32), want) << "row " << c << " value " << v;
      }
    }
  }
}

// Q5_K_X16: Q4_K_X16's header and low 4 bits; value v's fifth bit is bit
// v / 32 of byte 4c + v % 4 of qh[(v / 4) % 8]; the whole 5-bit value as
// dequantize_row reads the stored block.
TEST(WeightRepack, Q5KX16Layout) {
  const std::vector<uint8_t> w = kquant_rows(GgmlType::Q5_K, 16, 512, 5);
  const std::vector<uint8_t> r = repacked(GgmlType::Q5_K, w, 16, 512);
  std::vector<float> deq(512);
  int fifth = 0;
  for (int c = 0; c < 16; ++c) {
    dequantize_row(GgmlType::Q5_K, w.data() + c * 352, deq.data(), 512);
    for (int64_t b = 0; b < 2; ++b) {
      const auto& out = *reinterpret_cast<const BlockQ5_KX16*>(r.data() + b * sizeof(BlockQ5_KX16));
      const auto& in = *reinterpret_cast<const BlockQ5_K*>(w.data() + c * 352 + b * 176);
      EXPECT_EQ(out.d[c], in.d);
      EXPECT_EQ(out.dmin[c], in.dmin);
      uint8_t sc[8], mn[8];
      kern::q4k_scales(in.scales, sc, mn);
      for (int j = 0; j < 8; ++j) {
        ASSERT_EQ(out.scm[j][c] & 63, sc[j]) << j;
        ASSERT_EQ(out.scm[j][c] >> 6, mn[j] >> 4) << j;
        ASSERT_EQ((out.mnl[j / 2][c] >> (4 * (j % 2))) & 15, mn[j] & 15) << j;
      }
      const float d = kern::half_to_float(in.d), dmin = kern::half_to_float(in.dmin);
      for (int v = 0; v < 256; ++v) {
        const int t = v / 4;
        const int lo4 = (out.qs[t % 32][4 * c + v % 4] >> (v < 128 ? 0 : 4)) & 15;
        const int bit = (out.qh[t % 8][4 * c + v % 4] >> (v / 32)) & 1;
        fifth += bit;
        const float want = deq[size_t(256 * b + v)];
        ASSERT_EQ(d * float(sc[v / 32]) * float(lo4 | bit << 4) - dmin * float(mn[v / 32]), want)
            << "row " << c << " value " << v;
      }
    }
  }
  EXPECT_GT(fifth, 0);
  EXPECT_LT(fifth, 16 * 512);
}

// Q8_0_X16's parts (weight_repack.h): runs of 4 blocks (here 6 blocks a row:
// a run of 4, then one of 2), each run's 16 F16 d of its blocks first, then
// their qs; row c's d in d[c], its value v plus 128 in byte 4c + v % 4 of
// qs[v / 4]; the value as dequantize_row reads the stored block.
TEST(WeightRepack, Q80X16Layout) {
  const int64_t k = 192, nb = 6, rb = nb * 34;
  const std::vector<uint8_t> w = kquant_rows(GgmlType::Q8_0, 16, k, 6);
  const std::vector<uint8_t> r = repacked(GgmlType::Q8_0, w, 16, k);
  std::vector<float> deq(static_cast<size_t>(k));
  for (int c = 0; c < 16; ++c) {
    dequantize_row(GgmlType::Q8_0, w.data() + c * rb, deq.data(), k);
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t run = b / kQ8X16Run, j = b % kQ8X16Run;
      const int64_t in_run = nb - run * kQ8X16Run < kQ8X16Run ? nb - run * kQ8X16Run : kQ8X16Run;
      const uint8_t* base = r.data() + run * kQ8X16Run * 544;
      uint16_t d_out;
      std::memcpy(&d_out, base + 32 * j + 2 * c, 2);
      const uint8_t* qs = base + 32 * in_run + 512 * j;
      const auto& in = *reinterpret_cast<const BlockQ8_0*>(w.data() + c * rb + b * 34);
      EXPECT_EQ(d_out, in.d) << "row " << c << " block " << b;
      const float d = kern::half_to_float(in.d);
      for (int v = 0; v < 32; ++v)
        ASSERT_EQ(d * float(int(qs[64 * (v / 4) + 4 * c + v % 4]) - 128), deq[size_t(32 * b + v)])
            << "row " << c << " block " << b << " value " << v;
      const Q8X16Block at = q8x16_block(r.data(), nb, b);  // the kernels' reader agrees
      EXPECT_EQ(reinterpret_cast<const uint8_t*>(at.d), base + 32 * j);
      EXPECT_EQ(reinterpret_cast<const uint8_t*>(at.qs), qs);
    }
  }
}

// Q4_0_X16 / Q5_0_X16's parts (weight_repack.h): row c's d in d[c], value
// v's 4 low bits in byte 4c + v % 4 of qs[(v % 16) / 4] (the high nibble for
// v >= 16), Q5_0's fifth bit at bit v / 4 of byte 4c + v % 4 of qh; the value
// as dequantize_row reads the stored block.
TEST(WeightRepack, Q450X16Layout) {
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q5_0}) {
    const bool q5 = t == GgmlType::Q5_0;
    const int64_t bb = ggml_block_bytes(t), rb = 3 * bb;
    const std::vector<uint8_t> w = kquant_rows(t, 16, 96, 7);
    const std::vector<uint8_t> r = repacked(t, w, 16, 96);
    const int64_t ob = q5 ? sizeof(BlockQ5_0X16) : sizeof(BlockQ4_0X16);
    std::vector<float> deq(96);
    int fifth = 0;
    for (int c = 0; c < 16; ++c) {
      dequantize_row(t, w.data() + c * rb, deq.data(), 96);
      for (int64_t b = 0; b < 3; ++b) {
        const uint8_t* out = r.data() + b * ob;
        const uint16_t* d = reinterpret_cast<const uint16_t*>(out);
        const uint8_t* qh = out + 32;
        const uint8_t* qs = out + (q5 ? 96 : 32);
        uint16_t din;
        std::memcpy(&din, w.data() + c * rb + b * bb, 2);
        EXPECT_EQ(d[c], din);
        for (int v = 0; v < 32; ++v) {
          int code = (qs[64 * ((v % 16) / 4) + 4 * c + v % 4] >> (v < 16 ? 0 : 4)) & 15;
          if (q5) {
            const int bit = (qh[4 * c + v % 4] >> (v / 4)) & 1;
            fifth += bit;
            code |= bit << 4;
          }
          ASSERT_EQ(kern::half_to_float(din) * float(code - (q5 ? 16 : 8)), deq[size_t(32 * b + v)])
              << ggml_type_name(t) << " row " << c << " value " << v;
        }
      }
    }
    if (q5) {
      EXPECT_GT(fifth, 0);
      EXPECT_LT(fifth, 16 * 96);
    }
  }
}

// Q4_1_X16 / Q5_1_X16 / IQ4_NL_X16 / MXFP4_X16's parts (weight_repack.h):
// row c's d (MXFP4: e) in d[c] (e[c]), Q4_1's / Q5_1's m in m[c], value v's
// nibble in byte 4c + v % 4 of qs[(v % 16) / 4] (the high one for v >= 16),
// Q5_1's fifth bit at bit v / 4 of byte 4c + v % 4 of qh; the value as
// dequantize_row reads the stored block.
TEST(WeightRepack, Q32X16LayoutsWithOffsetsAndTables) {
  for (GgmlType t : {GgmlType::Q4_1, GgmlType::Q5_1, GgmlType::IQ4_NL, GgmlType::MXFP4}) {
    const int64_t bb = ggml_block_bytes(t), rb = 3 * bb, ob = 16 * bb;
    const std::vector<uint8_t> w = kquant_rows(t, 16, 96, 8);
    const std::vector<uint8_t> r = repacked(t, w, 16, 96);
    std::vector<float> deq(96);
    for (int c = 0; c < 16; ++c) {
      dequantize_row(t, w.data() + c * rb, deq.data(), 96);
      for (int64_t b = 0; b < 3; ++b) {
        const uint8_t* out = r.data() + b * ob;
        const uint8_t* in = w.data() + c * rb + b * bb;
        float scale = 0, m = 0;
        const uint8_t *qh = nullptr, *qs = nullptr;
        if (t == GgmlType::MXFP4) {
          EXPECT_EQ(out[c], in[0]);
          scale = e8m0_half_to_fp32(out[c]);
          qs = out + 16;
        } else {
          const auto* d = reinterpret_cast<const uint16_t*>(out);
          uint16_t din;
          std::memcpy(&din, in, 2);
          EXPECT_EQ(d[c], din);
          scale = kern::half_to_float(d[c]);
          qs = out + 32;
          if (t != GgmlType::IQ4_NL) {
            uint16_t min;
            std::memcpy(&min, in + 2, 2);
            EXPECT_EQ(d[16 + c], min);
            m = kern::half_to_float(d[16 + c]);
            qs = out + 64;
          }
          if (t == GgmlType::Q5_1) {
            qh = out + 64;
            qs = out + 128;
          }
        }
        for (int v = 0; v < 32; ++v) {
          int code = (qs[64 * ((v % 16) / 4) + 4 * c + v % 4] >> (v < 16 ? 0 : 4)) & 15;
          if (qh) code |= ((qh[4 * c + v % 4] >> (v / 4)) & 1) << 4;
          const float want = deq[size_t(32 * b + v)];
          if (t == GgmlType::IQ4_NL) ASSERT_EQ(scale * float(kIq4nlValues[code]), want) << c << " " << v;
          else if (t == GgmlType::MXFP4) ASSERT_EQ(scale * float(kMxfp4Values[code]), want) << c << " " << v;
          else ASSERT_EQ(scale * float(code) + m, want) << ggml_type_name(t) << " row " << c << " value " << v;
        }
      }
    }
  }
}

// IQ4_XS_X16's parts (weight_repack.h): row c's d, scales_h and scales_l in
// d[c], sh[c] and sl[q][c]; value 32s + j's index in byte 4c + j % 4 of
// qs[4s + (j % 16) / 4] (the high nibble for j >= 16); the value as
// dequantize_row reads the stored block.
TEST(WeightRepack, IQ4XSX16Layout) {
  const std::vector<uint8_t> w = kquant_rows(GgmlType::IQ4_XS, 16, 512, 9);
  const std::vector<uint8_t> r = repacked(GgmlType::IQ4_XS, w, 16, 512);
  std::vector<float> deq(512);
  for (int c = 0; c < 16; ++c) {
    dequantize_row(GgmlType::IQ4_XS, w.data() + c * 272, deq.data(), 512);
    for (int64_t b = 0; b < 2; ++b) {
      const auto& out = *reinterpret_cast<const BlockIQ4_XSX16*>(r.data() + b * sizeof(BlockIQ4_XSX16));
      const auto& in = *reinterpret_cast<const BlockIQ4_XS*>(w.data() + c * 272 + b * 136);
      EXPECT_EQ(out.d[c], in.d);
      EXPECT_EQ(out.sh[c], in.scales_h);
      for (int q = 0; q < 4; ++q) EXPECT_EQ(out.sl[q][c], in.scales_l[q]);
      const float d = kern::half_to_float(out.d[c]);
      for (int v = 0; v < 256; ++v) {
        const int s = v / 32, j = v % 32;
        const int ls = ((out.sl[s / 2][c] >> (4 * (s % 2))) & 15) | ((out.sh[c] >> (2 * s)) & 3) << 4;
        const int idx = (out.qs[4 * s + (j % 16) / 4][4 * c + j % 4] >> (j < 16 ? 0 : 4)) & 15;
        ASSERT_EQ(d * float(ls - 32) * float(kIq4nlValues[idx]), deq[size_t(256 * b + v)]) << "row " << c << " value " << v;
      }
    }
  }
}

std::vector<float> random_x(int64_t m, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  std::vector<float> x(size_t(m * k));
  for (int64_t i = 0; i < m * k; ++i) x[size_t(i)] = i % 97 == 5 ? 8 * nd(rng) : nd(rng);
  return x;
}

// matmul on the X16 layouts = matmul on the stored Q4_K / Q6_K / Q5_K / Q8_0 /
// Q4_0 / Q5_0 weights, bitwise, on every kernel path (AVX-512's own kernels,
// real and emulated; the scalar path unpacks, AVX2 runs the emulated kernels
// or, Q8_0 and Q4_0 prompts, its panel; K-quant prompts in 6-row tiles of
// 8-lane halves, so m = 7 and 8 end in tiles of 1 and 2 rows), for decode
// rows and prompt tiles, whatever the thread count; and each row of a batch
// is the row computed alone.
TEST(WeightRepack, MatmulMatchesStoredBitwise) {
  test::LevelGuard guard;
  ThreadPool pools[3] = {ThreadPool(1), ThreadPool(2), ThreadPool(3)};
  uint32_t seed = 40;
  for (GgmlType t : kStoredTypes)
  for (const test::KernelPath& path : test::kernel_paths()) {
    for (int64_t k : {ggml_block_elems(t) == 32 ? int64_t(96) : int64_t(256), int64_t(1536)}) {
      for (int64_t n : {16, 48, 128}) {
        const std::vector<uint8_t> w = kquant_rows(t, n, k, ++seed);
        const std::vector<uint8_t> r = repacked(t, w, n, k);
        const WeightView stored{t, k, n, w.data(), ggml_row_bytes(t, k)};
        const WeightView repack{repacked_type(t), k, n, r.data(), ggml_row_bytes(repacked_type(t), k)};
        for (int64_t m : {1, 3, 4, 5, 7, 8, 16, 17, 64, 128}) {
          const std::vector<float> x = random_x(m, k, ++seed);
          path.use();
          std::vector<float> ref(size_t(m * n), -1.f);
          matmul(stored, x.data(), m, ref.data(), pools[0]);
          for (ThreadPool& pool : pools) {
            std::vector<float> y(size_t(m * n), -2.f);
            matmul(repack, x.data(), m, y.data(), pool);
            ASSERT_EQ(std::memcmp(y.data(), ref.data(), y.size() * sizeof(float)), 0)
                << ggml_type_name(t) << " " << path.name() << " k=" << k << " n=" << n << " m=" << m
                << " threads=" << pool.size();
          }
          std::vector<float> one(static_cast<size_t>(n));
          for (int64_t i = 0; i < m; i += 4) {
            matmul(repack, x.data() + i * k, 1, one.data(), pools[1]);
            ASSERT_EQ(std::memcmp(one.data(), ref.data() + i * n, one.size() * sizeof(float)), 0)
                << path.name() << " row " << i << " alone, k=" << k << " n=" << n << " m=" << m;
          }
        }
      }
    }
  }
}

// Extreme values: every nibble 15 (Q5_K: every value 31, Q6_K: 63 with
// scales of -128 and 127, Q8_0: -128 and 127, Q4_0 / Q5_0 / Q4_1 / Q5_1:
// codes 0 and 15 / 31, IQ4_NL / IQ4_XS: table values -127 and 113 with
// IQ4_XS scales of -32 and 31, MXFP4: ±12), every scale and min 63,
// activations at ±127 (one large value a block; 32-value blocks and IQ4_XS
// every value) — the largest int16 pair sums and int32 block sums the
// repacked kernels form.
TEST(WeightRepack, ExtremesMatchStored) {
  test::LevelGuard guard;
  ThreadPool pool(2);
  const int64_t k = 512;
  for (GgmlType t : kStoredTypes) {
    const int64_t n = 16;
    std::vector<uint8_t> w(size_t(n * ggml_row_bytes(t, k)));
    for (int64_t b = 0; b < n * k / ggml_block_elems(t); ++b) {
      uint8_t* at = w.data() + b * ggml_block_bytes(t);
      const uint8_t nib = b % 3 == 0 ? 0xFF : b % 3 == 1 ? 0x00 : 0x0F;  // codes / indices max, 0, alternating
      if (t == GgmlType::Q4_1 || t == GgmlType::Q5_1) {
        auto* b4 = reinterpret_cast<BlockQ4_1*>(at);  // d, m start both
        b4->d = 0x3C00;
        b4->m = uint16_t(b % 2 ? 0xCC00 : 0x4C00);  // -16, 16
        if (t == GgmlType::Q4_1) {
          std::memset(b4->qs, nib, sizeof b4->qs);
        } else {
          auto* b5 = reinterpret_cast<BlockQ5_1*>(at);
          std::memset(b5->qs, nib, sizeof b5->qs);
          std::memset(b5->qh, b % 3 == 0 ? 0xFF : b % 3 == 1 ? 0x00 : 0x55, sizeof b5->qh);
        }
        continue;
      }
      if (t == GgmlType::IQ4_NL) {
        auto* bn = reinterpret_cast<BlockIQ4_NL*>(at);
        bn->d = 0x3C00;
        std::memset(bn->qs, nib, sizeof bn->qs);
        continue;
      }
      if (t == GgmlType::MXFP4) {  // ±12 (indices 7 and 15), 2^0
        auto* bm = reinterpret_cast<BlockMXFP4*>(at);
        bm->e = 128;
        std::memset(bm->qs, b % 3 == 0 ? 0xFF : b % 3 == 1 ? 0x77 : 0x7F, sizeof bm->qs);
        continue;
      }
      if (t == GgmlType::IQ4_XS) {  // scales 31 (ls 63) or -32 (ls 0), alternating by sub-block for b % 3 == 2
        auto* bx = reinterpret_cast<BlockIQ4_XS*>(at);
        bx->d = 0x3C00;
        bx->scales_h = b % 3 == 0 ? 0xFFFF : b % 3 == 1 ? 0x0000 : 0x3333;
        std::memset(bx->scales_l, b % 3 == 0 ? 0xFF : b % 3 == 1 ? 0x00 : 0x0F, sizeof bx->scales_l);
        std::memset(bx->qs, nib, sizeof bx->qs);
        continue;
      }
      if (t == GgmlType::Q8_0) {  // every value -128 or 127 (or alternating)
        auto* b8 = reinterpret_cast<BlockQ8_0*>(at);
        b8->d = 0x3C00;
        for (int i = 0; i < 32; ++i) b8->qs[i] = int8_t(b % 3 == 0 ? -128 : b % 3 == 1 ? 127 : (i % 2 ? 127 : -128));
        continue;
      }
      if (t == GgmlType::Q4_0 || t == GgmlType::Q5_0) {  // every code at its maximum, 0, or alternating
        const uint8_t qs = b % 3 == 0 ? 0xFF : b % 3 == 1 ? 0x00 : 0x0F;
        if (t == GgmlType::Q4_0) {
          auto* b4 = reinterpret_cast<BlockQ4_0*>(at);
          b4->d = 0x3C00;
          std::memset(b4->qs, qs, sizeof b4->qs);
        } else {
          auto* b5 = reinterpret_cast<BlockQ5_0*>(at);
          b5->d = 0x3C00;
          std::memset(b5->qs, qs, sizeof b5->qs);
          std::memset(b5->qh, b % 3 == 0 ? 0xFF : b % 3 == 1 ? 0x00 : 0x55, sizeof b5->qh);
        }
        continue;
      }
      if (t == GgmlType::Q6_K) {  // every code 63 (or 0 and 63 alternating), scales at -128 and 127
        auto* b6 = reinterpret_cast<BlockQ6_K*>(at);
        b6->d = 0x3C00;
        std::memset(b6->ql, b % 3 ? 0xFF : 0xF0, sizeof b6->ql);
        std::memset(b6->qh, b % 3 ? 0xFF : 0xCC, sizeof b6->qh);
        for (int j = 0; j < 16; ++j) b6->scales[j] = int8_t(b % 2 ? -128 : 127);
        continue;
      }
      auto* blk = reinterpret_cast<BlockQ4_K*>(at);  // d, dmin and scales start both block types
      blk->d = 0x3C00;
      blk->dmin = uint16_t(b % 2 ? 0x3800 : 0);
      std::memset(blk->scales, 0xFF, sizeof blk->scales);
      if (t == GgmlType::Q4_K) {
        std::memset(blk->qs, b % 3 ? 0xFF : 0xF0, sizeof blk->qs);
      } else {
        auto* b5 = reinterpret_cast<BlockQ5_K*>(at);
        std::memset(b5->qs, b % 3 ? 0xFF : 0xF0, sizeof b5->qs);
        std::memset(b5->qh, b % 3 ? 0xFF : 0xAA, sizeof b5->qh);
      }
    }
    const std::vector<uint8_t> r = repacked(t, w, n, k);
    const WeightView stored{t, k, n, w.data(), ggml_row_bytes(t, k)};
    const WeightView repack{repacked_type(t), k, n, r.data(), ggml_row_bytes(repacked_type(t), k)};
    for (const test::KernelPath& path : test::kernel_paths()) {
      for (int64_t m : {2, 5})  // decode rows, a prompt tile
        for (float sign : {1.f, -1.f}) {
          std::vector<float> x(size_t(m * k), sign);
          // One large value a block (the others round to ±3); 32-value
          // blocks: every value ±50 (every third negated), so every
          // activation is ±127.
          const bool q32 = ggml_block_elems(t) == 32 || t == GgmlType::IQ4_XS;
          for (int64_t i = 0; i < m * k; i += q32 ? 1 : 256) x[size_t(i)] = q32 && i % 3 == 0 ? -50 * sign : 50 * sign;
          path.use();
          std::vector<float> ref(size_t(m * n)), y(size_t(m * n), -1.f);
          matmul(stored, x.data(), m, ref.data(), pool);
          matmul(repack, x.data(), m, y.data(), pool);
          EXPECT_EQ(std::memcmp(y.data(), ref.data(), y.size() * sizeof(float)), 0)
              << ggml_type_name(t) << " " << path.name() << " m=" << m;
          EXPECT_NE(ref[0], 0.f);
        }
    }
  }
}

// The repacking is chosen by the kernels in use: the X16 layouts of every
// type in kStoredTypes on every SIMD set (real or emulated AVX-512, AVX2),
// none on the scalar path, and never for other types.
TEST(WeightRepack, RepackedTypeFollowsKernels) {
  test::LevelGuard guard;
  for (const test::KernelPath& path : test::kernel_paths()) {
    path.use();
    const bool scalar = path.level == CpuLevel::Scalar && !path.emulated512;
    EXPECT_EQ(matmul_repacked_type(GgmlType::Q4_K), scalar ? GgmlType::Q4_K : GgmlType::Q4_K_X16) << path.name();
    EXPECT_EQ(matmul_repacked_type(GgmlType::Q5_K), scalar ? GgmlType::Q5_K : GgmlType::Q5_K_X16) << path.name();
    EXPECT_EQ(matmul_repacked_type(GgmlType::Q6_K), scalar ? GgmlType::Q6_K : GgmlType::Q6_K_X16) << path.name();
    EXPECT_EQ(matmul_repacked_type(GgmlType::Q8_0), scalar ? GgmlType::Q8_0 : GgmlType::Q8_0_X16) << path.name();
    EXPECT_EQ(matmul_repacked_type(GgmlType::Q4_0), scalar ? GgmlType::Q4_0 : GgmlType::Q4_0_X16) << path.name();
    EXPECT_EQ(matmul_repacked_type(GgmlType::Q5_0), scalar ? GgmlType::Q5_0 : GgmlType::Q5_0_X16) << path.name();
    EXPECT_EQ(matmul_repacked_type(GgmlType::Q4_1), scalar ? GgmlType::Q4_1 : GgmlType::Q4_1_X16) << path.name();
    EXPECT_EQ(matmul_repacked_type(GgmlType::Q5_1), scalar ? GgmlType::Q5_1 : GgmlType::Q5_1_X16) << path.name();
    EXPECT_EQ(matmul_repacked_type(GgmlType::IQ4_NL), scalar ? GgmlType::IQ4_NL : GgmlType::IQ4_NL_X16) << path.name();
    EXPECT_EQ(matmul_repacked_type(GgmlType::MXFP4), scalar ? GgmlType::MXFP4 : GgmlType::MXFP4_X16) << path.name();
    EXPECT_EQ(matmul_repacked_type(GgmlType::IQ4_XS), scalar ? GgmlType::IQ4_XS : GgmlType::IQ4_XS_X16) << path.name();
    for (GgmlType t : kStoredTypes) EXPECT_EQ(matmul_repacked_type(t), scalar ? t : repacked_type(t)) << path.name();
    EXPECT_EQ(matmul_repacked_type(GgmlType::F16), GgmlType::F16);
    EXPECT_EQ(matmul_repacked_type(GgmlType::BF16), GgmlType::BF16);
  }
  EXPECT_THROW(repack_rows(GgmlType::Q6_K, GgmlType::Q4_K_X16, nullptr, nullptr, 256, 16), Error);
  EXPECT_THROW(repack_rows(GgmlType::Q4_K, GgmlType::Q6_K_X16, nullptr, nullptr, 256, 16), Error);
  EXPECT_THROW(repack_rows(GgmlType::Q6_K, GgmlType::Q6_K_X16, nullptr, nullptr, 256, 8), Error);  // not whole groups
  EXPECT_THROW(repack_rows(GgmlType::Q5_K, GgmlType::Q4_K_X16, nullptr, nullptr, 256, 16), Error);
  EXPECT_THROW(repack_rows(GgmlType::Q4_K, GgmlType::Q4_K_X16, nullptr, nullptr, 256, 12), Error);  // not whole groups
  EXPECT_THROW(repack_rows(GgmlType::Q4_K, GgmlType::Q5_K_X16, nullptr, nullptr, 256, 16), Error);
  EXPECT_THROW(repack_rows(GgmlType::Q5_K, GgmlType::Q5_K_X16, nullptr, nullptr, 256, 17), Error);  // not whole groups
  EXPECT_THROW(repack_rows(GgmlType::Q8_0, GgmlType::Q8_0_X16, nullptr, nullptr, 48, 16), Error);  // k not whole blocks
  EXPECT_THROW(repack_rows(GgmlType::Q4_0, GgmlType::Q8_0_X16, nullptr, nullptr, 256, 16), Error);
  EXPECT_THROW(repack_rows(GgmlType::Q5_0, GgmlType::Q4_0_X16, nullptr, nullptr, 256, 16), Error);
  EXPECT_THROW(repack_rows(GgmlType::Q5_0, GgmlType::Q5_0_X16, nullptr, nullptr, 256, 15), Error);  // not whole groups
  EXPECT_THROW(repack_rows(GgmlType::Q4_0, GgmlType::IQ4_NL_X16, nullptr, nullptr, 256, 16), Error);
  EXPECT_THROW(repack_rows(GgmlType::IQ4_XS, GgmlType::IQ4_XS_X16, nullptr, nullptr, 32, 16), Error);  // k not whole blocks
  EXPECT_THROW(repack_rows(GgmlType::F16, GgmlType::F16, nullptr, nullptr, 256, 16), Error);
}

}  // namespace
}  // namespace pc
