// Probes of one layer's attention over KV in pages (Forward::slot_kv,
// Forward::attention_weights): what the check pass of approximate reuse reads of layer 1.
//
// A page holds, per layer and KV head, a K slab laid out by kernels/k_layout.h (slots in
// blocks of 8, each [head_dim][8]) and a V slab [page_size][head_dim], both F16.
#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "gguf/quants.h"
#include "kernels/k_layout.h"
#include "kv/kv_page_store.h"
#include "model/forward.h"
#include "model/model.h"

namespace pc {

void Forward::slot_kv(int layer, int32_t page, int32_t slot, float* k_out, float* v_out) const {
  const ModelConfig& c = model_.config();
  const int hd = int(c.head_dim), P = kv_.shape().page_size;
  const uint16_t *kb = nullptr, *vb = nullptr;
  kv_.layer_blocks(layer, std::span<const int32_t>(&page, 1), &kb, &vb);
  for (int g = 0; g < int(c.n_kv_head); ++g) {
    const uint16_t* kh = kb + size_t(g) * P * hd;
    const uint16_t* vh = vb + (size_t(g) * P + slot) * hd;
    for (int d = 0; d < hd; ++d) {
      k_out[g * hd + d] = fp16_to_fp32(kh[k_index(P, hd, slot, d)]);
      v_out[g * hd + d] = fp16_to_fp32(vh[d]);
    }
  }
}

void Forward::attention_weights(int layer, const float* q, const SeqKv& seq, int32_t n_slots,
                                std::vector<double>& out) const {
  const ModelConfig& c = model_.config();
  if (layer < 0 || layer >= c.n_layer) throw Error("attention_weights: layer " + std::to_string(layer) + " out of range");
  const int hd = int(c.head_dim), n_kv = int(c.n_kv_head), n_head = int(c.n_head), P = kv_.shape().page_size;
  const int group = n_head / n_kv;
  const int64_t kvd = int64_t(n_kv) * hd;
  // The keys of the slots in order, F32 [n_slots][kvd].
  std::vector<float> keys;
  keys.reserve(size_t(n_slots * kvd));
  for (int32_t p = 0; p < seq.n_pages && int64_t(keys.size()) < n_slots * kvd; ++p) {
    const uint16_t *kb = nullptr, *vb = nullptr;
    kv_.layer_blocks(layer, std::span<const int32_t>(seq.pages + p, 1), &kb, &vb);
    const int filled = seq.fills ? seq.fills[p] : P;
    for (int slot = 0; slot < filled && int64_t(keys.size()) < n_slots * kvd; ++slot)
      for (int g = 0; g < n_kv; ++g)
        for (int d = 0; d < hd; ++d) keys.push_back(fp16_to_fp32(kb[size_t(g) * P * hd + k_index(P, hd, slot, d)]));
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
