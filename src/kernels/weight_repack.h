// Weight layouts repacked at load for the matmul kernels in use.
//
// Q4_K_R (GgmlType::Q4_K_R): each Q4_K block, losslessly rearranged (same
// 144 bytes, so decode streams no more bytes) so the AVX-512 decode kernel
// spends fewer instructions a block (its loop was compute-bound per core,
// below the memory's read bandwidth):
//   - the quants in 64-byte halves whose nibbles match the activations'
//     order: byte j of half p holds value 128p + j in its low nibble and
//     value 128p + 64 + j in its high nibble, so a half's low (high) nibbles
//     are 64 consecutive values, 2 sub-blocks, dotted with 64 consecutive
//     activation bytes (one plain load, no lane shuffle);
//   - the 6-bit sub-block scales sc and mins mn rearranged so the scales are
//     one AND away from bytes and the mins a few shifts away from words:
//       scm[j]     = sc[j] | (mn[j] >> 4) << 6          (j < 8)
//       scm[8 + j] = (mn[j] & 15) | (mn[j + 4] & 15) << 4  (j < 4)
//     followed by d and dmin (F16), so the block's first 16 bytes are one load.
// Q5_K_R (GgmlType::Q5_K_R): each Q5_K block with the same header and quants
// rearrangement (176 bytes, as Q5_K); qh stays as stored (the fifth bit of
// value v is bit v / 32 of qh[v % 32], which suits both quant orders).
// Every kernel computes from them the same integers and the same float
// operations as from the stored blocks, so a row's result is bitwise the same
// in either layout.
#pragma once
#include <cstdint>

#include "gguf/types.h"

namespace pc {

struct BlockQ4_KR {
  uint8_t scm[12];  // scales and mins, as above
  uint16_t d, dmin;  // F16, as in Q4_K
  uint8_t qs[128];
};
static_assert(sizeof(BlockQ4_KR) == 144, "BlockQ4_KR is as long as BlockQ4_K");

struct BlockQ5_KR {
  uint8_t scm[12];  // as BlockQ4_KR
  uint16_t d, dmin;
  uint8_t qh[32];   // as Q5_K
  uint8_t qs[128];  // as BlockQ4_KR
};
static_assert(sizeof(BlockQ5_KR) == 176, "BlockQ5_KR is as long as BlockQ5_K");

// Repacks / unpacks one row of k values (k a multiple of 256); unpack is the
// exact inverse of repack.
void repack_row_q4_kr(const uint8_t* q4_k, uint8_t* q4_kr, int64_t k);
void unpack_row_q4_kr(const uint8_t* q4_kr, uint8_t* q4_k, int64_t k);
void repack_row_q5_kr(const uint8_t* q5_k, uint8_t* q5_kr, int64_t k);
void unpack_row_q5_kr(const uint8_t* q5_kr, uint8_t* q5_k, int64_t k);

// The layout the weights stored as `t` are repacked to for the matmul kernels
// in use (cpu_level(), or the forced kernel set), or t itself when they read
// t fastest. Every kernel path reads every layout this returns on any path
// (paths without a kernel of their own unpack each task's rows), so a model
// repacked for one path stays correct if another path runs it.
GgmlType matmul_repacked_type(GgmlType t);

// Repacks n rows of k values stored as `from` into `to`
// (matmul_repacked_type(from)), ggml_row_bytes(to, k) bytes a row at dst.
// Throws pc::Error for a pair it does not convert.
void repack_rows(GgmlType from, GgmlType to, const uint8_t* src, uint8_t* dst, int64_t k, int64_t n);

}  // namespace pc
