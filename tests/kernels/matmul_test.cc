// Tests of pc::matmul against the reference formats in gguf/quants.h.
//
// Tolerances:
//  * Float weights (F32/F16/BF16): reference = sum_k W[n][k]*x[m][k] in double
//    over the exactly dequantized weights. The kernels accumulate in float with
//    a fixed blocked order, so |y - ref| <= 1e-5 * sum_k |W x| (plenty for
//    K <= 5632: typical float rounding gives ~1e-6 here).
//  * Quantized weights: the kernels quantize each row of x to int8 (one scale per
//    32 or 256 values, d = amax/127 (F16-rounded for 32-blocks), q = round-to-even(x*127/amax)). The test
//    replicates that quantization, so the reference is the exact dot product of
//    dequantized weights and dequantized activations; then the only error left
//    is float rounding of the scale products and the block accumulation:
//    |y - ref| <= 1e-5 * sum_k |W x|.  Against the unquantized x the activation
//    rounding adds relative error; we check ||y - ref_f32|| / ||ref_f32|| < 1e-2
//    for 32-value activation blocks and < 3e-2 for 256-value blocks (K-quants:
//    one scale per 256 values, and the test data has 8x outliers every 97
//    values, so the int8 step is coarse; measured ~1.8-2.1%).
//  * Batch invariance: bitwise (memcmp).
//  * AVX2 path, bitwise (memcmp), over many shapes and thread counts: Q8_0 and
//    Q4_0 against the scalar kernels (same per-element operation order since
//    the block-sum kernels of stop 10), the other types against the frozen
//    pre-#7 AVX2 kernels (matmul_avx2_ref.cc). (For those, scalar and AVX2
//    differ legitimately: different float reduction orders; ScalarVsSimd uses
//    a tolerance.)
#include "cpu_levels.h"
#include "kernels/matmul.h"
#include "kernels/matmul_internal.h"
#include "matmul_avx2_ref.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "gguf/quants.h"
#include "kernels/cpu.h"
#include "kernels/thread_pool.h"

namespace pc {
namespace {

const GgmlType kTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16,   GgmlType::Q8_0,
                           GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q6_K,   GgmlType::Q4_1,
                           GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::IQ4_NL, GgmlType::MXFP4,
                           GgmlType::Q5_K, GgmlType::IQ4_XS};
// The types of matmul_avx2_unpack.cc (no frozen pre-#7 reference kernels).
const GgmlType kUnpackTypes[] = {GgmlType::Q4_1,  GgmlType::Q5_0, GgmlType::Q5_1,  GgmlType::IQ4_NL,
                                 GgmlType::MXFP4, GgmlType::Q5_K, GgmlType::IQ4_XS};
bool unpack_type(GgmlType t) { return std::find(std::begin(kUnpackTypes), std::end(kUnpackTypes), t) != std::end(kUnpackTypes); }

struct Weights {
  GgmlType type;
  int64_t n = 0, k = 0, row_bytes = 0;
  std::vector<uint8_t> data;
  std::vector<float> deq;  // n×k dequantized
  WeightView view() const {
    WeightView v;
    v.type = type;
    v.k = k;
    v.n = n;
    v.data = data.data();
    v.row_bytes = row_bytes;
    return v;
  }
};

Weights make_weights(GgmlType t, int64_t n, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  Weights w;
  w.type = t;
  w.n = n;
  w.k = k;
  w.row_bytes = ggml_row_bytes(t, k);
  w.data.resize(n * w.row_bytes);
  w.deq.resize(n * k);
  std::vector<float> row(k);
  for (int64_t r = 0; r < n; ++r) {
    const float scale = 0.02f * (1.f + float(r % 5));  // rows of different magnitude
    for (auto& v : row) v = nd(rng) * scale;
    quantize_row(t, row.data(), w.data.data() + r * w.row_bytes, k);
    dequantize_row(t, w.data.data() + r * w.row_bytes, w.deq.data() + r * k, k);
  }
  return w;
}

std::vector<float> random_x(int64_t m, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> x(m * k);
  for (auto& v : x) v = nd(rng);
  for (int64_t i = 0; i < m * k; i += 97) x[i] *= 8.f;  // some outliers
  return x;
}

int64_t act_block(GgmlType t) {
  switch (t) {
    case GgmlType::Q8_0:
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::IQ4_NL:
    case GgmlType::MXFP4: return 32;
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
    case GgmlType::IQ4_XS: return 256;
    default: return 0;
  }
}

// The activations as the kernels see them (see matmul_internal.h).
std::vector<double> kernel_activations(GgmlType t, const float* x, int64_t k) {
  std::vector<double> out(x, x + k);
  const int64_t qk = act_block(t);
  if (!qk) return out;
  for (int64_t b = 0; b < k / qk; ++b) {
    float amax = 0.f;
    for (int64_t i = 0; i < qk; ++i) amax = std::fmax(amax, std::fabs(x[b * qk + i]));
    const float id = amax > 0.f ? 127.f / amax : 0.f;
    // 32-element (Q8_0) activation blocks keep an F16 scale, like the Q8_0 format.
    const float d = qk == 32 ? fp16_to_fp32(fp32_to_fp16(amax / 127.f)) : amax / 127.f;
    for (int64_t i = 0; i < qk; ++i) out[b * qk + i] = double(std::nearbyint(x[b * qk + i] * id)) * d;
  }
  return out;
}

using test::LevelGuard;
using test::kernel_paths;
using test::KernelPath;
using test::levels;

std::string label(GgmlType t, const std::string& path, int64_t k) {
  return ggml_type_name(t) + " " + path + " k=" + std::to_string(k);
}
std::string label(GgmlType t, CpuLevel l, int64_t k) { return label(t, cpu_level_name(l), k); }

TEST(Matmul, MatchesReference) {
  LevelGuard guard;
  ThreadPool pool(2);
  const int64_t ks[] = {64, 576, 1536, 2048, 5632};
  const int64_t m = 5, n = 37;
  for (GgmlType t : kTypes) {
    for (int64_t k : ks) {
      if (k % ggml_block_elems(t)) continue;
      const Weights w = make_weights(t, n, k, uint32_t(k * 31 + int(t)));
      const std::vector<float> x = random_x(m, k, uint32_t(k + 7));
      for (const KernelPath& path : kernel_paths()) {
        path.use();
        std::vector<float> y(m * n, -1.f);
        matmul(w.view(), x.data(), m, y.data(), pool);
        double worst = 0, err2 = 0, ref2 = 0;
        for (int64_t r = 0; r < m; ++r) {
          const std::vector<double> xa = kernel_activations(t, x.data() + r * k, k);
          for (int64_t c = 0; c < n; ++c) {
            double ref = 0, scale = 0, exact = 0;
            for (int64_t i = 0; i < k; ++i) {
              const double wv = w.deq[c * k + i];
              ref += wv * xa[i];
              scale += std::fabs(wv * xa[i]);
              exact += wv * double(x[r * k + i]);
            }
            const double e = std::fabs(double(y[r * n + c]) - ref) / scale;
            worst = std::max(worst, e);
            err2 += (y[r * n + c] - exact) * (y[r * n + c] - exact);
            ref2 += exact * exact;
          }
        }
        EXPECT_LT(worst, 1e-5) << label(t, path.name(), k);
        // One int8 scale per 256 values (K-quants) is coarser with the test's outliers.
        const double loose = act_block(t) == 256 ? 3e-2 : 1e-2;
        EXPECT_LT(std::sqrt(err2 / ref2), loose) << label(t, path.name(), k);
      }
    }
  }
}

TEST(Matmul, FloatTailK) {
  // K not a multiple of the 8-wide vectors (F32/F16/BF16 allow any K), and
  // rows longer than matmul.cc's per-task cache budget (25001 F32: 100 KB).
  LevelGuard guard;
  ThreadPool pool(2);
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16}) {
    for (int64_t k : {1, 7, 13, 45, 25001}) {
      const int64_t m = 6, n = 9;
      const Weights w = make_weights(t, n, k, 99);
      const std::vector<float> x = random_x(m, k, 5);
      for (const KernelPath& path : kernel_paths()) {
        path.use();
        std::vector<float> y(m * n);
        matmul(w.view(), x.data(), m, y.data(), pool);
        for (int64_t r = 0; r < m; ++r)
          for (int64_t c = 0; c < n; ++c) {
            double ref = 0, scale = 0;
            for (int64_t i = 0; i < k; ++i) {
              ref += double(w.deq[c * k + i]) * x[r * k + i];
              scale += std::fabs(double(w.deq[c * k + i]) * x[r * k + i]);
            }
            EXPECT_LE(std::fabs(y[r * n + c] - ref), 1e-5 * scale + 1e-30) << label(t, path.name(), k);
          }
      }
    }
  }
}

// y row i must be bitwise identical whatever the batch size, the position of the
// row in the batch, and the thread count.
TEST(Matmul, BatchInvariance) {
  LevelGuard guard;
  ThreadPool pools[3] = {ThreadPool(1), ThreadPool(2), ThreadPool(3)};
  const int64_t n = 37;  // not a multiple of any column tile
  const int64_t total = 80;
  for (GgmlType t : kTypes) {
    const int64_t k = ggml_block_elems(t) == 256 ? 1536 : 576;
    const Weights w = make_weights(t, n, k, 1234);
    const std::vector<float> x = random_x(total, k, 4321);
    for (const KernelPath& path : kernel_paths()) {
      path.use();
      // Baseline: each row alone, one thread.
      std::vector<float> base(total * n);
      for (int64_t r = 0; r < total; ++r) matmul(w.view(), x.data() + r * k, 1, base.data() + r * n, pools[0]);
      for (int64_t m : {1, 3, 4, 5, 7, 13, 64}) {
        for (int64_t off : {int64_t(0), int64_t(1), int64_t(3), total - m}) {
          for (auto& pool : pools) {
            std::vector<float> y(m * n);
            matmul(w.view(), x.data() + off * k, m, y.data(), pool);
            for (int64_t r = 0; r < m; ++r)
              ASSERT_EQ(std::memcmp(y.data() + r * n, base.data() + (off + r) * n, n * sizeof(float)), 0)
                  << label(t, path.name(), k) << " m=" << m << " offset=" << off << " row=" << r
                  << " threads=" << pool.size();
          }
        }
      }
    }
  }
}

TEST(Matmul, ScalarVsSimd) {
  if (detect_cpu_level() < CpuLevel::Avx2) GTEST_SKIP() << "no SIMD level on this machine";
  LevelGuard guard;
  ThreadPool pool(2);
  const int64_t m = 9, n = 21;
  for (GgmlType t : kTypes) {
    for (int64_t k : {256, 2048, 5632}) {
      const Weights w = make_weights(t, n, k, 77);
      const std::vector<float> x = random_x(m, k, 78);
      std::vector<float> ys(m * n), yv(m * n);
      set_cpu_level(CpuLevel::Scalar);
      matmul(w.view(), x.data(), m, ys.data(), pool);
      set_cpu_level(CpuLevel::Avx2);
      matmul(w.view(), x.data(), m, yv.data(), pool);
      for (int64_t r = 0; r < m; ++r) {
        const std::vector<double> xa = kernel_activations(t, x.data() + r * k, k);
        for (int64_t c = 0; c < n; ++c) {
          double scale = 0;
          for (int64_t i = 0; i < k; ++i) scale += std::fabs(double(w.deq[c * k + i]) * xa[i]);
          EXPECT_LE(std::fabs(double(ys[r * n + c]) - yv[r * n + c]), 2e-5 * scale) << label(t, CpuLevel::Avx2, k);
        }
      }
    }
  }
}

// The AVX2 kernels must give bitwise the results of their reference: the
// scalar kernels for Q8_0, Q4_0, Q4_K and Q6_K (which follow the scalar operation
// order), the frozen pre-#7 AVX2 kernels for the other types. Shapes cover every tile shape and tail (m, n not multiples of the tiles),
// decode (m = 1) and prompt batches, several thread counts (task grids).
bool scalar_order(GgmlType t) {
  return t == GgmlType::Q8_0 || t == GgmlType::Q4_0 || t == GgmlType::Q4_K || t == GgmlType::Q6_K;
}

TEST(Matmul, Avx2MatchesReferenceBitwise) {
  if (detect_cpu_level() < CpuLevel::Avx2) GTEST_SKIP() << "no AVX2 on this machine";
  LevelGuard guard;
  set_cpu_level(CpuLevel::Avx2);
  ThreadPool pools[4] = {ThreadPool(1), ThreadPool(2), ThreadPool(3), ThreadPool(4)};
  const int64_t ms[] = {1, 2, 3, 5, 8, 17, 64, 100};
  const int64_t ns[] = {1, 3, 8, 13, 37, 64, 129, 300};
  uint32_t seed = 1;
  for (GgmlType t : kTypes) {
    if (unpack_type(t)) continue;  // Avx2UnpackKernelsBitwiseAcrossShapes
    const int64_t be = ggml_block_elems(t);
    std::vector<int64_t> ks;
    if (be == 256) ks = {256, 512, 1536};
    else if (be == 32) ks = {32, 64, 96, 576, 1536, 2464};  // 2464: 77 blocks (decode passes of 64)
    else ks = {1, 7, 8, 13, 64, 200, 576};
    for (int64_t k : ks) {
      for (int64_t n : ns) {
        const Weights w = make_weights(t, n, k, ++seed);
        for (int64_t m : ms) {
          const std::vector<float> x = random_x(m, k, ++seed);
          std::vector<float> ref(m * n, -1.f);
          if (scalar_order(t)) {
            set_cpu_level(CpuLevel::Scalar);
            matmul(w.view(), x.data(), m, ref.data(), pools[0]);
            set_cpu_level(CpuLevel::Avx2);
          } else {
            ASSERT_TRUE(test::ref::matmul_avx2_ref(w.view(), x.data(), m, ref.data()));
          }
          for (auto& pool : pools) {
            if (pool.size() > 2 && (m * n) % 3) continue;  // keep the test quick
            std::vector<float> y(m * n, -2.f);
            matmul(w.view(), x.data(), m, y.data(), pool);
            for (int64_t r = 0; r < m; ++r)
              for (int64_t c = 0; c < n; ++c)
                ASSERT_EQ(std::memcmp(&y[r * n + c], &ref[r * n + c], sizeof(float)), 0)
                    << label(t, CpuLevel::Avx2, k) << " m=" << m << " n=" << n << " threads=" << pool.size()
                    << " y[" << r << "][" << c << "] = " << y[r * n + c] << " ref " << ref[r * n + c];
          }
        }
      }
    }
  }
}

// Stored Q4_K prompt batches of 128 rows or more run on the AVX2 set by
// repacking each task's columns to Q4_K_X16 (matmul_avx2.cc run_task_q4k):
// bitwise the scalar kernel's results, across thread counts (task grids), a
// column count that leaves a block short of a whole group (the stored tiles
// take it), and batches either side of the threshold.
TEST(Matmul, Avx2StoredQ4KPromptsRepackedPerTaskBitwise) {
  if (detect_cpu_level() < CpuLevel::Avx2) GTEST_SKIP() << "no AVX2 on this machine";
  LevelGuard guard;
  ThreadPool pools[3] = {ThreadPool(1), ThreadPool(2), ThreadPool(3)};
  uint32_t seed = 500;
  for (int64_t k : {256, 1536})
    for (int64_t n : {16, 37, 300}) {
      const Weights w = make_weights(GgmlType::Q4_K, n, k, ++seed);
      for (int64_t m : {127, 128, 131, 200}) {
        const std::vector<float> x = random_x(m, k, ++seed);
        std::vector<float> ref(m * n, -1.f);
        set_cpu_level(CpuLevel::Scalar);
        matmul(w.view(), x.data(), m, ref.data(), pools[0]);
        set_cpu_level(CpuLevel::Avx2);
        for (ThreadPool& pool : pools) {
          std::vector<float> y(m * n, -2.f);
          matmul(w.view(), x.data(), m, y.data(), pool);
          ASSERT_EQ(std::memcmp(y.data(), ref.data(), y.size() * sizeof(float)), 0)
              << "k=" << k << " n=" << n << " m=" << m << " threads=" << pool.size();
        }
      }
    }
}

// The AVX-512 kernel set gives bitwise the results of the path it must match:
// the scalar kernels for Q8_0 / Q4_0 (prompt tiles 16 columns a vector) and
// Q4_K / Q6_K as stored, the AVX2 kernels for F32 / F16 / BF16 (two columns a
// vector), over shapes that
// cover every tile shape and tail (odd column and group counts: a pair's
// second half missing; k % 8 tails), decode rows (the K-quants' and Q8_0's own
// decode kernels; the AVX2 kernels for the others),
// several thread counts, and matmul_many with shared activations. On machines
// without AVX-512 it runs as the emulated set: the same kernel code on pairs
// of AVX2 vectors.
TEST(Matmul, Avx512KernelsMatchScalarBitwise) {
  if (detect_cpu_level() < CpuLevel::Avx2) GTEST_SKIP() << "the emulated AVX-512 kernels need AVX2";
  std::vector<const kern::KernelSet*> sets = {kern::avx512_emulated_kernel_set()};
  if (detect_cpu_level() >= CpuLevel::Avx512) sets.push_back(kern::avx512_kernel_set());
  struct Unforce {
    ~Unforce() { kern::force_kernel_set(nullptr); }
  } unforce;
  LevelGuard guard;
  ThreadPool pools[3] = {ThreadPool(1), ThreadPool(2), ThreadPool(3)};
  uint32_t seed = 900;
  for (const kern::KernelSet* set : sets) {
    ASSERT_NE(set, nullptr);
    for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q4_K,
                       GgmlType::Q6_K}) {
      const bool quant = ggml_block_elems(t) == 32;
      const std::vector<int64_t> ks = quant                            ? std::vector<int64_t>{32, 96, 576, 2464}
                                      : ggml_block_elems(t) == 256 ? std::vector<int64_t>{256, 1536}
                                                             : std::vector<int64_t>{1, 7, 8, 13, 200, 576};
      for (int64_t k : ks) {
        for (int64_t n : {1, 8, 13, 16, 24, 40, 48, 57, 129, 300}) {
          const Weights w = make_weights(t, n, k, ++seed);
          for (int64_t m : {1, 3, 4, 5, 7, 17, 64}) {
            const std::vector<float> x = random_x(m, k, ++seed);
            std::vector<float> ref(m * n, -1.f);
            kern::force_kernel_set(nullptr);
            set_cpu_level(scalar_order(t) ? CpuLevel::Scalar : CpuLevel::Avx2);
            matmul(w.view(), x.data(), m, ref.data(), pools[0]);
            kern::force_kernel_set(set);
            for (auto& pool : pools) {
              if (pool.size() > 1 && (m * n) % 2) continue;  // keep the test quick
              std::vector<float> y(m * n, -2.f);
              matmul(w.view(), x.data(), m, y.data(), pool);
              for (int64_t i = 0; i < m * n; ++i)
                ASSERT_EQ(std::memcmp(&y[i], &ref[i], sizeof(float)), 0)
                    << set->name << " " << ggml_type_name(t) << " k=" << k << " m=" << m << " n=" << n
                    << " threads=" << pool.size() << " y[" << i / n << "][" << i % n << "] = " << y[i] << " ref "
                    << ref[i];
            }
          }
        }
      }
    }
    // Several weights sharing one quantization of x.
    const Weights a = make_weights(GgmlType::Q8_0, 40, 576, ++seed), b = make_weights(GgmlType::Q4_0, 21, 576, ++seed);
    const std::vector<float> x = random_x(9, 576, ++seed);
    std::vector<float> ra(9 * 40), rb(9 * 21), ya(9 * 40, -1.f), yb(9 * 21, -1.f);
    kern::force_kernel_set(nullptr);
    set_cpu_level(CpuLevel::Scalar);
    matmul(a.view(), x.data(), 9, ra.data(), pools[1]);
    matmul(b.view(), x.data(), 9, rb.data(), pools[1]);
    kern::force_kernel_set(set);
    const MatmulOut outs[] = {{a.view(), ya.data()}, {b.view(), yb.data()}};
    matmul_many(outs, x.data(), 9, pools[1]);
    EXPECT_EQ(std::memcmp(ya.data(), ra.data(), ra.size() * sizeof(float)), 0) << set->name;
    EXPECT_EQ(std::memcmp(yb.data(), rb.data(), rb.size() * sizeof(float)), 0) << set->name;
  }
}

// The AVX-512 Q8_0 decode kernel (q8_0_rows16: weights made unsigned by xor
// 0x80, a per-block correction of 128 · sum x) at the quants' extremes: every
// weight -128 or 127 (sums of (w + 128) · x at both ends), alternating signs,
// zero scales, activations at ±127 (a row of equal large values), and an odd
// block count (a lone last block in its vector); bitwise the scalar result.
TEST(Matmul, Avx512Q8DecodeEdgeValues) {
  if (detect_cpu_level() < CpuLevel::Avx2) GTEST_SKIP() << "the emulated AVX-512 kernels need AVX2";
  std::vector<const kern::KernelSet*> sets = {kern::avx512_emulated_kernel_set()};
  if (detect_cpu_level() >= CpuLevel::Avx512) sets.push_back(kern::avx512_kernel_set());
  struct Unforce {
    ~Unforce() { kern::force_kernel_set(nullptr); }
  } unforce;
  LevelGuard guard;
  ThreadPool pool(2);
  for (int64_t k : {32, 96, 544, 1056}) {
    const int64_t nb = k / 32, n = 19;
    Weights w;
    w.type = GgmlType::Q8_0;
    w.n = n;
    w.k = k;
    w.row_bytes = ggml_row_bytes(GgmlType::Q8_0, k);
    w.data.assign(size_t(n * w.row_bytes), 0);
    for (int64_t c = 0; c < n; ++c) {
      auto* blk = reinterpret_cast<BlockQ8_0*>(w.data.data() + c * w.row_bytes);
      for (int64_t b = 0; b < nb; ++b) {
        blk[b].d = (c + b) % 7 == 3 ? 0 : uint16_t(0x3C00 + 0x40 * ((c * 3 + b) % 9));  // 0 or 1.0..1.5
        for (int i = 0; i < 32; ++i)
          blk[b].qs[i] = int8_t(c % 3 == 0 ? -128 : c % 3 == 1 ? 127 : (i + b) % 2 ? 127 : -128);
      }
    }
    for (int variant = 0; variant < 2; ++variant) {
      std::vector<float> x(static_cast<size_t>(k));
      for (int64_t i = 0; i < k; ++i) x[i] = variant ? 3.f : (i % 5 == 0 ? -1.f : 0.25f * float(i % 11));
      std::vector<float> ref(static_cast<size_t>(n)), y(static_cast<size_t>(n));
      kern::force_kernel_set(nullptr);
      set_cpu_level(CpuLevel::Scalar);
      matmul(w.view(), x.data(), 1, ref.data(), pool);
      for (const kern::KernelSet* set : sets) {
        kern::force_kernel_set(set);
        std::fill(y.begin(), y.end(), -2.f);
        matmul(w.view(), x.data(), 1, y.data(), pool);
        for (int64_t c = 0; c < n; ++c)
          ASSERT_EQ(std::memcmp(&y[c], &ref[c], sizeof(float)), 0)
              << set->name << " k=" << k << " variant " << variant << " y[" << c << "] = " << y[c] << " ref " << ref[c];
      }
    }
  }
}

// matmul_many (one quantization of x and one dispatch for several weights)
// gives each output bitwise what matmul gives it alone, for mixed weight types
// (shared and separate activation layouts) on every level, m and thread count.
TEST(Matmul, ManyMatchesSeparateCalls) {
  LevelGuard guard;
  ThreadPool pools[3] = {ThreadPool(1), ThreadPool(2), ThreadPool(3)};
  const int64_t k = 512;
  const GgmlType types[] = {GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q8_0, GgmlType::F16, GgmlType::Q4_0};
  const int64_t ns[] = {37, 8, 130, 3, 64};
  std::vector<Weights> ws;
  for (int i = 0; i < 5; ++i) ws.push_back(make_weights(types[i], ns[i], k, 500 + i));
  for (const KernelPath& path : kernel_paths()) {
    path.use();
    for (int64_t m : {1, 3, 4, 17, 70}) {
      const std::vector<float> x = random_x(m, k, 77 + uint32_t(m));
      for (auto& pool : pools) {
        std::vector<std::vector<float>> want(ws.size()), got(ws.size());
        std::vector<MatmulOut> outs;
        for (size_t i = 0; i < ws.size(); ++i) {
          want[i].assign(m * ns[i], 0.f);
          got[i].assign(m * ns[i], -1.f);
          matmul(ws[i].view(), x.data(), m, want[i].data(), pool);
          outs.push_back({ws[i].view(), got[i].data()});
        }
        matmul_many(outs, x.data(), m, pool);
        for (size_t i = 0; i < ws.size(); ++i)
          ASSERT_EQ(std::memcmp(got[i].data(), want[i].data(), want[i].size() * sizeof(float)), 0)
              << label(types[i], path.name(), k) << " output " << i << " m=" << m << " threads=" << pool.size();
      }
    }
  }
  // Weights of different row lengths cannot share x.
  const Weights other = make_weights(GgmlType::Q8_0, 4, 256, 9);
  std::vector<float> x(512), y0(37), y1(4);
  const MatmulOut bad[] = {{ws[0].view(), y0.data()}, {other.view(), y1.data()}};
  EXPECT_THROW(matmul_many(bad, x.data(), 1, pools[0]), Error);
}

// matmul_each (each weight its own x, one dispatch for up to 16) gives each output
// bitwise what matmul gives it alone: mixed types and row lengths, inputs shared by
// some outputs and not others, more outputs than one dispatch takes, every level,
// m and thread count.
TEST(Matmul, EachMatchesSeparateCalls) {
  LevelGuard guard;
  ThreadPool pools[3] = {ThreadPool(1), ThreadPool(2), ThreadPool(3)};
  const GgmlType types[] = {GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::F16, GgmlType::Q4_0, GgmlType::Q6_K};
  std::vector<Weights> ws;
  std::vector<int64_t> ks, ns;
  for (int i = 0; i < 19; ++i) {
    ks.push_back(i % 3 == 0 ? 256 : 512);
    ns.push_back(8 + 13 * (i % 4));
    ws.push_back(make_weights(types[i % 5], ns.back(), ks.back(), 700 + i));
  }
  for (const KernelPath& path : kernel_paths()) {
    path.use();
    for (int64_t m : {1, 3, 17}) {
      // Inputs: outputs 2j and 2j + 1 of the same row length share one.
      std::vector<std::vector<float>> xs;
      for (size_t i = 0; i < ws.size(); ++i) xs.push_back(random_x(m, ks[i], 91 + uint32_t(i + 7 * m)));
      for (auto& pool : pools) {
        std::vector<std::vector<float>> want(ws.size()), got(ws.size());
        std::vector<MatmulIn> ins;
        for (size_t i = 0; i < ws.size(); ++i) {
          const float* x = (i % 2 && ks[i - 1] == ks[i]) ? xs[i - 1].data() : xs[i].data();
          want[i].assign(m * ns[i], 0.f);
          got[i].assign(m * ns[i], -1.f);
          matmul(ws[i].view(), x, m, want[i].data(), pool);
          ins.push_back({ws[i].view(), x, got[i].data()});
        }
        matmul_each(ins, m, pool);
        for (size_t i = 0; i < ws.size(); ++i)
          ASSERT_EQ(std::memcmp(got[i].data(), want[i].data(), want[i].size() * sizeof(float)), 0)
              << label(types[i % 5], path.name(), ks[i]) << " output " << i << " m=" << m
              << " threads=" << pool.size();
      }
    }
  }
}

TEST(Matmul, UnsupportedTypeThrows) {
  ThreadPool pool(1);
  std::vector<uint8_t> data(1024);
  std::vector<float> x(256), y(1);
  WeightView w;
  w.type = GgmlType::Q3_K;
  w.k = 256;
  w.n = 1;
  w.data = data.data();
  w.row_bytes = ggml_row_bytes(GgmlType::Q3_K, 256);
  try {
    matmul(w, x.data(), 1, y.data(), pool);
    FAIL() << "no exception";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Q3_K"), std::string::npos) << e.what();
  }
}

// The kernels of matmul_avx2_unpack.cc (also what the AVX-512 and emulated
// AVX-512 sets run for these types as stored): every element bitwise the
// scalar result of its row computed alone on one thread (they follow its
// operations), over shapes that cover every tile shape and tail (odd column
// counts: a pair's second half missing), decode rows and prompt batches, and
// several thread counts, on the AVX2 path and the AVX-512 sets.
TEST(Matmul, Avx2UnpackKernelsBitwiseAcrossShapes) {
  if (detect_cpu_level() < CpuLevel::Avx2) GTEST_SKIP() << "no AVX2 on this machine";
  LevelGuard guard;
  std::vector<const kern::KernelSet*> sets = {nullptr, kern::avx512_emulated_kernel_set()};
  if (detect_cpu_level() >= CpuLevel::Avx512) sets.push_back(kern::avx512_kernel_set());
  ThreadPool pools[3] = {ThreadPool(1), ThreadPool(2), ThreadPool(3)};
  uint32_t seed = 3000;
  for (GgmlType t : kUnpackTypes) {
    const std::vector<int64_t> ks = ggml_block_elems(t) == 256 ? std::vector<int64_t>{256, 1536}
                                                               : std::vector<int64_t>{32, 96, 576};
    for (int64_t k : ks) {
      for (int64_t n : {1, 3, 8, 13, 37}) {
        const Weights w = make_weights(t, n, k, ++seed);
        const int64_t m_max = 17;
        const std::vector<float> x = random_x(m_max, k, ++seed);
        set_cpu_level(CpuLevel::Scalar);
        kern::force_kernel_set(nullptr);
        std::vector<float> ref(m_max * n);
        for (int64_t r = 0; r < m_max; ++r) matmul(w.view(), x.data() + r * k, 1, ref.data() + r * n, pools[0]);
        set_cpu_level(CpuLevel::Avx2);
        for (const kern::KernelSet* set : sets) {
          kern::force_kernel_set(set);
          for (int64_t m : {1, 2, 3, 4, 5, 8, 17}) {
            for (auto& pool : pools) {
              std::vector<float> y(m * n, -2.f);
              matmul(w.view(), x.data(), m, y.data(), pool);
              ASSERT_EQ(std::memcmp(y.data(), ref.data(), y.size() * sizeof(float)), 0)
                  << label(t, set ? set->name : "avx2", k) << " m=" << m << " n=" << n << " threads=" << pool.size();
            }
          }
        }
      }
    }
  }
}

TEST(Matmul, EmptyShapes) {
  ThreadPool pool(2);
  const Weights w = make_weights(GgmlType::Q8_0, 3, 64, 1);
  std::vector<float> x(64), y(3, 7.f);
  matmul(w.view(), x.data(), 0, y.data(), pool);
  EXPECT_EQ(y[0], 7.f);
}

// Rough speed report (not a pass/fail criterion): the shapes of a 135M model's
// FFN (k=576, n=1536) as a 512-token prompt batch and as one decode step.
TEST(Matmul, Timing) {
  ThreadPool pool(2);
  const int64_t k = 576, n = 1536;
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::F16}) {
    if (k % ggml_block_elems(t)) continue;
    const Weights w = make_weights(t, n, k, 3);
    for (int64_t m : {512, 1}) {
      const std::vector<float> x = random_x(m, k, 4);
      std::vector<float> y(m * n);
      matmul(w.view(), x.data(), m, y.data(), pool);  // warm-up
      const int reps = m == 1 ? 2000 : 10;
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < reps; ++i) matmul(w.view(), x.data(), m, y.data(), pool);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
      std::printf("%s m=%lld k=%lld n=%lld, 2 threads, %s: %.3f ms, %.1f GFLOP/s, %.1f GB/s weights\n",
                  ggml_type_name(t).c_str(), (long long)m, (long long)k, (long long)n,
                  cpu_level_name(cpu_level()).c_str(), s * 1e3, 2.0 * m * k * n / s * 1e-9,
                  double(w.data.size()) / s * 1e-9);
    }
  }
}

// Decode speed report (not pass/fail): one activation row against weights
// streamed from DRAM (5 matrices of 12000×1536, 98 MB in Q8_0, cycled so that
// the caches cannot hold them), current AVX2 path vs the frozen pre-#7 one,
// interleaved, one thread each. Reports the weight bytes read per second.
TEST(Matmul, DecodeStreamVsFrozenReference) {
  if (detect_cpu_level() < CpuLevel::Avx2) GTEST_SKIP() << "no AVX2 on this machine";
  LevelGuard guard;
  set_cpu_level(CpuLevel::Avx2);
  ThreadPool pool1(1);
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_K}) {
    const int64_t k = 1536, n = 12000;
    std::vector<Weights> ws;
    for (int i = 0; i < 5; ++i) ws.push_back(make_weights(t, n, k, 100 + i));
    const std::vector<float> x = random_x(1, k, 5);
    std::vector<float> y(n), yr(n);
    double tn = 1e30, to = 1e30;
    for (int rep = 0; rep < 5; ++rep) {
      auto t0 = std::chrono::steady_clock::now();
      for (const Weights& w : ws) matmul(w.view(), x.data(), 1, y.data(), pool1);
      auto t1 = std::chrono::steady_clock::now();
      for (const Weights& w : ws) test::ref::matmul_avx2_ref(w.view(), x.data(), 1, yr.data());
      auto t2 = std::chrono::steady_clock::now();
      tn = std::min(tn, std::chrono::duration<double>(t1 - t0).count());
      to = std::min(to, std::chrono::duration<double>(t2 - t1).count());
    }
    const double bytes = double(ws.size()) * ws[0].data.size();
    std::printf("%s decode stream (1 thread, %.0f MB): new %.1f ms (%.1f GB/s)  old %.1f ms (%.1f GB/s)\n",
                ggml_type_name(t).c_str(), bytes * 1e-6, tn * 1e3, bytes / tn * 1e-9, to * 1e3, bytes / to * 1e-9);
  }
}

// Speed report (not a pass/fail criterion): the current AVX2 matmul against
// the frozen pre-#7 kernels (matmul_avx2_ref.cc), one thread, calls
// interleaved so that both see the same machine load; per-call thread CPU
// time, the minimum and the median over the calls. smollm-135m shapes.
TEST(Matmul, SpeedVsFrozenReference) {
  if (detect_cpu_level() < CpuLevel::Avx2) GTEST_SKIP() << "no AVX2 on this machine";
  LevelGuard guard;
  set_cpu_level(CpuLevel::Avx2);
  ThreadPool pool(1);
  auto cpu_now = [] {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
  };
  struct Shape { GgmlType t; int64_t m, k, n; int calls; };
  const Shape shapes[] = {
      {GgmlType::Q8_0, 512, 576, 1536, 12}, {GgmlType::Q8_0, 512, 1536, 576, 12}, {GgmlType::Q8_0, 1, 576, 1536, 400},
      {GgmlType::Q4_0, 512, 576, 1536, 12}, {GgmlType::Q4_0, 1, 576, 1536, 400},
      {GgmlType::F16, 512, 576, 1536, 12}, {GgmlType::F16, 1, 576, 1536, 400},
      {GgmlType::Q4_K, 512, 1536, 576, 12}, {GgmlType::Q4_K, 1, 1536, 576, 400},
      {GgmlType::Q6_K, 512, 1536, 576, 8},
  };
  for (const Shape& sh : shapes) {
    const Weights w = make_weights(sh.t, sh.n, sh.k, 11);
    const std::vector<float> x = random_x(sh.m, sh.k, 12);
    std::vector<float> y(sh.m * sh.n), yr(sh.m * sh.n);
    std::vector<double> tn, to;
    for (int i = 0; i < sh.calls; ++i) {
      double t0 = cpu_now();
      matmul(w.view(), x.data(), sh.m, y.data(), pool);
      double t1 = cpu_now();
      test::ref::matmul_avx2_ref(w.view(), x.data(), sh.m, yr.data());
      double t2 = cpu_now();
      tn.push_back(t1 - t0);
      to.push_back(t2 - t1);
    }
    std::sort(tn.begin(), tn.end());
    std::sort(to.begin(), to.end());
    if (!scalar_order(sh.t)) {  // (Q8_0, Q4_0, Q4_K and Q6_K changed order on purpose; see above)
      EXPECT_EQ(std::memcmp(y.data(), yr.data(), y.size() * sizeof(float)), 0) << ggml_type_name(sh.t);
    }
    std::printf("%-5s m=%-4lld k=%-5lld n=%-5lld  new %9.1f us (median %9.1f)  old %9.1f us (median %9.1f)  speed-up %.2fx (median %.2fx)\n",
                ggml_type_name(sh.t).c_str(), (long long)sh.m, (long long)sh.k, (long long)sh.n, tn[0] * 1e6,
                tn[tn.size() / 2] * 1e6, to[0] * 1e6, to[to.size() / 2] * 1e6, to[0] / tn[0],
                to[to.size() / 2] / tn[tn.size() / 2]);
  }
}

}  // namespace
}  // namespace pc
