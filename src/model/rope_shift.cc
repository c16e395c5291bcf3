#include "model/rope_shift.h"

#include <vector>

#include "kernels/elementwise.h"
#include "kv/kv_page_store.h"
#include "model/model.h"

namespace pc {

namespace {

// RoPE by a fixed angle over key rows, with each layer's own RoPE (base,
// scaling and factors; gemma3's local and global layers differ) and never
// LongRoPE's attention factor, which the stored keys already carry: each row
// as the store decodes it to F32, rotated; the store keeps the result in its KV
// type (F16 rounded to nearest even, or the row requantized from its own values).
class RopeShift final : public KeyRowsOp {
 public:
  RopeShift(const Model& model, int32_t shift) : head_dim_(int(model.config().head_dim)) {
    const ModelConfig& c = model.config();
    ropes_.reserve(size_t(c.n_layer));
    cs_.resize(size_t(c.n_layer * c.n_rot));
    for (int l = 0; l < c.n_layer; ++l) {
      ropes_.emplace_back(model.rope_params(l, /*with_attn_factor=*/false));
      ropes_.back().angles(shift, cs_.data() + size_t(l * c.n_rot));
    }
    n_rot_ = c.n_rot;
  }
  void apply(int layer, float* rows, int n_rows) override {
    const size_t hd = size_t(head_dim_);
    const Rope& rope = ropes_[size_t(layer)];
    const float* cs = cs_.data() + size_t(layer * n_rot_);
    for (int s = 0; s < n_rows; ++s) rope.apply(rows + size_t(s) * hd, cs);
  }

 private:
  std::vector<Rope> ropes_;    // [n_layer]
  std::vector<float> cs_;      // [n_layer][n_rot] cos/sin of the shift
  int64_t n_rot_ = 0;
  int head_dim_ = 0;
};

}  // namespace

void shift_positions(const Model& model, KvPageStore& kv, int32_t page, int32_t n_slots, int32_t shift) {
  RopeShift op(model, shift);
  kv.update_keys(page, n_slots, op);
  for (int s = 0; s < n_slots; ++s) kv.pos(page)[s] += shift;
}

}  // namespace pc
