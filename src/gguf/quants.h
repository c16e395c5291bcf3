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
//
// Formats added from the GGUF reference definitions (ggml-common.h block layouts,
// ggml-quants.c dequantize_row_*), element j < 16 of a 32-element group always in the
// low nibble of qs[j], element j + 16 in its high nibble:
//   Q4_1  (32, 20 B):   f16 d | f16 m | u8 qs[16]                 x = d*q + m, q in [0, 15]
//   Q5_0  (32, 22 B):   f16 d | u8 qh[4] | u8 qs[16]               x = d*(q - 16), q in [0, 31];
//                        bit 4 of element e is bit e of qh read as a little-endian uint32
//   Q5_1  (32, 24 B):   f16 d | f16 m | u8 qh[4] | u8 qs[16]       x = d*q + m, q as Q5_0's
//   IQ4_NL (32, 18 B):  f16 d | u8 qs[16]                         x = d * kIq4nlValues[nibble]
//   MXFP4 (32, 17 B):   u8 e (E8M0) | u8 qs[16]                   x = e8m0_half(e) * kMxfp4Values[nibble]
//                        (the E2M1 codes doubled, so the scale is 2^(e-128): exact)
//   Q5_K  (256, 176 B): f16 d | f16 dmin | u8 scales[12] | u8 qh[32] | u8 qs[128]
//                        Q4_K's scales and nibbles, plus bit 4 of element 64c + l (l < 32)
//                        in bit 2c of qh[l] and of element 64c + 32 + l in bit 2c + 1
//   IQ4_XS (256, 136 B): f16 d | u16 scales_h | u8 scales_l[4] | u8 qs[128]
//                        8 sub-blocks of 32 laid out as IQ4_NL's; sub-block i's 6-bit scale
//                        ls = (scales_l[i/2] >> 4*(i%2)) & 15 | ((scales_h >> 2i) & 3) << 4,
//                        x = d*(ls - 32) * kIq4nlValues[nibble]
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
struct BlockQ4_1 { uint16_t d; uint16_t m; uint8_t qs[16]; };
struct BlockQ5_0 { uint16_t d; uint8_t qh[4]; uint8_t qs[16]; };
struct BlockQ5_1 { uint16_t d; uint16_t m; uint8_t qh[4]; uint8_t qs[16]; };
struct BlockIQ4_NL { uint16_t d; uint8_t qs[16]; };
struct BlockMXFP4 { uint8_t e; uint8_t qs[16]; };
struct BlockQ5_K { uint16_t d; uint16_t dmin; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; };
struct BlockIQ4_XS { uint16_t d; uint16_t scales_h; uint8_t scales_l[4]; uint8_t qs[128]; };
static_assert(sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 && sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockIQ4_NL) == 18 && sizeof(BlockMXFP4) == 17);
static_assert(sizeof(BlockQ5_K) == 176 && sizeof(BlockIQ4_XS) == 136);

// The non-linear 4-bit codebook of IQ4_NL and IQ4_XS.
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};
// MXFP4's E2M1 codes, doubled: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives (sign bit 3).
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
// Half the E8M0 scale e: 2^(e - 128), as a float (2^-128 and 2^-127 are subnormal).
float e8m0_half_to_fp32(uint8_t e);
// Bit 4 of the 5-bit level of Q5_0 / Q5_1 element j (0..31), from the block's qh.
inline int q5_high_bit(const uint8_t qh[4], int j) { return (qh[j / 8] >> (j % 8)) & 1; }

// Converts n elements (a multiple of the type's block size) of a row to F32.
// Throws pc::Error for unsupported types.
void dequantize_row(GgmlType type, const void* src, float* dst, int64_t n);
// Converts n F32 elements into the given type. Supported: F32, F16, BF16, Q8_0,
// Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4, Q4_K, Q5_K, Q6_K, IQ4_XS, Q8_K. Throws
// pc::Error otherwise. The quantizers are simple (no importance search): the
// random-weight models need valid files, not the best rounding.
void quantize_row(GgmlType type, const float* src, void* dst, int64_t n);

}  // namespace pc
