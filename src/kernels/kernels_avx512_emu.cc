// The AVX-512 kernels (matmul_avx512_impl.h, paged_attention_avx512_impl.h)
// built on an AVX2 emulation of their 16-lane operations (simd16_emu.h: each
// a pair of 8-lane AVX2 operations with the same per-lane results), for tests
// on machines without AVX-512: it runs the AVX-512 path's tiling, panel reads
// and per-lane arithmetic, so a mistake in them shows as a bitwise mismatch
// here too. Only the mapping of each operation to its AVX-512 instruction
// (simd16_avx512.h) needs a machine with AVX-512 to run.
#include <cstdint>
#include <cstring>

#include "gguf/quants.h"
#include "kernels/matmul_internal.h"
#include "kernels/paged_attention_internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

#include "kernels/matmul_avx2_shared.h"
#include "kernels/matmul_avx512_impl.h"
#include "kernels/simd16_emu.h"
#include "kernels/paged_attention_avx512_impl.h"

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace pc::kern {

const KernelSet* avx512_emulated_kernel_set() {
  static const KernelSet set = Avx512Q32<V512Emu>::make_set("avx512-emulated");
  return &set;
}

}  // namespace pc::kern

namespace pc {
const AttnTiles* avx512_emulated_attn_tiles(int head_dim) { return attn_tiles16<kern::V512Emu>(head_dim); }
}  // namespace pc

#else  // not x86

namespace pc::kern {
const KernelSet* avx512_emulated_kernel_set() { return nullptr; }
}  // namespace pc::kern

namespace pc {
const AttnTiles* avx512_emulated_attn_tiles(int) { return nullptr; }
}  // namespace pc

#endif
