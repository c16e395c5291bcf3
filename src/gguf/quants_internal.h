// Per-format conversion routines behind quantize_row() / dequantize_row()
// (quants.cc dispatches). nb = number of blocks. Not part of the public API.
#pragma once
#include <cstdint>

#include "gguf/quants.h"

namespace pc::quant {

// Round to nearest, ties to even (the default FP rounding mode).
int nearest_int(float f);
// Q4_K / Q5_K: the 6-bit scale and min of sub-block j (0..7) from the 12 scale
// bytes, and the inverse packing of 8 scales and 8 mins.
void k4_scale_min(int j, const uint8_t* s, int& sc, int& m);
void k4_pack_scales(const int* ls, const int* lm, uint8_t* s);

// quants_affine.cc: a scale and an offset per block (Q4_1, Q5_0, Q5_1, Q5_K).
void quantize_q4_1(const float* x, BlockQ4_1* y, int64_t nb);
void dequantize_q4_1(const BlockQ4_1* x, float* y, int64_t nb);
void quantize_q5_0(const float* x, BlockQ5_0* y, int64_t nb);
void dequantize_q5_0(const BlockQ5_0* x, float* y, int64_t nb);
void quantize_q5_1(const float* x, BlockQ5_1* y, int64_t nb);
void dequantize_q5_1(const BlockQ5_1* x, float* y, int64_t nb);
void quantize_q5_k(const float* x, BlockQ5_K* y, int64_t nb);
void dequantize_q5_k(const BlockQ5_K* x, float* y, int64_t nb);

// quants_codebook.cc: 4-bit indices into a table of values (IQ4_NL, IQ4_XS, MXFP4).
void quantize_iq4_nl(const float* x, BlockIQ4_NL* y, int64_t nb);
void dequantize_iq4_nl(const BlockIQ4_NL* x, float* y, int64_t nb);
void quantize_iq4_xs(const float* x, BlockIQ4_XS* y, int64_t nb);
void dequantize_iq4_xs(const BlockIQ4_XS* x, float* y, int64_t nb);
void quantize_mxfp4(const float* x, BlockMXFP4* y, int64_t nb);
void dequantize_mxfp4(const BlockMXFP4* x, float* y, int64_t nb);

}  // namespace pc::quant
