// The 16-lane kernels (matmul_avx512_impl.h, paged_attention_avx512_impl.h)
// on pairs of ymm registers with the AVX-VNNI instructions (vpdpbusd and
// vpdpwssd on ymm: Intel Alder Lake and later, AMD Zen 5): the AvxVnni
// level's X16 weight kernels (matmul_avx2.cc hands those layouts here). The
// int8 products take the AVX-512 backend's forms (simd16_emu.h,
// PC_SIMD16_VNNI), so the same integers as every other path.
#define PC_SIMD16_TARGET "avx2,fma,f16c,avxvnni"
#define PC_SIMD16_VNNI 1
#define PC_SIMD16_BACKEND "kernels/simd16_emu.h"
#define PC_SIMD16_V V512Emu
#define PC_SIMD16_NAME "avxvnni"
#define PC_SIMD16_SET avxvnni_kernel_set
#define PC_SIMD16_TILES avxvnni_attn_tiles
#include "kernels/kernels_simd16.inc"
