// kernels_avxvnni.cc's code with each AVX-VNNI instruction computed exactly
// by AVX2 instructions (simd16_emu.h, PC_SIMD16_VNNI 2), so machines without
// AVX-VNNI test the AvxVnni level's forms (biased Q8_0 and table codes, the
// step chains) bitwise too; only the instruction mapping needs the CPU.
#define PC_SIMD16_TARGET "avx2,fma,f16c"
#define PC_SIMD16_VNNI 2
#define PC_SIMD16_BACKEND "kernels/simd16_emu.h"
#define PC_SIMD16_V V512Emu
#define PC_SIMD16_NAME "avxvnni-emulated"
#define PC_SIMD16_SET avxvnni_emulated_kernel_set
#define PC_SIMD16_TILES avxvnni_emulated_attn_tiles
#include "kernels/kernels_simd16.inc"
