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

// n rows of k values of type t (Q4_K or Q5_K): quantized rows of random values, every fourth row
// raw random bytes instead (any 6-bit scales and mins, any nibbles; F16 d and
// dmin below 32 in magnitude, subnormals and -0 included, so sums stay finite).
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
    for (int64_t b = 0; b < k / 256; ++b) {  // d and dmin start both block types
      auto* blk = reinterpret_cast<BlockQ4_K*>(dst + b * bb);
      blk->d = uint16_t((rng() % 0x5000) | (rng() % 2) << 15);  // |d| < 32, subnormals and -0 included
      blk->dmin = uint16_t((rng() % 0x5000) | (rng() % 2) << 15);
    }
  }
  return w;
}

std::vector<uint8_t> q4k_rows(int64_t n, int64_t k, uint32_t seed) { return kquant_rows(GgmlType::Q4_K, n, k, seed); }

GgmlType repacked_type(GgmlType t) { return t == GgmlType::Q4_K ? GgmlType::Q4_K_R : GgmlType::Q5_K_R; }

std::vector<uint8_t> repacked(GgmlType t, const std::vector<uint8_t>& w, int64_t n, int64_t k) {
  std::vector<uint8_t> out(size_t(n * ggml_row_bytes(repacked_type(t), k)));
  repack_rows(t, repacked_type(t), w.data(), out.data(), k, n);
  return out;
}
std::vector<uint8_t> repacked(const std::vector<uint8_t>& q4k, int64_t n, int64_t k) {
  return repacked(GgmlType::Q4_K, q4k, n, k);
}

TEST(WeightRepack, RoundTripsBitwise) {
  for (int64_t k : {256, 2048}) {
    const int64_t n = 12;
    const std::vector<uint8_t> w = q4k_rows(n, k, 7 + uint32_t(k));
    const std::vector<uint8_t> r = repacked(w, n, k);
    std::vector<uint8_t> back(w.size());
    for (int64_t i = 0; i < n; ++i)
      unpack_row_q4_kr(r.data() + i * ggml_row_bytes(GgmlType::Q4_K_R, k), back.data() + i * ggml_row_bytes(GgmlType::Q4_K, k), k);
    EXPECT_EQ(back, w) << "k=" << k;
    const std::vector<uint8_t> w5 = kquant_rows(GgmlType::Q5_K, n, k, 9 + uint32_t(k));
    const std::vector<uint8_t> r5 = repacked(GgmlType::Q5_K, w5, n, k);
    std::vector<uint8_t> back5(w5.size());
    for (int64_t i = 0; i < n; ++i)
      unpack_row_q5_kr(r5.data() + i * ggml_row_bytes(GgmlType::Q5_K_R, k), back5.data() + i * ggml_row_bytes(GgmlType::Q5_K, k), k);
    EXPECT_EQ(back5, w5) << "Q5_K k=" << k;
  }
  // Every F16 d and dmin, and many scale, min and quant bytes.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    BlockQ4_K b{};
    b.d = uint16_t(h);
    b.dmin = uint16_t(h ^ 0x8000);
    for (int i = 0; i < 12; ++i) b.scales[i] = uint8_t(h * 37 + i * 101);
    for (int i = 0; i < 128; ++i) b.qs[i] = uint8_t(h + i * 13);
    BlockQ4_KR r;
    BlockQ4_K back;
    repack_row_q4_kr(reinterpret_cast<const uint8_t*>(&b), reinterpret_cast<uint8_t*>(&r), 256);
    unpack_row_q4_kr(reinterpret_cast<const uint8_t*>(&r), reinterpret_cast<uint8_t*>(&back), 256);
    ASSERT_EQ(std::memcmp(&b, &back, sizeof b), 0) << "h=" << h;
    BlockQ5_K b5{};
    b5.d = b.d;
    b5.dmin = b.dmin;
    std::memcpy(b5.scales, b.scales, sizeof b5.scales);
    for (int i = 0; i < 32; ++i) b5.qh[i] = uint8_t(h * 5 + i * 29);
    std::memcpy(b5.qs, b.qs, sizeof b5.qs);
    BlockQ5_KR r5;
    BlockQ5_K back5;
    repack_row_q5_kr(reinterpret_cast<const uint8_t*>(&b5), reinterpret_cast<uint8_t*>(&r5), 256);
    unpack_row_q5_kr(reinterpret_cast<const uint8_t*>(&r5), reinterpret_cast<uint8_t*>(&back5), 256);
    ASSERT_EQ(std::memcmp(&b5, &back5, sizeof b5), 0) << "Q5_K h=" << h;
  }
}

// The repacked layout's parts: scales and mins as weight_repack.h packs the
// values q4k_scales() decodes, d and dmin as stored, value v of the block in
// half v / 128, byte v % 64, low nibble when v % 128 < 64.
TEST(WeightRepack, Q4KRLayout) {
  const std::vector<uint8_t> w = q4k_rows(4, 256, 3);
  for (int64_t r = 0; r < 4; ++r) {
    const auto& in = *reinterpret_cast<const BlockQ4_K*>(w.data() + r * 144);
    BlockQ4_KR out;
    repack_row_q4_kr(w.data() + r * 144, reinterpret_cast<uint8_t*>(&out), 256);
    uint8_t sc[8], mn[8];
    kern::q4k_scales(in.scales, sc, mn);
    for (int j = 0; j < 8; ++j) {
      EXPECT_EQ(out.scm[j] & 63, sc[j]) << j;
      EXPECT_EQ(out.scm[j] >> 6, mn[j] >> 4) << j;
      EXPECT_EQ((out.scm[8 + j % 4] >> (j < 4 ? 0 : 4)) & 15, mn[j] & 15) << j;
    }
    EXPECT_EQ(out.d, in.d);
    EXPECT_EQ(out.dmin, in.dmin);
    for (int v = 0; v < 256; ++v) {
      const int stored = (v % 64 < 32) ? in.qs[32 * (v / 64) + v % 32] & 0xF : in.qs[32 * (v / 64) + v % 32] >> 4;
      const uint8_t byte = out.qs[64 * (v / 128) + v % 64];
      ASSERT_EQ(v % 128 < 64 ? byte & 0xF : byte >> 4, stored) << "row " << r << " value " << v;
    }
  }
}

// Q5_K_R: Q4_K_R's header and quants (the low 4 bits of each value), qh as
// stored, so value v's fifth bit is still bit v / 32 of qh[v % 32].
TEST(WeightRepack, Q5KRLayout) {
  const std::vector<uint8_t> w = kquant_rows(GgmlType::Q5_K, 4, 256, 5);
  for (int64_t r = 0; r < 4; ++r) {
    const auto& in = *reinterpret_cast<const BlockQ5_K*>(w.data() + r * 176);
    BlockQ5_KR out;
    repack_row_q5_kr(w.data() + r * 176, reinterpret_cast<uint8_t*>(&out), 256);
    // The header and quants are those of the Q4_K block with the same bytes.
    BlockQ4_K as4{};
    as4.d = in.d;
    as4.dmin = in.dmin;
    std::memcpy(as4.scales, in.scales, sizeof as4.scales);
    std::memcpy(as4.qs, in.qs, sizeof as4.qs);
    BlockQ4_KR out4;
    repack_row_q4_kr(reinterpret_cast<const uint8_t*>(&as4), reinterpret_cast<uint8_t*>(&out4), 256);
    EXPECT_EQ(std::memcmp(out.scm, out4.scm, sizeof out.scm), 0) << r;
    EXPECT_EQ(out.d, in.d);
    EXPECT_EQ(out.dmin, in.dmin);
    EXPECT_EQ(std::memcmp(out.qs, out4.qs, sizeof out.qs), 0) << r;
    EXPECT_EQ(std::memcmp(out.qh, in.qh, sizeof out.qh), 0) << r;
    int fifth = 0;
    for (int v = 0; v < 256; ++v) {
      const int lo4 = (v % 64 < 32) ? in.qs[32 * (v / 64) + v % 32] & 0xF : in.qs[32 * (v / 64) + v % 32] >> 4;
      const int stored = lo4 | ((in.qh[v % 32] >> (v / 64 * 2 + (v % 64) / 32)) & 1) << 4;
      const uint8_t byte = out.qs[64 * (v / 128) + v % 64];
      const int got = (v % 128 < 64 ? byte & 0xF : byte >> 4) | ((out.qh[v % 32] >> (v / 32)) & 1) << 4;
      ASSERT_EQ(got, stored) << "row " << r << " value " << v;
      fifth += stored >> 4;
    }
    EXPECT_GT(fifth, 0) << r;
    EXPECT_LT(fifth, 256) << r;
  }
}

std::vector<float> random_x(int64_t m, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  std::vector<float> x(size_t(m * k));
  for (int64_t i = 0; i < m * k; ++i) x[size_t(i)] = i % 97 == 5 ? 8 * nd(rng) : nd(rng);
  return x;
}

// matmul on Q4_K_R / Q5_K_R weights = matmul on the stored Q4_K / Q5_K weights, bitwise, on
// every kernel path (AVX-512's own kernels, real and emulated; the scalar and
// AVX2 paths unpack), for decode rows and prompt tiles, whatever the thread
// count; and each row of a batch is the row computed alone.
TEST(WeightRepack, MatmulMatchesStoredBitwise) {
  test::LevelGuard guard;
  ThreadPool pools[3] = {ThreadPool(1), ThreadPool(2), ThreadPool(3)};
  uint32_t seed = 40;
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q5_K})
  for (const test::KernelPath& path : test::kernel_paths()) {
    for (int64_t k : {256, 1536}) {
      for (int64_t n : {1, 7, 16, 57, 130}) {
        const std::vector<uint8_t> w = kquant_rows(t, n, k, ++seed);
        const std::vector<uint8_t> r = repacked(t, w, n, k);
        const WeightView stored{t, k, n, w.data(), ggml_row_bytes(t, k)};
        const WeightView repack{repacked_type(t), k, n, r.data(), ggml_row_bytes(repacked_type(t), k)};
        for (int64_t m : {1, 3, 4, 5, 17, 64}) {
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

// Extreme values: every nibble 15 (Q5_K: every value 31), every scale and
// min 63, activations at ±127 (one large value a block) — the largest int16
// pair sums and int32 block sums the repacked kernels form.
TEST(WeightRepack, ExtremesMatchStored) {
  test::LevelGuard guard;
  ThreadPool pool(2);
  const int64_t k = 512, n = 9;
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q5_K}) {
    std::vector<uint8_t> w(size_t(n * ggml_row_bytes(t, k)));
    for (int64_t b = 0; b < n * k / 256; ++b) {
      uint8_t* at = w.data() + b * ggml_block_bytes(t);
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
          for (int64_t i = 0; i < m * k; i += 256) x[size_t(i)] = 50 * sign;  // the others round to ±3
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

// The repacking is chosen by the kernels in use: Q4_K_R / Q5_K_R on the AVX-512 sets
// (real or emulated), nothing on the others, and never for other types.
TEST(WeightRepack, RepackedTypeFollowsKernels) {
  test::LevelGuard guard;
  for (const test::KernelPath& path : test::kernel_paths()) {
    path.use();
    const bool avx512 = path.emulated512 || path.level == CpuLevel::Avx512;
    EXPECT_EQ(matmul_repacked_type(GgmlType::Q4_K), avx512 ? GgmlType::Q4_K_R : GgmlType::Q4_K) << path.name();
    EXPECT_EQ(matmul_repacked_type(GgmlType::Q5_K), avx512 ? GgmlType::Q5_K_R : GgmlType::Q5_K) << path.name();
    EXPECT_EQ(matmul_repacked_type(GgmlType::Q6_K), GgmlType::Q6_K);
    EXPECT_EQ(matmul_repacked_type(GgmlType::Q8_0), GgmlType::Q8_0);
  }
  EXPECT_THROW(repack_rows(GgmlType::Q6_K, GgmlType::Q4_K_R, nullptr, nullptr, 256, 1), Error);
  EXPECT_THROW(repack_rows(GgmlType::Q5_K, GgmlType::Q4_K_R, nullptr, nullptr, 256, 1), Error);
  EXPECT_THROW(repack_rows(GgmlType::Q4_K, GgmlType::Q5_K_R, nullptr, nullptr, 256, 1), Error);
}

}  // namespace
}  // namespace pc
