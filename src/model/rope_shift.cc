#include "model/rope_shift.h"

#include <vector>

#include "gguf/quants.h"
#include "kernels/elementwise.h"
#include "kv/kv_page_store.h"
#include "model/model.h"

namespace pc {

namespace {

// RoPE by a fixed angle over F16 key rows, with each layer's own RoPE (base,
// scaling and factors; gemma3's local and global layers differ) and never
// LongRoPE's attention factor, which the stored keys already carry: each row
// widened to F32, rotated, rounded back to F16 (round to nearest even).
class RopeShift final : public KeyRowsOp {
 public:
  RopeShift(const Model& model, int32_t shift) : k_(model.config().head_dim) {
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
    for (int s = 0; s < n_rows; ++s) {
      uint16_t* row = rows + size_t(s) * hd;
      for (size_t d = 0; d < hd; ++d) k_[d] = fp16_to_fp32(row[d]);
      rope.apply(k_.data(), cs);
      for (size_t d = 0; d < hd; ++d) row[d] = fp32_to_fp16(k_[d]);
    }
  }

 private:
  std::vector<Rope> ropes_;    // [n_layer]
  std::vector<float> cs_, k_;  // [n_layer][n_rot] cos/sin of the shift; [head_dim] one key
  int64_t n_rot_ = 0;
};

}  // namespace

void shift_positions(const Model& model, KvPageStore& kv, int32_t page, int32_t n_slots, int32_t shift) {
  RopeShift op(model, shift);
  kv.update_keys(page, n_slots, op);
  for (int s = 0; s < n_slots; ++s) kv.pos(page)[s] += shift;
}

}  // namespace pc
