#include "model/rope_shift.h"

#include <vector>

#include "gguf/quants.h"
#include "kernels/elementwise.h"
#include "kv/kv_page_store.h"
#include "model/model.h"

namespace pc {

// RoPE by a fixed angle over F16 key rows, with each layer's own RoPE (base,
// scaling and factors; gemma3's local and global layers differ) and never
// LongRoPE's attention factor, which the stored keys already carry. `skip`: rows
// of each call left as they are (slots below KeyShift::shift_slots' `first`).
class KeyShift::Op final : public KeyRowsOp {
 public:
  Op(const Model& model, int32_t shift) : k_(model.config().head_dim) {
    const ModelConfig& c = model.config();
    ropes_.reserve(size_t(c.n_layer));
    cs_.resize(size_t(c.n_layer * c.n_rot));
    for (int l = 0; l < c.n_layer; ++l) {
      ropes_.emplace_back(model.rope_params(l, /*with_attn_factor=*/false));
      ropes_.back().angles(shift, cs_.data() + size_t(l * c.n_rot));
    }
    n_rot_ = c.n_rot;
  }
  void apply(int layer, uint16_t* rows, int n_rows) override {
    const size_t hd = k_.size();
    const Rope& rope = ropes_[size_t(layer)];
    const float* cs = cs_.data() + size_t(layer * n_rot_);
    for (int s = skip; s < n_rows; ++s) {
      uint16_t* row = rows + size_t(s) * hd;
      for (size_t d = 0; d < hd; ++d) k_[d] = fp16_to_fp32(row[d]);
      rope.apply(k_.data(), cs);
      for (size_t d = 0; d < hd; ++d) row[d] = fp32_to_fp16(k_[d]);
    }
  }
  int skip = 0;

 private:
  std::vector<Rope> ropes_;    // [n_layer]
  std::vector<float> cs_, k_;  // [n_layer][n_rot] cos/sin of the shift; [head_dim] one key
  int64_t n_rot_ = 0;
};

KeyShift::KeyShift(const Model& model, int32_t shift) : shift_(shift), op_(std::make_unique<Op>(model, shift)) {}
KeyShift::~KeyShift() = default;

void KeyShift::rotate(int layer, uint16_t* rows, int n_rows) {
  op_->skip = 0;
  op_->apply(layer, rows, n_rows);
}

void KeyShift::shift_slots(KvPageStore& kv, int32_t page, int32_t first, int32_t n_slots) {
  if (first >= n_slots) return;
  op_->skip = first;
  kv.update_keys(page, n_slots, *op_);
  op_->skip = 0;
  for (int s = first; s < n_slots; ++s) kv.pos(page)[s] += shift_;
}

void shift_positions(const Model& model, KvPageStore& kv, int32_t page, int32_t n_slots, int32_t shift) {
  KeyShift(model, shift).shift_slots(kv, page, 0, n_slots);
}

}  // namespace pc
