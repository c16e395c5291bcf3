// Block layouts of the supported weight types, and reference (scalar) conversion
// routines. These are the definition of each format for the rest of the project:
// SIMD kernels are tested against them.
//
//   Q8_0  (32 elems, 34 bytes):  f16 d | i8 qs[32]            x = d * q
//   Q4_0  (32 elems, 18 bytes):  f16 d | u8 qs[16]            x = d * (nibble - 8);
//                                 element j<16 is the low nibble of qs[j], j>=16 the high nibble of qs[j-16]
//   Q4_K  (256 elems, 144 bytes): f16 d | f16 dmin | u8 scales[12] | u8 qs[128]
//                                 8 sub-blocks of 32, 6-bit scale/min each; x = d*sc*q - dmin*m
//   Q6_K  (256 elems, 210 bytes): u8 ql[128] | u8 qh[64] | i8 scales[16] | f16 d
//                                 16 sub-blocks of 16; x = d * scale * (q6 - 32)
//   Q8_K  (256 elems): f32 d | i8 qs[256] | i16 bsums[16]   (activation format for K-quants)
#pragma once
#include <cstdint>

#include "gguf/types.h"

namespace pc {

float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);     // round to nearest even
float bf16_to_fp32(uint16_t h);
uint16_t fp32_to_bf16(float f);     // round to nearest even

struct BlockQ8_0 { uint16_t d; int8_t qs[32]; };
struct BlockQ4_0 { uint16_t d; uint8_t qs[16]; };
struct BlockQ4_K { uint16_t d; uint16_t dmin; uint8_t scales[12]; uint8_t qs[128]; };
struct BlockQ6_K { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; uint16_t d; };
struct BlockQ8_K { float d; int8_t qs[256]; int16_t bsums[16]; };
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ6_K) == 210);

// Converts n elements (a multiple of the type's block size) of a row to F32.
// Throws pc::Error for unsupported types.
void dequantize_row(GgmlType type, const void* src, float* dst, int64_t n);
// Converts n F32 elements into the given type. Supported: F32, F16, BF16, Q8_0,
// Q4_0, Q4_K, Q6_K, Q8_K. Throws pc::Error otherwise.
void quantize_row(GgmlType type, const float* src, void* dst, int64_t n);

}  // namespace pc
