#include "kernels/k_relocate.h"

#include <cstring>

#include "gguf/quants.h"
#include "kernels/cpu.h"
#include "kernels/k_layout.h"
#include "kernels/k_relocate_internal.h"

namespace pc {

void rotate_key_row(float* x, const KeyRotation& rot) {
  const int half = rot.n_pairs;
  for (int i = 0; i < half; ++i) {
    const float c = rot.cs[2 * i], s = rot.cs[2 * i + 1];
    const int a = rot.neox ? i : 2 * i;
    const int b = rot.neox ? i + half : 2 * i + 1;
    const float x0 = x[a], x1 = x[b];
    x[a] = x0 * c - x1 * s;
    x[b] = x0 * s + x1 * c;
  }
}

namespace {

// Slot by slot: each key's dimensions walked at its block's stride; rotated keys
// decoded, rotated and encoded in F32 as rotate_key_row does.
void copy_k_f16_scalar(uint16_t* dst, int dst_slot, const uint16_t* src, int src_slot, int n, int P, int hd,
                       const KeyRotation* rot, KeyCopyScratch& scratch) {
  if (rot) scratch.f.resize(size_t(hd));
  float* x = scratch.f.data();
  for (int t = 0; t < n; ++t) {
    const uint16_t* sk = src + k_index(P, hd, src_slot + t, 0);
    uint16_t* dk = dst + k_index(P, hd, dst_slot + t, 0);
    const size_t ws = size_t(k_block_width(P, src_slot + t)), wd = size_t(k_block_width(P, dst_slot + t));
    if (!rot) {
      for (int d = 0; d < hd; ++d) dk[d * wd] = sk[d * ws];
      continue;
    }
    for (int d = 0; d < hd; ++d) x[d] = fp16_to_fp32(sk[d * ws]);
    rotate_key_row(x, *rot);
    for (int d = 0; d < hd; ++d) dk[d * wd] = fp32_to_fp16(x[d]);
  }
}

}  // namespace

void copy_k_f16(uint16_t* dst, int dst_slot, const uint16_t* src, int src_slot, int n, int page_size,
                int head_dim, const KeyRotation* rot, KeyCopyScratch& scratch) {
  if (n <= 0) return;
  if (rot && rot->n_pairs == 0) rot = nullptr;
#if defined(__x86_64__)
  if (cpu_level() >= CpuLevel::Avx2) {
    copy_k_f16_avx2(dst, dst_slot, src, src_slot, n, page_size, head_dim, rot, scratch);
    return;
  }
#endif
  copy_k_f16_scalar(dst, dst_slot, src, src_slot, n, page_size, head_dim, rot, scratch);
}

void copy_k_rows(KvType type, uint8_t* dst, const uint8_t* src, int n, int head_dim, const KeyRotation* rot,
                 KeyCopyScratch& scratch) {
  const size_t rb = kv_row_bytes(type, head_dim);
  if (!rot || rot->n_pairs == 0) {
    std::memcpy(dst, src, size_t(n) * rb);
    return;
  }
  scratch.f.resize(size_t(head_dim));
  float* x = scratch.f.data();
  for (int t = 0; t < n; ++t) {
    kv_dequantize_row(type, src + t * rb, head_dim, x);
    rotate_key_row(x, *rot);
    kv_quantize_row(type, x, head_dim, dst + t * rb);
  }
}

}  // namespace pc
