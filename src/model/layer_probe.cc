// Probes of one layer's attention over KV in pages (Forward::slot_kv,
// Forward::attention_weights): what the check pass of approximate reuse reads of layer 1.
//
// The K and V of a slot are read through the store (KvPageStore::read_slot), decoded
// from the page's KV type.
#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "kv/kv_page_store.h"
#include "model/forward.h"
#include "model/model.h"

namespace pc {

void Forward::slot_kv(int layer, int32_t page, int32_t slot, float* k_out, float* v_out) const {
  kv_.read_slot(layer, page, slot, k_out, v_out);
}

void Forward::attention_weights(int layer, const float* q, const SeqKv& seq, int32_t n_slots,
                                std::vector<double>& out) const {
  const ModelConfig& c = model_.config();
  if (layer < 0 || layer >= c.n_layer) throw Error("attention_weights: layer " + std::to_string(layer) + " out of range");
  const int hd = int(c.head_dim), n_kv = int(c.n_kv_head), n_head = int(c.n_head), P = kv_.shape().page_size;
  const int group = n_head / n_kv;
  const int64_t kvd = int64_t(n_kv) * hd;
  // The keys of the slots in order, F32 [n_slots][kvd].
  std::vector<float> keys, vrow(static_cast<size_t>(kvd));
  keys.reserve(size_t(n_slots * kvd));
  for (int32_t p = 0; p < seq.n_pages && int64_t(keys.size()) < n_slots * kvd; ++p) {
    const int filled = seq.fills ? seq.fills[p] : P;
    for (int slot = 0; slot < filled && int64_t(keys.size()) < n_slots * kvd; ++slot) {
      keys.resize(keys.size() + size_t(kvd));
      kv_.read_slot(layer, seq.pages[p], slot, keys.data() + keys.size() - size_t(kvd), vrow.data());
    }
  }
  const int64_t n = int64_t(keys.size()) / kvd;
  if (n != n_slots) throw Error("attention_weights: the sequence holds fewer slots than asked for");
  const double scale = 1.0 / std::sqrt(double(hd));
  out.assign(size_t(n_head) * n, 0.0);
  for (int h = 0; h < n_head; ++h) {
    const int g = h / group;
    double mx = -1e300;
    double* ah = out.data() + size_t(h) * n;
    for (int64_t t = 0; t < n; ++t) {
      double dot = 0;
      for (int d = 0; d < hd; ++d) dot += double(q[size_t(h) * hd + d]) * keys[size_t(t * kvd + g * hd + d)];
      ah[t] = dot * scale;
      mx = std::max(mx, ah[t]);
    }
    double sum = 0;
    for (int64_t t = 0; t < n; ++t) sum += ah[t] = std::exp(ah[t] - mx);
    for (int64_t t = 0; t < n; ++t) ah[t] /= sum;
  }
}

}  // namespace pc
