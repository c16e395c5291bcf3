// The AVX-512 kernels (matmul_avx512_impl.h, paged_attention_avx512_impl.h)
// built on an AVX2 emulation of their 16-lane operations (simd16_emu.h: each
// a pair of 8-lane AVX2 operations with the same per-lane results), for tests
// on machines without AVX-512: it runs the AVX-512 path's tiling, panel reads
// and per-lane arithmetic, so a mistake in them shows as a bitwise mismatch
// here too. Only the mapping of each operation to its AVX-512 instruction
// (simd16_avx512.h) needs a machine with AVX-512 to run.
#define PC_SIMD16_TARGET "avx2,fma,f16c"
#define PC_SIMD16_BACKEND "kernels/simd16_emu.h"
#define PC_SIMD16_V V512Emu
#define PC_SIMD16_NAME "avx512-emulated"
#define PC_SIMD16_SET avx512_emulated_kernel_set
#define PC_SIMD16_TILES avx512_emulated_attn_tiles
#include "kernels/kernels_simd16.inc"
