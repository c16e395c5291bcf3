#include "model/relocate.h"

#include <vector>

#include "gguf/quants.h"
#include "kernels/elementwise.h"
#include "kv/kv_page_store.h"
#include "model/model.h"

namespace pc {

namespace {

// RoPE by a fixed angle over F16 key rows: each row widened to F32, rotated,
// rounded back to F16 (round to nearest even).
class RopeShift final : public KeyRowsOp {
 public:
  RopeShift(const Model& model, int32_t shift)
      : rope_(model.rope_params()), cs_(model.config().n_rot), k_(model.config().head_dim) {
    rope_.angles(shift, cs_.data());
  }
  void apply(uint16_t* rows, int n_rows) override {
    const size_t hd = k_.size();
    for (int s = 0; s < n_rows; ++s) {
      uint16_t* row = rows + size_t(s) * hd;
      for (size_t d = 0; d < hd; ++d) k_[d] = fp16_to_fp32(row[d]);
      rope_.apply(k_.data(), cs_.data());
      for (size_t d = 0; d < hd; ++d) row[d] = fp32_to_fp16(k_[d]);
    }
  }

 private:
  const Rope rope_;
  std::vector<float> cs_, k_;  // [n_rot] cos/sin of the shift; [head_dim] one key
};

}  // namespace

void shift_positions(const Model& model, KvPageStore& kv, int32_t page, int32_t n_slots, int32_t shift) {
  RopeShift op(model, shift);
  kv.update_keys(page, n_slots, op);
  for (int s = 0; s < n_slots; ++s) kv.pos(page)[s] += shift;
}

}  // namespace pc
