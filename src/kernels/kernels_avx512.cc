// AVX-512 kernels (CpuLevel::Avx512: F, BW, DQ, VL and VNNI): the prompt
// matmul tiles of matmul_avx512_impl.h (Q8_0 / Q4_0 and F32 / F16 / BF16
// weights) and the attention tiles of paged_attention_avx512_impl.h on real
// 512-bit vectors (simd16_avx512.h); every other case is the AVX2 kernels'.
// Only this file is compiled for AVX-512 (target pragma after the includes),
// so nothing else in the binary uses it unless the dispatchers (matmul.cc,
// paged_attention.cc) picked this path on a CPU that runs it.
#include <cstdint>
#include <cstring>

#include "gguf/quants.h"
#include "kernels/matmul_internal.h"
#include "kernels/paged_attention_internal.h"

#if defined(__x86_64__) || defined(__i386__)
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as the unused operand
// of their masked builtins, which -W(maybe-)uninitialized reports in every
// function that inlines them.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512dq,avx512vl,avx512vnni"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")
#endif

#include "kernels/matmul_avx2_shared.h"
#include "kernels/matmul_avx512_impl.h"
#include "kernels/simd16_avx512.h"
#include "kernels/paged_attention_avx512_impl.h"

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace pc::kern {

const KernelSet* avx512_kernel_set() {
  static const KernelSet set = Avx512Q32<V512>::make_set("avx512");
  return &set;
}

}  // namespace pc::kern

namespace pc {
const AttnTiles* avx512_attn_tiles(int head_dim) { return attn_tiles16<kern::V512>(head_dim); }
}  // namespace pc

#else  // not x86

namespace pc::kern {
const KernelSet* avx512_kernel_set() { return nullptr; }
}  // namespace pc::kern

namespace pc {
const AttnTiles* avx512_attn_tiles(int) { return nullptr; }
}  // namespace pc

#endif
