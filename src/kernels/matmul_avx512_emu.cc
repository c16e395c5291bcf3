// The AVX-512 kernels of matmul_avx512_impl.h built on an AVX2 emulation of
// their 16-lane operations (each a pair of 8-lane AVX2 operations with the
// same per-lane result), for tests on machines without AVX-512: it runs the
// AVX-512 path's tiling, panel reads and per-lane arithmetic, so a mistake in
// them shows as a bitwise mismatch against the scalar kernels here too. Only
// the mapping of each operation to its AVX-512 instruction (V512 in
// matmul_avx512.cc) needs a machine with AVX-512 to run.
#include <cstdint>
#include <cstring>

#include "gguf/quants.h"
#include "kernels/matmul_internal.h"

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

namespace pc::kern {
namespace {

struct V512Emu {
  struct I {
    __m256i lo, hi;
  };
  struct F {
    __m256 lo, hi;
  };
  static I zero_i() { return {_mm256_setzero_si256(), _mm256_setzero_si256()}; }
  static F zero_f() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
  static I load_i2(const __m256i* lo, const __m256i* hi) { return {_mm256_loadu_si256(lo), _mm256_loadu_si256(hi)}; }
  static F load_f2(const float* lo, const float* hi) { return {_mm256_loadu_ps(lo), _mm256_loadu_ps(hi)}; }
  static I set1_i(int32_t v) { return {_mm256_set1_epi32(v), _mm256_set1_epi32(v)}; }
  static F set1_f(float v) { return {_mm256_set1_ps(v), _mm256_set1_ps(v)}; }
  // vpdpwssd: acc + (a.w0*b.w0 + a.w1*b.w1) per int32 lane, wrapping; vpmaddwd
  // gives the bracket (wrapping likewise), then the add.
  static I dpwssd(I acc, I a, I b) {
    return {_mm256_add_epi32(acc.lo, _mm256_madd_epi16(a.lo, b.lo)), _mm256_add_epi32(acc.hi, _mm256_madd_epi16(a.hi, b.hi))};
  }
  static F cvt(I v) { return {_mm256_cvtepi32_ps(v.lo), _mm256_cvtepi32_ps(v.hi)}; }
  static F mul(F a, F b) { return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)}; }
  static F add(F a, F b) { return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)}; }
  static __m256 lo8(F v) { return v.lo; }
  static __m256 hi8(F v) { return v.hi; }
  template <class L>
  static F load_w2(const uint8_t* p, const uint8_t* q, int64_t i) { return {L::load8(p, i), L::load8(q, i)}; }
  static F bcast8(const float* x) { return {_mm256_loadu_ps(x), _mm256_loadu_ps(x)}; }
  static F fmadd(F a, F b, F c) { return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)}; }
};

}  // namespace
}  // namespace pc::kern

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

#else  // not x86

namespace pc::kern {
const KernelSet* avx512_emulated_kernel_set() { return nullptr; }
}  // namespace pc::kern

#endif
