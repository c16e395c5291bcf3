// Matrix multiplication against weights in their stored (possibly quantized) type.
//
//   y[m][n] = sum_k x[m][k] * W[n][k]      x: M×K f32 row-major, W: N×K, y: M×N f32
//
// Batch-invariance contract: y[m][n] is a function of (x[m], W[n], cpu_level())
// only — bitwise identical whatever M is, wherever row m sits in the batch, and
// however many threads run. Work is split over rows and columns, never along K,
// and each element's reduction order is fixed.
#pragma once
#include <cstdint>
#include <span>

#include "gguf/types.h"

namespace pc {

class ThreadPool;

// A weight matrix as stored in GGUF: ne[0] = k (row length), ne[1] = n (rows).
struct WeightView {
  GgmlType type = GgmlType::F32;
  int64_t k = 0;
  int64_t n = 0;
  const uint8_t* data = nullptr;
  int64_t row_bytes = 0;  // ggml_row_bytes(type, k)
};

// Throws pc::Error for weight types other than F32, F16, BF16, Q8_0, Q4_0, Q4_1,
// Q5_0, Q5_1, IQ4_NL, MXFP4, Q4_K, Q5_K, Q6_K, IQ4_XS (ggml_type_supported())
// and the repacked X16 layouts of kernels/weight_repack.h, or a k
// that is not a multiple of the type's block size.
//
// For quantized weights each row of x is first quantized to int8 (blocks of 32
// for the 32-element types, of 256 for Q4_K/Q5_K/Q6_K/IQ4_XS) into a grow-only scratch buffer owned by
// the calling thread (AVX2 Q8_0 prompt batches also repack each task's weight
// rows into a grow-only buffer of the thread running it): no allocation in
// steady state. matmul may be called from
// several threads at once only with different pools (a pool is not reentrant).
// Code path: cpu_level() (cpu.h); Avx512 has its own prompt-batch kernels for
// Q8_0 / Q4_0 / Q4_K(_R) / Q5_K(_R) / Q6_K / F32 / F16 / BF16 weights and decode
// kernels for Q8_0 / Q4_K(_R) / Q5_K(_R) / Q6_K, and runs the Avx2 ones otherwise.
void matmul(const WeightView& w, const float* x, int64_t m, float* y, ThreadPool& pool);

// One weight matrix and its output (m × w.n floats) for matmul_many().
struct MatmulOut {
  WeightView w;
  float* y = nullptr;
};

// Several weight matrices applied to the same x (Q/K/V, gate/up): each y is
// bitwise what matmul(w, x, m, y, pool) gives, but x is quantized once per
// activation layout and all the outputs' tasks run in one pool dispatch.
// All weights must have the same k (throws pc::Error otherwise).
void matmul_many(std::span<const MatmulOut> outs, const float* x, int64_t m, ThreadPool& pool);

// One weight matrix, its input (m × w.k floats) and its output (m × w.n) for
// matmul_each().
struct MatmulIn {
  WeightView w;
  const float* x = nullptr;
  float* y = nullptr;
};

// Several weight matrices each applied to its own x (the down projections of a
// decode token's experts): each y is bitwise what matmul(w, x, m, y, pool) gives,
// and up to 16 of them run in one pool dispatch, so a thread streams its share of
// every weight without a wait between them.
void matmul_each(std::span<const MatmulIn> ins, int64_t m, ThreadPool& pool);

}  // namespace pc
