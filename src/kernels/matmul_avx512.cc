// AVX-512 kernels (CpuLevel::Avx512: F, BW, DQ, VL and VNNI): the prompt
// tiles of matmul_avx512_impl.h (Q8_0 / Q4_0 and F32 / F16 / BF16 weights) on
// real 512-bit vectors; every other case is the AVX2 kernels'. Only this file is compiled for AVX-512 (target
// pragma after the includes), so nothing else in the binary uses it unless
// the dispatcher (matmul.cc) picked this path on a CPU that runs it.
#include <cstdint>
#include <cstring>

#include "gguf/quants.h"
#include "kernels/matmul_internal.h"

#if defined(__x86_64__) || defined(__i386__)
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as the unused operand
// of their masked builtins, which -Wmaybe-uninitialized reports in every
// function that inlines them.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
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

namespace pc::kern {
namespace {

struct V512 {
  using I = __m512i;
  using F = __m512;
  static I zero_i() { return _mm512_setzero_si512(); }
  static F zero_f() { return _mm512_setzero_ps(); }
  static I load_i2(const __m256i* lo, const __m256i* hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(lo)), _mm256_loadu_si256(hi), 1);
  }
  static F load_f2(const float* lo, const float* hi) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(lo)), _mm256_loadu_ps(hi), 1);
  }
  static I set1_i(int32_t v) { return _mm512_set1_epi32(v); }
  static F set1_f(float v) { return _mm512_set1_ps(v); }
  static I dpwssd(I acc, I a, I b) { return _mm512_dpwssd_epi32(acc, a, b); }
  static F cvt(I v) { return _mm512_cvtepi32_ps(v); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static __m256 lo8(F v) { return _mm512_castps512_ps256(v); }
  static __m256 hi8(F v) { return _mm512_extractf32x8_ps(v, 1); }
  template <class L>
  static F load_w2(const uint8_t* p, const uint8_t* q, int64_t i) {
    if constexpr (L::kType == GgmlType::F32) {
      return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(reinterpret_cast<const float*>(p) + i)),
                                _mm256_loadu_ps(reinterpret_cast<const float*>(q) + i), 1);
    } else {
      const __m256i h = _mm256_inserti128_si256(
          _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i))),
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 2 * i)), 1);
      if constexpr (L::kType == GgmlType::F16) return _mm512_cvtph_ps(h);
      else return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));  // BF16
    }
  }
  static F bcast8(const float* x) { return _mm512_broadcast_f32x8(_mm256_loadu_ps(x)); }
  static F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
};

}  // namespace
}  // namespace pc::kern

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

#else  // not x86

namespace pc::kern {
const KernelSet* avx512_kernel_set() { return nullptr; }
}  // namespace pc::kern

#endif
