#include "model/rope_shift.h"

#include <vector>

#include "gguf/quants.h"
#include "kernels/elementwise.h"
#include "kernels/kv_quant.h"
#include "kv/kv_page_store.h"
#include "model/model.h"

namespace pc {

// RoPE by a fixed angle over key rows, with each layer's own RoPE (base,
// scaling and factors; gemma3's local and global layers differ) and never
// LongRoPE's attention factor, which the stored keys already carry: each row
// as the store decodes it to F32, rotated; the store keeps the result in its KV
// type (F16 rounded to nearest even, or the row requantized from its own values).
class KeyShift::Op final : public KeyRowsOp {
 public:
  Op(const Model& model, int32_t shift) : head_dim_(int(model.config().head_dim)) {
    const ModelConfig& c = model.config();
    ropes_.reserve(size_t(c.n_layer));
    cs_.resize(size_t(c.n_layer * c.n_rot));
    for (int l = 0; l < c.n_layer; ++l) {
      ropes_.emplace_back(model.rope_params(l, /*with_attn_factor=*/false));
      ropes_.back().angles(shift, cs_.data() + size_t(l * c.n_rot));
    }
    n_rot_ = c.n_rot;
  }
  // Layer l's rotation as the stores' copies take it: the same angles, pairs and layout.
  KeyRotation rotation(const Model& model, int layer) const {
    const Rope& rope = ropes_[size_t(layer)];
    return KeyRotation{cs_.data() + size_t(layer * n_rot_), int(rope.n_pairs()),
                       model.rope_params(layer, /*with_attn_factor=*/false).neox};
  }
  void apply(int layer, float* rows, int n_rows) override {
    const size_t hd = size_t(head_dim_);
    const Rope& rope = ropes_[size_t(layer)];
    const float* cs = cs_.data() + size_t(layer * n_rot_);
    for (int r = 0; r < n_rows; ++r) rope.apply(rows + size_t(r) * hd, cs);
  }

 private:
  std::vector<Rope> ropes_;    // [n_layer]
  std::vector<float> cs_;      // [n_layer][n_rot] cos/sin of the shift
  int64_t n_rot_ = 0;
  int head_dim_ = 0;

 public:
  int head_dim() const { return head_dim_; }
};

KeyShift::KeyShift(const Model& model, int32_t shift) : shift_(shift), op_(std::make_unique<Op>(model, shift)) {
  const int n_layer = int(model.config().n_layer);
  layers_.reserve(size_t(n_layer));
  for (int l = 0; l < n_layer; ++l) layers_.push_back(op_->rotation(model, l));
}
KeyShift::~KeyShift() = default;

void KeyShift::rotate(int layer, float* rows, int n_rows, KvType type) {
  op_->apply(layer, rows, n_rows);
  const int hd = op_->head_dim();
  if (type == KvType::kF16) {
    for (size_t i = 0; i < size_t(n_rows) * hd; ++i) rows[i] = fp16_to_fp32(fp32_to_fp16(rows[i]));
    return;
  }
  row_.resize(kv_row_bytes(type, hd));
  for (int r = 0; r < n_rows; ++r) {
    kv_quantize_row(type, rows + size_t(r) * hd, hd, row_.data());
    kv_dequantize_row(type, row_.data(), hd, rows + size_t(r) * hd);
  }
}

void KeyShift::shift_slots(KvPageStore& kv, int32_t page, int32_t first, int32_t n_slots) {
  if (first >= n_slots) return;
  kv.update_keys(page, first, n_slots, *op_);
  for (int s = first; s < n_slots; ++s) kv.pos(page)[s] += shift_;
}

void KeyShift::copy_slots(KvPageStore& kv, int32_t dst, int32_t dst_slot, int32_t src, int32_t src_slot,
                          int32_t n) {
  if (n <= 0) return;
  kv.copy_range_rotated(dst, dst_slot, src, src_slot, n, layers_.data());
  for (int s = dst_slot; s < dst_slot + n; ++s) kv.pos(dst)[s] += shift_;
}

void shift_positions(const Model& model, KvPageStore& kv, int32_t page, int32_t n_slots, int32_t shift) {
  KeyShift(model, shift).shift_slots(kv, page, 0, n_slots);
}

}  // namespace pc
