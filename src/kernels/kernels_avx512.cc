// AVX-512 kernels (CpuLevel::Avx512: F, BW, DQ, VL and VNNI): the matmul
// kernels of matmul_avx512_impl.h (prompt tiles of Q8_0 / Q4_0, Q4_K / Q5_K /
// Q6_K and F32 / F16 / BF16 weights, decode kernels of Q4_K / Q5_K / Q6_K) and
// the attention tiles of paged_attention_avx512_impl.h on real 512-bit vectors
// (simd16_avx512.h); every other case is the AVX2 kernels'.
// Only this file is compiled for AVX-512 (target pragma inside
// kernels_simd16.inc, after the standard headers), so nothing else in the
// binary uses it unless the dispatchers (matmul.cc, paged_attention.cc)
// picked this path on a CPU that runs it.
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as the unused operand
// of their masked builtins, which -W(maybe-)uninitialized reports in every
// function that inlines them.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#define PC_SIMD16_TARGET "avx2,fma,f16c,avx512f,avx512bw,avx512dq,avx512vl,avx512vnni"
#define PC_SIMD16_BACKEND "kernels/simd16_avx512.h"
#define PC_SIMD16_V V512
#define PC_SIMD16_NAME "avx512"
#define PC_SIMD16_SET avx512_kernel_set
#define PC_SIMD16_TILES avx512_attn_tiles
#include "kernels/kernels_simd16.inc"
