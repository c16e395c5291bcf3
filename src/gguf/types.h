// Tensor element types of the GGUF / ggml format and their block geometry.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace pc {

// Values are the on-disk ggml type ids.
enum class GgmlType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ4_NL = 20, IQ4_XS = 23,
  I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, BF16 = 30, MXFP4 = 39,
  // Internal layouts, never in a file (ids from kFirstInternalTypeId, which the
  // GGUF reader rejects): weights repacked at load for the kernels in use
  // (kernels/weight_repack.h). Not ggml_type_supported(): only matmul reads them.
  Q4_K_X16 = 0x10000 + 12,  // Q4_K rows interleaved 16 at a time (BlockQ4_KX16: 16 blocks, 2304 bytes)
  Q5_K_X16 = 0x10000 + 13,  // Q5_K rows interleaved 16 at a time (BlockQ5_KX16: 16 blocks, 2816 bytes)
  Q6_K_X16 = 0x10000 + 14,  // Q6_K rows interleaved 16 at a time (BlockQ6_KX16: 16 blocks, 3360 bytes)
  Q8_0_X16 = 0x10000 + 8,   // Q8_0 rows interleaved 16 at a time (BlockQ8_0X16s of 544 bytes, in runs of 4)
  Q4_0_X16 = 0x10000 + 2,   // Q4_0 rows interleaved 16 at a time (BlockQ4_0X16: 16 blocks, 288 bytes)
  Q5_0_X16 = 0x10000 + 6,   // Q5_0 rows interleaved 16 at a time (BlockQ5_0X16: 16 blocks, 352 bytes)
  Q4_1_X16 = 0x10000 + 3,   // Q4_1 rows interleaved 16 at a time (BlockQ4_1X16: 16 blocks, 320 bytes)
  Q5_1_X16 = 0x10000 + 7,   // Q5_1 rows interleaved 16 at a time (BlockQ5_1X16: 16 blocks, 384 bytes)
  IQ4_NL_X16 = 0x10000 + 20,  // IQ4_NL rows interleaved 16 at a time (BlockIQ4_NLX16: 16 blocks, 288 bytes)
  IQ4_XS_X16 = 0x10000 + 23,  // IQ4_XS rows interleaved 16 at a time (BlockIQ4_XSX16: 16 blocks, 2176 bytes)
  MXFP4_X16 = 0x10000 + 39,   // MXFP4 rows interleaved 16 at a time (BlockMXFP4X16: 16 blocks, 272 bytes)
};
constexpr uint32_t kFirstInternalTypeId = 0x10000;

// Name as ggml spells it ("Q4_K"); "type#N" for ids we do not know.
std::string ggml_type_name(GgmlType t);
// True for the weight types the engine computes with (ggml_supported_type_names()).
bool ggml_type_supported(GgmlType t);
// "F32, F16, BF16, Q8_0, Q4_0, ...": the supported types, for error messages.
std::string ggml_supported_type_names();
// Elements per block (1 for plain float types, 32 for Q8_0/Q4_0/..., 256 for K-quants
// and IQ4_XS).
// 0 for unknown types.
int64_t ggml_block_elems(GgmlType t);
// Bytes per block; 0 for unknown types.
int64_t ggml_block_bytes(GgmlType t);
// Bytes of a row of n elements (n must be a multiple of the block size).
inline int64_t ggml_row_bytes(GgmlType t, int64_t n) {
  return n / ggml_block_elems(t) * ggml_block_bytes(t);
}

}  // namespace pc
