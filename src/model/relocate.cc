#include "model/relocate.h"

#include <vector>

#include "gguf/quants.h"
#include "kernels/elementwise.h"
#include "kv/kv_storage.h"
#include "model/model.h"

namespace pc {

void shift_positions(const Model& model, KvStorage& kv, int32_t page, int32_t n_slots, int32_t shift) {
  const ModelConfig& c = model.config();
  const Rope rope(model.rope_params());
  std::vector<float> cs(c.n_rot), k(c.head_dim);
  rope.angles(shift, cs.data());
  const KvShape& sh = kv.shape();
  for (int l = 0; l < sh.n_layer; ++l)
    for (int h = 0; h < sh.n_kv_head; ++h)
      for (int s = 0; s < n_slots; ++s) {
        uint16_t* K = kv.k(page, l) + size_t(h) * sh.page_size * sh.head_dim;  // the head's slab
        for (int d = 0; d < sh.head_dim; ++d) k[d] = fp16_to_fp32(K[k_index(sh.page_size, sh.head_dim, s, d)]);
        rope.apply(k.data(), cs.data());
        for (int d = 0; d < sh.head_dim; ++d) K[k_index(sh.page_size, sh.head_dim, s, d)] = fp32_to_fp16(k[d]);
      }
  for (int s = 0; s < n_slots; ++s) kv.pos(page)[s] += shift;
}

}  // namespace pc
