// Moving cached keys to other positions. K is stored after RoPE, and RoPE
// rotates each pair of dimensions by an angle proportional to the position, so
// K computed at position p and rotated by `shift` equals K computed at
// p + shift — exactly in real arithmetic; here up to the rounding of the
// stored values (F16, or the KV type's quantization: the rotated row is stored
// as a write would store it). Relocating the same keys by the same shift gives
// the same bytes, which is what keeps PML hits equal to misses within a KV type
// (docs/architecture.md "KV types"). V does not depend on the position.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/k_relocate.h"
#include "kernels/kv_quant.h"

namespace pc {

class KvPageStore;
class Model;

// The rotation by one shift, with each layer's own RoPE (its angles computed once):
// a key row decoded to F32, rotated, and stored back in the page's KV type.
class KeyShift {
 public:
  KeyShift(const Model& model, int32_t shift);
  ~KeyShift();
  KeyShift(const KeyShift&) = delete;
  KeyShift& operator=(const KeyShift&) = delete;
  int32_t shift() const { return shift_; }
  // Rotates n_rows decoded key rows (head_dim floats each) of `layer` in place and
  // rounds them as a page of `type` would keep them: the values a relocated copy holds.
  void rotate(int layer, float* rows, int n_rows, KvType type);
  // Rotates the K of slots [first, n_slots) of `page` (every layer and KV head) and
  // adds the shift to their position ids; slots below `first` are left as they are.
  void shift_slots(KvPageStore& kv, int32_t page, int32_t first, int32_t n_slots);
  // Copies slots [src_slot, src_slot + n) of page `src` to [dst_slot, dst_slot + n) of
  // `dst` with K rotated (one pass, KvPageStore::copy_range_rotated) and their
  // positions moved by the shift: the bytes of copy_range then shift_slots.
  void copy_slots(KvPageStore& kv, int32_t dst, int32_t dst_slot, int32_t src, int32_t src_slot, int32_t n);

 private:
  class Op;
  int32_t shift_;
  std::unique_ptr<Op> op_;
  std::vector<KeyRotation> layers_;  // [n_layer] op_'s angles, for the stores' copies
  std::vector<uint8_t> row_;  // rotate(): one quantized row
};

// Rotates the K of slots [0, n_slots) of `page` (every layer and KV head) by
// `shift` positions and adds `shift` to their position ids.
void shift_positions(const Model& model, KvPageStore& kv, int32_t page, int32_t n_slots, int32_t shift);

}  // namespace pc
