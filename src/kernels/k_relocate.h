// Copying stored keys to other slots with a fixed RoPE rotation applied on the
// way (RoPE relocation, model/rope_shift.h): one pass over the source keys per
// KV head, the copy and the rotation fused.
//
// The rotation is Rope::apply's (kernels/elementwise.h) by one angle per
// dimension pair, the same for every slot: x_a' = x_a·c − x_b·s, x_b' = x_a·s +
// x_b·c, each product rounded to F32 and then added (no fused multiply-add, as
// the build compiles Rope::apply), from keys decoded exactly to F32, and the
// result stored as a write stores it: F16 rounded to nearest even, or each
// quantized row requantized from its own values (kernels/kv_quant.h). So a
// relocated key's bytes are exactly those of decoding it, running Rope::apply and
// writing it back; dimensions outside the rotated pairs keep their bytes.
//
// Paths: F16 keys take the AVX2 form (k_relocate_avx2.cc) when cpu_level() runs AVX2,
// AVX-512 machines included (a block of the K layout is 8 slots, one 8-lane vector per
// dimension, and the copy is bound by memory, not by vector width), else the scalar
// form; both give the same bytes (tests/kernels/k_relocate_test.cc, every level).
// Quantized rows go through kv_dequantize_row / kv_quantize_row, the reference forms.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/kv_quant.h"

namespace pc {

// The rotation of one layer's keys: pair i (i < n_pairs) is dimensions (i, i +
// n_pairs) when neox, else (2i, 2i + 1), rotated by cos cs[2i], sin cs[2i + 1]
// (Rope::angles). n_pairs 0: no rotation.
struct KeyRotation {
  const float* cs = nullptr;
  int n_pairs = 0;
  bool neox = false;
};

// Reusable buffers of the copies below (one per caller thread).
struct KeyCopyScratch {
  std::vector<float> f;      // decoded rows
  std::vector<uint16_t> h;   // F16 keys regathered dimension-major, slots contiguous
};

// One KV head's F16 K slab (page_size × head_dim, laid out by kernels/k_layout.h):
// copies the keys of slots [src_slot, src_slot + n) of `src` to [dst_slot, dst_slot +
// n) of `dst`, rotated by `rot` (null: copied unchanged). dst's other slots keep
// their bytes; dst and src are different slabs.
void copy_k_f16(uint16_t* dst, int dst_slot, const uint16_t* src, int src_slot, int n, int page_size,
                int head_dim, const KeyRotation* rot, KeyCopyScratch& scratch);

// n consecutive quantized K rows (q8_0, q4_0: row_bytes each) from src to dst,
// each decoded, rotated by `rot` and requantized (null: copied unchanged).
void copy_k_rows(KvType type, uint8_t* dst, const uint8_t* src, int n, int head_dim, const KeyRotation* rot,
                 KeyCopyScratch& scratch);

// The rotation of one decoded key row in place (what the copies do to each key;
// the reference the tests hold them to).
void rotate_key_row(float* x, const KeyRotation& rot);

}  // namespace pc
