// Internal interface between the matmul dispatcher (matmul.cc) and the per-ISA
// kernels (matmul_scalar.cc, matmul_avx2.cc). Not part of the public API.
//
// Quantized activations. For quantized weights each row of x (k floats) is
// quantized once per matmul call into blocks of `qk` values:
//   qk = 32  for Q8_0 / Q4_0 / Q4_1 / Q5_0 / Q5_1 / IQ4_NL / MXFP4 weights
//            (like Q8_0: one scale per 32 values)
//   qk = 256 for Q4_K / Q5_K / Q6_K / IQ4_XS weights (like Q8_K: one scale per 256
//            values, plus int16 sums of each 16 quants, "bsums")
// with d = amax / 127 and q = round_to_nearest_even(x * (127 / amax)) in [-127, 127].
// The scalar and AVX2 quantizers perform the same IEEE operations and produce
// identical bytes. Quantization is per row, so it cannot depend on the batch.
//
// Row layout inside the scratch buffer (each part 64-byte aligned):
//   [ int8 qs[k] | float d[k/qk] | int16 bsums[k/16] (qk == 256 only) ]
#pragma once
#include <cstdint>

#include "gguf/types.h"

namespace pc::kern {

struct ActLayout {
  int64_t qk = 0;        // values per scale: 32 or 256; 0 = float activations
  int64_t d_off = 0;     // byte offset of the float scales in a row
  int64_t bsum_off = 0;  // byte offset of the int16 sums of 16 (qk == 256) or of 32 (qk == 32)
  int64_t x16_off = 0;   // byte offset of the int16 copy of qs (AVX2 q32 panel kernel); 0 = none
  // qk == 256: byte offset of the int16 sums of 32 (each the sum of two sums
  // of 16, written by fill_sums_of_32 after the quantizer), which the X16
  // K-quant tiles take their mins' products with two sub-blocks a vpmaddwd /
  // vpdpwssd; 0 = none
  int64_t bsum32_off = 0;
  int64_t stride = 0;    // bytes per row
};

inline int64_t round_up64(int64_t v) { return (v + 63) & ~int64_t(63); }

// The sums of 32 of a quantized row of layout l (l.bsum32_off != 0) from its
// sums of 16: |sum| <= 32 * 128, so int16 holds it.
inline void fill_sums_of_32(const ActLayout& l, int64_t k, uint8_t* row) {
  const int16_t* s16 = reinterpret_cast<const int16_t*>(row + l.bsum_off);
  int16_t* s32 = reinterpret_cast<int16_t*>(row + l.bsum32_off);
  for (int64_t j = 0; j < k / 32; ++j) s32[j] = int16_t(s16[2 * j] + s16[2 * j + 1]);
}

// with_x16: also an int16 copy of the quants, in the same order (the AVX2
// q32 panel kernel broadcasts pairs of it for vpmaddwd). Only the AVX2
// quantizer writes it.
inline ActLayout act_layout(int64_t k, int64_t qk, bool with_x16 = false) {
  ActLayout l;
  l.qk = qk;
  l.d_off = round_up64(k);
  l.bsum_off = l.d_off + round_up64(4 * (k / qk));
  l.stride = l.bsum_off + round_up64(2 * (k / (qk == 256 ? 16 : 32)));
  if (qk == 256) {
    l.bsum32_off = l.stride;
    l.stride += round_up64(2 * (k / 32));
  }
  if (with_x16) {
    l.x16_off = l.stride;
    l.stride += round_up64(2 * k);
  }
  return l;
}

struct MatmulArgs {
  const uint8_t* w = nullptr;  // weight rows, row_bytes apart
  int64_t row_bytes = 0;
  int64_t k = 0;
  const float* x = nullptr;  // f32 activations (F32/F16/BF16 weights), k floats apart
  const uint8_t* act = nullptr;  // quantized activations (quantized weights)
  ActLayout al;
  float* y = nullptr;  // output, ldy floats apart
  int64_t ldy = 0;
  // Unique per matmul() call (never 0): lets a thread keep weights it
  // repacked for one task and reuse them for the next task of the same call
  // with the same columns.
  uint64_t call_id = 0;
  // The call reads its weights from memory once (matmul.cc's streamed calls:
  // up to kStreamRows rows of X16 weights): the X16 tiles of several rows
  // prefetch ahead as the one-row tiles always do (2 threads on a Zen 5: a
  // decode step of 4 sequences 1.3-3.1x, of 8 1.5-2.8x). Larger batches read
  // cache-sized blocks again and again instead.
  bool stream = false;

  const int8_t* xq(int64_t r) const { return reinterpret_cast<const int8_t*>(act + r * al.stride); }
  const float* xd(int64_t r) const {
    return reinterpret_cast<const float*>(act + r * al.stride + al.d_off);
  }
  const int16_t* xbs(int64_t r) const {
    return reinterpret_cast<const int16_t*>(act + r * al.stride + al.bsum_off);
  }
  const int16_t* xbs32(int64_t r) const {
    return reinterpret_cast<const int16_t*>(act + r * al.stride + al.bsum32_off);
  }
  const int16_t* x16(int64_t r) const {
    return reinterpret_cast<const int16_t*>(act + r * al.stride + al.x16_off);
  }
};

// Whether a task must pack its column block [c0, c1) of a's weights into
// `scratch` now: false when this thread's last packing was that block of the
// same call into the same scratch (a column block's row blocks run
// consecutively on one thread). Records the block as this thread's last.
inline bool must_pack_task_block(const MatmulArgs& a, int64_t c0, int64_t c1, const uint8_t* scratch) {
  struct Packed {
    uint64_t call = 0;
    const uint8_t* scratch = nullptr;
    int64_t c0 = -1, c1 = -1;
  };
  thread_local Packed last;
  if (last.call == a.call_id && last.scratch == scratch && last.c0 == c0 && last.c1 == c1) return false;
  last = Packed{a.call_id, scratch, c0, c1};
  return true;
}

// Computes y[r][c] for r in [r0, r1), c in [c0, c1). `scratch` is private to
// the executing thread, 64-byte aligned, at least task_scratch_bytes() long for
// the task's column count (kernels that need none ignore it).
using TaskKernel = void (*)(const MatmulArgs& a, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                            uint8_t* scratch);
// Quantizes one row of k floats into the layout above (out points at the row).
using QuantizeRowFn = void (*)(const float* x, int64_t k, const ActLayout& l, uint8_t* out);

// Portable C++ kernels (always available).
TaskKernel scalar_kernel(GgmlType t);  // nullptr if unsupported
void scalar_quantize_row(const float* x, int64_t k, const ActLayout& l, uint8_t* out);

// X16 weights (weight_repack.h) on the scalar path: each task's rows unpacked
// to the stored type, then the scalar kernel of that type (weight_repack.cc).
// (The AVX2 path runs them with the 16-lane kernels on its AVX2 emulation:
// avx512_emulated_kernel_set().)
TaskKernel x16_via_scalar(GgmlType t);  // nullptr for other types

// AVX2 + FMA + F16C kernels; nullptr where not compiled (non-x86 builds).
TaskKernel avx2_kernel(GgmlType t);
// The AVX2 kernels of the types unpacked to int8 per block (Q4_1, Q5_0, Q5_1,
// IQ4_NL, MXFP4, Q5_K, IQ4_XS; matmul_avx2_unpack.cc), which avx2_kernel()
// returns for them; nullptr for other types.
TaskKernel avx2_unpack_kernel(GgmlType t);
// Whether the AVX2 kernel for t wants the int16 activation copy (x16) for a
// batch of m rows.
bool avx2_wants_x16(GgmlType t, int64_t m);
QuantizeRowFn avx2_quantize_row_fn();
// Per-thread scratch bytes an AVX2 task of up to `cols` weight rows needs
// (weight panels repacked per task, scale products); 0 if none.
int64_t avx2_task_scratch_bytes(GgmlType t, int64_t k, int64_t cols);
// Bytes of weights per column a task of an m-row batch works on (repacked
// panel, or 0 = the stored row), for sizing column blocks to the cache.
int64_t avx2_task_col_bytes(GgmlType t, int64_t k, int64_t m);
// Column blocks of an m-row batch are multiples of this (whole micro-tiles:
// no narrow tail tile in every block).
int64_t avx2_task_col_multiple(GgmlType t, int64_t m);

// A SIMD level's kernels, and what the dispatcher (matmul.cc) needs to plan
// their tasks: the functions above for AVX2, their AVX-512 counterparts.
struct KernelSet {
  const char* name = "";
  TaskKernel (*kernel)(GgmlType t) = nullptr;  // nullptr result: use the scalar kernel
  QuantizeRowFn quantize_row = nullptr;
  bool (*wants_x16)(GgmlType t, int64_t m) = nullptr;
  int64_t (*task_scratch_bytes)(GgmlType t, int64_t k, int64_t cols) = nullptr;
  int64_t (*task_col_bytes)(GgmlType t, int64_t k, int64_t m) = nullptr;
  int64_t (*task_col_multiple)(GgmlType t, int64_t m) = nullptr;
};
// nullptr where not compiled (non-x86 builds).
const KernelSet* avx2_kernel_set();
// AVX-512 F/BW/DQ/VL + VNNI (CpuLevel::Avx512): its own prompt-batch kernels
// for Q8_0 / Q4_0 / F32 / F16 / BF16 and the X16 layouts, decode kernels for
// Q8_0 / Q6_K as stored and the X16 layouts (kernels_avx512.cc), the AVX2 ones
// for everything else.
const KernelSet* avx512_kernel_set();
// The same AVX-512 kernel code built on an AVX2 emulation of the 16-lane
// operations it uses (kernels_avx512_emu.cc): lets machines without AVX-512
// test that code's logic bitwise against the scalar kernels.
const KernelSet* avx512_emulated_kernel_set();
// The 16-lane kernel code on ymm pairs with the AVX-VNNI instructions
// (kernels_avxvnni.cc; nullptr where not compiled), and the same forms with
// those instructions emulated exactly (kernels_avxvnni_emu.cc, for tests).
const KernelSet* avxvnni_kernel_set();
const KernelSet* avxvnni_emulated_kernel_set();
// The set the AVX2 kernels hand the X16 layouts to: avxvnni_kernel_set() at
// CpuLevel::AvxVnni, else avx512_emulated_kernel_set().
const KernelSet* x16_kernel_set();
// Tests: make matmul() use `set` whatever the CPU level (nullptr: by level).
void force_kernel_set(const KernelSet* set);

// Activation block size for a weight type: 32, 256, or 0 for float weights.
inline int64_t act_block(GgmlType t) {
  switch (t) {
    case GgmlType::Q8_0:
    case GgmlType::Q8_0_X16:
    case GgmlType::Q4_0_X16:
    case GgmlType::Q5_0_X16:
    case GgmlType::Q4_1_X16:
    case GgmlType::Q5_1_X16:
    case GgmlType::IQ4_NL_X16:
    case GgmlType::MXFP4_X16:
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::IQ4_NL:
    case GgmlType::MXFP4: return 32;
    case GgmlType::Q4_K:
    case GgmlType::Q4_K_X16:
    case GgmlType::Q5_K_X16:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
    case GgmlType::Q6_K_X16:
    case GgmlType::IQ4_XS_X16:
    case GgmlType::IQ4_XS: return 256;
    default: return 0;
  }
}

// Portable half / bfloat16 -> float (exact), used by the scalar path.
inline float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1F;
  uint32_t mant = h & 0x3FF;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      exp = 127 - 15 + 1;
      while (!(mant & 0x400)) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3FF;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7F800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}

inline float bf16_to_float(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}

// Q4_K packs 8 (scale, min) pairs of 6 bits into 12 bytes:
//   j < 4: sc = s[j] & 63,                          m = s[j+4] & 63
//   j >= 4: sc = (s[j+4] & 15) | (s[j-4] >> 6) << 4, m = (s[j+4] >> 4) | (s[j] >> 6) << 4
inline void q4k_scales(const uint8_t* s, uint8_t sc[8], uint8_t mn[8]) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = s[j] & 63;
    mn[j] = s[j + 4] & 63;
  }
  for (int j = 4; j < 8; ++j) {
    sc[j] = static_cast<uint8_t>((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4));
    mn[j] = static_cast<uint8_t>((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
}

}  // namespace pc::kern
