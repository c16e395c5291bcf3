#include "model/forward.h"

#include <algorithm>
#include <cmath>

#include "gguf/gguf.h"
#include "gguf/quants.h"
#include "kernels/elementwise.h"
#include "kernels/fixed_exp.h"
#include "kernels/matmul.h"
#include "kernels/paged_attention.h"
#include "kernels/thread_pool.h"
#include "kv/kv_page_store.h"
#include "model/model.h"
#include "model/recurrent_state.h"

namespace pc {

namespace {

void add_bias(float* y, const std::vector<float>& b, int64_t i, int64_t n) {
  if (!b.empty()) add_inplace(y + i * n, b.data(), n);
}

// Runs fn(i) for rows i in [0, m) on the pool, in chunks of rows. Each row is
// computed by the same sequential code whichever thread runs it, so results do
// not depend on the split. Small batches (decode) stay on the calling thread.
template <class F>
void for_rows(ThreadPool& pool, int64_t m, F&& fn) {
  constexpr int64_t kRows = 8;
  if (m < 2 * kRows || pool.size() == 1) {
    for (int64_t i = 0; i < m; ++i) fn(i);
    return;
  }
  pool.parallel_for((m + kRows - 1) / kRows, [&](int64_t t, int) {
    const int64_t r1 = (t + 1) * kRows < m ? (t + 1) * kRows : m;
    for (int64_t i = t * kRows; i < r1; ++i) fn(i);
  });
}

}  // namespace

Forward::Forward(const Model& model, KvPageStore& kv, ThreadPool& pool)
    : model_(model), kv_(kv), pool_(pool) {
  const ModelConfig& c = model.config();
  // One Rope per distinct setting, in layer order.
  std::vector<RopeParams> seen;
  for (int l = 0; l < c.n_layer; ++l) {
    const RopeParams p = model.rope_params(l);
    size_t i = 0;
    while (i < seen.size() && !(seen[i].base == p.base && seen[i].freq_scale == p.freq_scale &&
                                seen[i].factors == p.factors && seen[i].attn_factor == p.attn_factor))
      ++i;
    if (i == seen.size()) {
      seen.push_back(p);
      ropes_.emplace_back(p);
    }
    layer_rope_.push_back(int(i));
  }
  const KvShape& s = kv.shape();
  if (s.n_layer != c.n_layer || s.n_kv_head != c.n_kv_head || s.head_dim != c.head_dim)
    throw Error("KV storage shape does not match the model");
  const int group = int(c.n_head / c.n_kv_head);
  scratch_.resize(size_t(pool.size()) *
                  paged_attention_tokens_scratch(s.page_size, int(c.head_dim), group, kAttnMaxTokens));
}

Forward::~Forward() = default;

int64_t Forward::n_vocab() const { return model_.config().n_vocab; }

void Forward::reserve(int64_t m, int64_t n_logits) {
  const ModelConfig& c = model_.config();
  if (m > cap_m_) {
    cap_m_ = m;
    x_.resize(m * c.n_embd);
    xn_.resize(m * c.n_embd);
    q_.resize(m * c.n_head * c.head_dim);
    k_.resize(m * c.n_kv_head * c.head_dim);
    v_.resize(m * c.n_kv_head * c.head_dim);
    att_.resize(m * c.n_head * c.head_dim);
    o_.resize(m * c.n_embd);
    gate_.resize(m * c.n_ff);
    up_.resize(m * c.n_ff);
    bool gated = false;
    for (const LayerConfig& l : c.layers) gated |= l.attn_gate;
    if (gated) {
      qg_.resize(m * 2 * c.n_head * c.head_dim);
      gatt_.resize(m * c.n_head * c.head_dim);
    }
    cs_.resize(ropes_.size() * m * c.n_rot);
    pos_.resize(m);
  }
  if (n_logits > cap_logits_) {
    cap_logits_ = n_logits;
    logits_.resize(n_logits * c.n_vocab);
  }
}

void Forward::validate(std::span<const BatchEntry> batch, std::span<const SeqKv> seqs) const {
  const int P = kv_.shape().page_size;
  for (size_t i = 0; i < batch.size(); ++i) {
    const BatchEntry& e = batch[i];
    if (e.token < 0 || e.token >= n_vocab())
      throw Error("batch entry " + std::to_string(i) + ": token id " + std::to_string(e.token) +
                  " outside the vocabulary (" + std::to_string(n_vocab()) + ")");
    if (e.seq < 0 || size_t(e.seq) >= seqs.size())
      throw Error("batch entry " + std::to_string(i) + ": unknown sequence " + std::to_string(e.seq));
    const SeqKv& q = seqs[e.seq];
    int64_t n_slots = int64_t(q.n_pages) * P;
    if (q.fills) {
      n_slots = 0;
      for (int32_t p = 0; p < q.n_pages; ++p) n_slots += q.fills[p];
    }
    if (e.slot < 0 || e.slot >= n_slots)
      throw Error("batch entry " + std::to_string(i) + ": slot " + std::to_string(e.slot) +
                  " outside the sequence's page table");
  }
  if (model_.config().n_recurrent == 0) return;
  // A recurrence continues its state: each sequence's entries, in batch order,
  // at the next slots.
  std::vector<int64_t> next(seqs.size());
  for (size_t s = 0; s < seqs.size(); ++s) next[s] = seqs[s].state ? seqs[s].state->n_tokens() : -1;
  for (size_t i = 0; i < batch.size(); ++i) {
    const BatchEntry& e = batch[i];
    if (!seqs[e.seq].state || seqs[e.seq].state->empty())
      throw Error("batch entry " + std::to_string(i) + ": sequence " + std::to_string(e.seq) +
                  " has no recurrent state (the model has recurrent layers)");
    if (e.slot != next[e.seq])
      throw Error("batch entry " + std::to_string(i) + ": slot " + std::to_string(e.slot) + " does not continue " +
                  "the sequence's recurrent state (at token " + std::to_string(next[e.seq]) + ")");
    ++next[e.seq];
  }
  for (size_t s = 0; s < seqs.size(); ++s)
    for (const StateCapture& cap : seqs[s].captures)
      if (!cap.into || cap.into->bytes() != seqs[s].state->bytes() || cap.after <= seqs[s].state->n_tokens() ||
          cap.after > next[s])
        throw Error("sequence " + std::to_string(s) + ": a state capture after token " + std::to_string(cap.after) +
                    " outside the batch's tokens of the sequence, or into a state of another shape");
}

const float* Forward::run(std::span<const BatchEntry> batch, std::span<const SeqKv> seqs) {
  validate(batch, seqs);
  const ModelConfig& c = model_.config();
  const int64_t m = int64_t(batch.size()), E = c.n_embd;
  int64_t n_logits = 0;
  for (const BatchEntry& e : batch) n_logits += e.logits;
  reserve(m, n_logits);
  if (m == 0) return logits_.data();

  begin_batch(batch, seqs);
  run_layers(int(c.n_layer), batch, seqs);
  for (size_t s = 0; s < seqs.size(); ++s)
    if (c.n_recurrent > 0 && seqs[s].state) {
      seqs[s].state->advance(int64_t(seq_rows_[s].size()));
      for (const StateCapture& cap : seqs[s].captures) cap.into->advance(cap.after - cap.into->n_tokens());
    }
  // Final norm and output projection, only for rows that want logits.
  int64_t r = 0;
  for (int64_t i = 0; i < m; ++i) {
    if (!batch[i].logits) continue;
    rms_norm(x_.data() + i * E, model_.output_norm().data(), xn_.data() + r * E, E, c.rms_eps);
    ++r;
  }
  matmul(model_.output(), xn_.data(), n_logits, logits_.data(), pool_);
  if (c.final_softcap > 0)
    for_rows(pool_, n_logits, [&](int64_t i) { softcap_inplace(logits_.data() + i * c.n_vocab, c.n_vocab, c.final_softcap); });
  return logits_.data();
}

void Forward::begin_batch(std::span<const BatchEntry> batch, std::span<const SeqKv> seqs) {
  const ModelConfig& c = model_.config();
  const int64_t m = int64_t(batch.size()), E = c.n_embd;
  const WeightView& embd = model_.token_embd();
  for (int64_t i = 0; i < m; ++i) {
    float* x = x_.data() + i * E;
    dequantize_row(embd.type, embd.data + batch[i].token * embd.row_bytes, x, E);
    if (c.embd_scale != 1.f)
      for (int64_t d = 0; d < E; ++d) x[d] *= c.embd_scale;
    for (size_t r = 0; r < ropes_.size(); ++r) ropes_[r].angles(batch[i].pos, cs_.data() + (r * m + i) * c.n_rot);
    pos_[i] = batch[i].pos;
  }
  kptr_.resize(seqs.size());
  vptr_.resize(seqs.size());
  ppos_.resize(seqs.size());
  if (c.has_window())
    for (size_t s = 0; s < seqs.size(); ++s) {
      ppos_[s].resize(seqs[s].n_pages);
      for (int32_t p = 0; p < seqs[s].n_pages; ++p) ppos_[s][p] = kv_.pos(seqs[s].pages[p]);
    }
  map_slots(batch, seqs);
  // Positions are per slot, not per layer: written once, in batch order.
  for (int64_t i = 0; i < m; ++i) kv_.pos(slots_[i].page)[slots_[i].slot] = batch[i].pos;
}

void Forward::run_to_layer(std::span<const BatchEntry> batch, std::span<const SeqKv> seqs, int layer,
                           std::vector<float>& k_out, std::vector<float>& v_out,
                           std::vector<float>* q_out) {
  validate(batch, seqs);
  const ModelConfig& c = model_.config();
  if (layer < 0 || layer >= c.n_layer) throw Error("run_to_layer: layer " + std::to_string(layer) + " out of range");
  const int64_t m = int64_t(batch.size()), kvd = int64_t(c.n_kv_head) * c.head_dim;
  reserve(m, 0);
  k_out.resize(size_t(m * kvd));
  v_out.resize(size_t(m * kvd));
  if (m == 0) return;
  if (c.n_recurrent > 0) throw Error("run_to_layer: not available for models with recurrent layers");
  begin_batch(batch, seqs);
  run_layers(layer, batch, seqs);
  project_qkv(layer, m, /*with_q=*/q_out != nullptr);  // (layer `layer`'s queries only when asked for)
  for (int64_t h = 0; h < c.n_kv_head; ++h) store_kv(layer, h, m);
  // As stored: read back from the slots (F16, or dequantized).
  for (int64_t i = 0; i < m; ++i)
    kv_.read_slot(layer, slots_[i].page, slots_[i].slot, k_out.data() + i * kvd, v_out.data() + i * kvd);
  if (q_out) q_out->assign(q_.begin(), q_.begin() + m * int64_t(c.n_head) * c.head_dim);
}

void Forward::run_layers(int n, std::span<const BatchEntry> batch, std::span<const SeqKv> seqs) {
  const ModelConfig& c = model_.config();
  const int64_t m = int64_t(batch.size());
  if (c.n_recurrent > 0) {
    seq_rows_.resize(seqs.size());  // (capacity kept between batches)
    for (std::vector<int32_t>& r : seq_rows_) r.clear();
    seq_states_.resize(seqs.size());
    seq_captures_.resize(seqs.size());
    for (size_t s = 0; s < seqs.size(); ++s) {
      seq_states_[s] = seqs[s].state;
      seq_captures_[s] = seqs[s].captures;
    }
    for (int64_t i = 0; i < m; ++i) seq_rows_[batch[i].seq].push_back(int32_t(i));
  }
  for (int l = 0; l < n; ++l) {
    if (c.layers[l].mixer == Mixer::kDeltaNet)
      delta_net_block(l, m);
    else
      attention_block(l, batch, seqs);
    if (c.layers[l].ffn == Ffn::kMoe)
      moe_block(l, m);
    else
      ffn_block(l, m);
  }
}

void Forward::delta_net_block(int l, int64_t m) {
  const ModelConfig& c = model_.config();
  const LayerWeights& w = model_.layers()[l];
  const int64_t E = c.n_embd;
  for_rows(pool_, m, [&](int64_t i) {
    rms_norm(x_.data() + i * E, w.attn_norm.data(), xn_.data() + i * E, E, c.rms_eps);
  });
  delta_net_.run(c.delta_net, c.rms_eps, w.delta_net, c.layers[l].state_index, xn_.data(), m, seq_rows_,
                 seq_states_, seq_captures_, o_.data(), pool_);
  add_residual(w.post_attn_norm, m);
}

void Forward::moe_block(int l, int64_t m) {
  const ModelConfig& c = model_.config();
  const LayerWeights& w = model_.layers()[l];
  const int64_t E = c.n_embd;
  for_rows(pool_, m, [&](int64_t i) {
    rms_norm(x_.data() + i * E, w.ffn_norm.data(), xn_.data() + i * E, E, c.rms_eps);
  });
  moe_.run(c.moe, E, w.moe, xn_.data(), m, o_.data(), pool_);
  add_residual(w.post_ffn_norm, m);
}

// For sequences whose pages are not all full (SeqKv::fills), where each
// logical slot lives: slot_page_[s][t], slot_off_[s][t]; then the page slot
// each batch entry writes (slots_).
void Forward::map_slots(std::span<const BatchEntry> batch, std::span<const SeqKv> seqs) {
  slot_page_.resize(seqs.size());
  slot_off_.resize(seqs.size());
  for (size_t s = 0; s < seqs.size(); ++s) {
    slot_page_[s].clear();
    slot_off_[s].clear();
    if (!seqs[s].fills) continue;
    for (int32_t p = 0; p < seqs[s].n_pages; ++p)
      for (int32_t k = 0; k < seqs[s].fills[p]; ++k) {
        slot_page_[s].push_back(seqs[s].pages[p]);
        slot_off_[s].push_back(k);
      }
  }
  const int P = kv_.shape().page_size;
  slots_.resize(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    const BatchEntry& e = batch[i];
    if (seqs[e.seq].fills != nullptr)
      slots_[i] = {slot_page_[e.seq][e.slot], slot_off_[e.seq][e.slot]};
    else
      slots_[i] = {seqs[e.seq].pages[e.slot / P], e.slot % P};
  }
}

void Forward::store_kv(int layer, int64_t h, int64_t m) {
  const ModelConfig& c = model_.config();
  const int64_t hd = c.head_dim, kvd = c.n_kv_head * hd;
  kv_.write_slots(layer, int(h), std::span<const KvSlot>(slots_.data(), size_t(m)), k_.data() + h * hd,
                  v_.data() + h * hd, size_t(kvd));
}

void Forward::project_qkv(int l, int64_t m, bool with_q) {
  const ModelConfig& c = model_.config();
  const LayerWeights& w = model_.layers()[l];
  const Rope& rope = ropes_[layer_rope_[l]];
  const float* cs_layer = cs_.data() + layer_rope_[l] * m * c.n_rot;
  const int64_t E = c.n_embd, hd = c.head_dim;
  const int64_t qd = c.n_head * hd, kvd = c.n_kv_head * hd;
  for_rows(pool_, m, [&](int64_t i) {
    rms_norm(x_.data() + i * E, w.attn_norm.data(), xn_.data() + i * E, E, c.rms_eps);
  });
  const bool gated = c.layers[l].attn_gate;
  const MatmulOut qkv[] = {{w.wq, gated ? qg_.data() : q_.data()}, {w.wk, k_.data()}, {w.wv, v_.data()}};
  matmul_many(std::span<const MatmulOut>(qkv).subspan(with_q ? 0 : 1), xn_.data(), m, pool_);
  // Biases, Q/K norms and RoPE, row by row on any thread.
  for_rows(pool_, m, [&](int64_t i) {
    const float* cs = cs_layer + i * c.n_rot;
    add_bias(k_.data(), w.bk, i, kvd);
    add_bias(v_.data(), w.bv, i, kvd);
    for (int64_t h = 0; h < c.n_kv_head; ++h) {
      float* kh = k_.data() + i * kvd + h * hd;
      if (!w.k_norm.empty()) rms_norm(kh, w.k_norm.data(), kh, hd, c.rms_eps);
      rope.apply(kh, cs);
    }
    if (!with_q) return;
    if (gated)  // per head [q | gate] → q_ and gatt_
      for (int64_t h = 0; h < c.n_head; ++h) {
        const float* src = qg_.data() + i * 2 * qd + h * 2 * hd;
        std::copy(src, src + hd, q_.data() + i * qd + h * hd);
        std::copy(src + hd, src + 2 * hd, gatt_.data() + i * qd + h * hd);
      }
    add_bias(q_.data(), w.bq, i, qd);
    for (int64_t h = 0; h < c.n_head; ++h) {
      float* qh = q_.data() + i * qd + h * hd;
      if (!w.q_norm.empty()) rms_norm(qh, w.q_norm.data(), qh, hd, c.rms_eps);
      rope.apply(qh, cs);
    }
  });
}

void Forward::attention_block(int l, std::span<const BatchEntry> batch, std::span<const SeqKv> seqs) {
  const ModelConfig& c = model_.config();
  const LayerWeights& w = model_.layers()[l];
  const LayerConfig& lc = c.layers[l];
  const int64_t m = int64_t(batch.size()), hd = c.head_dim;
  const int64_t qd = c.n_head * hd;
  project_qkv(l, m);
  // In batch order within each KV head (KvPageStore::write_slots), so that
  // should two entries name one slot the last wins; the heads' slabs are
  // disjoint, so heads run in parallel.
  if (m >= 16 && pool_.size() > 1)
    pool_.parallel_for(c.n_kv_head, [&](int64_t h, int) { store_kv(l, h, m); });
  else
    for (int64_t h = 0; h < c.n_kv_head; ++h) store_kv(l, h, m);

  for (size_t s = 0; s < seqs.size(); ++s) {
    kptr_[s].resize(seqs[s].n_pages);
    vptr_[s].resize(seqs[s].n_pages);
    kv_.layer_blocks(l, std::span<const int32_t>(seqs[s].pages, size_t(seqs[s].n_pages)), kptr_[s].data(),
                     vptr_[s].data());
  }
  // Attention tasks: runs of up to kAttnMaxTokens consecutive entries of one
  // sequence × KV heads; each task loads a page of K/V once for all its
  // queries. The per-query arithmetic does not depend on the grouping.
  blocks_.clear();
  for (int64_t i = 0; i < m;) {
    int64_t j = i + 1;
    while (j < m && j - i < kAttnMaxTokens && batch[j].seq == batch[i].seq) ++j;
    blocks_.push_back(int32_t(i));
    i = j;
  }
  const int64_t n_blocks = int64_t(blocks_.size());
  blocks_.push_back(int32_t(m));
  n_ctx_.resize(m);
  for (int64_t i = 0; i < m; ++i) n_ctx_[i] = batch[i].slot + 1;
  const int group = int(c.n_head / c.n_kv_head);
  const int64_t scratch_per_thread = int64_t(scratch_.size()) / pool_.size();
  auto attention_args = [&](const BatchEntry& e, int g) {
    PagedAttentionArgs a;
    a.kv_type = kv_.shape().kv_type;
    a.k_pages = kptr_[e.seq].data();
    a.v_pages = vptr_[e.seq].data();
    a.page_size = kv_.shape().page_size;
    a.head_dim = int(hd);
    a.kv_head = g;
    a.fills = seqs[e.seq].fills;
    a.n_kv_head = int(c.n_kv_head);
    a.scale = lc.attn_scale;
    a.softcap = lc.attn_softcap;
    a.window = lc.window;
    if (lc.window > 0) a.pos_pages = ppos_[e.seq].data();
    if (lc.attn_sinks) a.sinks = w.sinks.data() + g * group;
    return a;
  };
  auto run_tokens = [&](int64_t b, int g) {
    const int64_t i0 = blocks_[b], i1 = blocks_[b + 1];
    const int64_t off = i0 * qd + int64_t(g) * group * hd;
    PagedAttentionTokens t;
    t.n_tok = int(i1 - i0);
    t.q = q_.data() + off;
    t.q_stride = qd;
    t.n_ctx = n_ctx_.data() + i0;
    t.q_pos = pos_.data() + i0;
    t.out = att_.data() + off;
    t.out_stride = qd;
    return t;
  };
  if (plan_split(n_blocks, group)) {
    // Long contexts with few runs (decode; a short turn after a long
    // conversation) or a decode step: one task per run, KV head and softmax
    // segment, each writing its queries' states, then the merge in segment
    // order — bitwise the unsplit result (paged_attention.h). With segments
    // enough for the threads, a task takes a segment for every KV head, in
    // head order (the kernel prefetches the next head's pages as it ends one:
    // AttnPrefetch). The tasks run as the pool's shares: each thread takes
    // one contiguous run of segments, front to back (ThreadPool::parallel_shares).
    pool_.parallel_shares(int64_t(split_.size()), [&](int64_t task, int thread) {
      const SplitTask& st = split_[task];
      const BatchEntry& e = batch[blocks_[st.run]];
      const int g0 = st.head < 0 ? 0 : st.head, g1 = st.head < 0 ? int(c.n_kv_head) : st.head + 1;
      for (int g = g0; g < g1; ++g) {
        PagedAttentionTokens t = run_tokens(st.run, g);
        t.out = nullptr;
        t.seg = st.seg;
        t.state = split_state_[split_first_[st.run * c.n_kv_head + g] + st.seg];
        // A task of all KV heads: its thread's next task is usually the
        // run's next segment (shares run front to back).
        t.next_segment_next = st.head < 0 && g == g1 - 1;
        paged_attention_tokens(attention_args(e, g), group, t, scratch_.data() + thread * scratch_per_thread);
      }
    });
    pool_.parallel_for(n_blocks * c.n_kv_head, [&](int64_t rh, int) {
      const int64_t b = rh / c.n_kv_head, first = split_first_[rh];
      const int64_t n_seg = split_first_[rh + 1] - first;
      const int g = int(rh % c.n_kv_head);
      const PagedAttentionTokens t = run_tokens(b, g);
      for (int64_t qi = 0; qi < int64_t(t.n_tok) * group; ++qi)
        attention_merge(int(hd), split_state_.data() + first, int(n_seg), qi,
                        t.out + (qi / group) * qd + (qi % group) * hd,
                        lc.attn_sinks ? w.sinks.data() + g * group + qi % group : nullptr);
    });
  } else {
    pool_.parallel_for(n_blocks * c.n_kv_head, [&](int64_t task, int thread) {
      // Later blocks of a prompt see more keys: hand them out first.
      const int64_t b = n_blocks - 1 - task / c.n_kv_head;
      const int g = int(task % c.n_kv_head);
      paged_attention_tokens(attention_args(batch[blocks_[b]], g), group, run_tokens(b, g),
                             scratch_.data() + thread * scratch_per_thread);
    });
  }
  if (lc.attn_gate)  // a *= sigmoid(gate)
    for_rows(pool_, m, [&](int64_t i) {
      float* a = att_.data() + i * qd;
      const float* g = gatt_.data() + i * qd;
      for (int64_t d = 0; d < qd; ++d) a[d] *= 1.f / (1.f + fixed_exp(-g[d]));
    });
  matmul(w.wo, att_.data(), m, o_.data(), pool_);
  if (!w.bo.empty())
    for_rows(pool_, m, [&](int64_t i) { add_bias(o_.data(), w.bo, i, c.n_embd); });
  add_residual(w.post_attn_norm, m);
}

// x += o, or x += rmsnorm(o, post_norm) when the layer has that norm (gemma).
void Forward::add_residual(const std::vector<float>& post_norm, int64_t m) {
  const ModelConfig& c = model_.config();
  const int64_t E = c.n_embd;
  for_rows(pool_, m, [&](int64_t i) {
    float* o = o_.data() + i * E;
    if (!post_norm.empty()) rms_norm(o, post_norm.data(), o, E, c.rms_eps);
    add_inplace(x_.data() + i * E, o, E);
  });
}

// Whether to split this step's attention by softmax segment, and if so the
// tasks (split_, split_state_, split_first_), when some run sees more than one
// segment (within a bound on the states' memory): when the (run, KV head)
// tasks are too few to keep the pool busy, or for a decode step (runs of a few
// tokens, whose attention streams the KV from memory) with segments enough
// for a task per segment for all KV heads, where the kernel's prefetch runs on
// from one head's pages into the next's (faster than the per-head tasks on
// any number of threads).
bool Forward::plan_split(int64_t n_blocks, int group) {
  const ModelConfig& c = model_.config();
  const int64_t n_kv = c.n_kv_head, hd = c.head_dim;
  const bool few_tasks = n_blocks * n_kv < 2 * pool_.size();
  bool decode = true;
  for (int64_t b = 0; b < n_blocks; ++b) decode &= blocks_[b + 1] - blocks_[b] <= 4;
  if (!few_tasks && !decode) return false;
  auto segments = [&](int64_t b) {  // of the run's longest context
    int most = 0;
    for (int64_t i = blocks_[b]; i < blocks_[b + 1]; ++i) most = n_ctx_[i] > most ? n_ctx_[i] : most;
    return (most - 1) / kAttnSegmentSlots + 1;
  };
  auto run_queries = [&](int64_t b) { return (blocks_[b + 1] - blocks_[b]) * group; };
  int64_t floats = 0, n_segments = 0;
  bool several = false;
  for (int64_t b = 0; b < n_blocks; ++b) {
    several |= segments(b) > 1;
    n_segments += segments(b);
    floats += segments(b) * n_kv * attention_state_floats(int(hd), run_queries(b));
  }
  const bool all_heads = n_segments >= 2 * pool_.size();
  if (!several || floats > (int64_t(1) << 23) || (!few_tasks && !all_heads)) return false;
  // The states: per run, KV head and segment, in that order.
  split_state_.clear();
  split_first_.clear();
  states_.resize(size_t(floats));
  float* base = states_.data();
  for (int64_t b = 0; b < n_blocks; ++b) {
    for (int64_t g = 0; g < n_kv; ++g) {
      split_first_.push_back(int64_t(split_state_.size()));
      for (int k = 0; k < segments(b); ++k) {
        split_state_.push_back(attention_state_at(base, int(hd), run_queries(b)));
        base += attention_state_floats(int(hd), run_queries(b));
      }
    }
  }
  split_first_.push_back(int64_t(split_state_.size()));
  // The tasks: (run, segment) for all KV heads when there are segments enough
  // for the threads, else (run, KV head, segment).
  split_.clear();
  for (int64_t b = 0; b < n_blocks; ++b)
    for (int64_t g = 0; g < (all_heads ? 1 : n_kv); ++g)
      for (int k = 0; k < segments(b); ++k) split_.push_back({int32_t(b), all_heads ? -1 : int32_t(g), k});
  return true;
}

void Forward::ffn_block(int l, int64_t m) {
  const ModelConfig& c = model_.config();
  const LayerWeights& w = model_.layers()[l];
  const int64_t E = c.n_embd, F = c.n_ff;
  for_rows(pool_, m, [&](int64_t i) {
    rms_norm(x_.data() + i * E, w.ffn_norm.data(), xn_.data() + i * E, E, c.rms_eps);
  });
  const MatmulOut gate_up[] = {{w.w_gate, gate_.data()}, {w.w_up, up_.data()}};
  matmul_many(gate_up, xn_.data(), m, pool_);
  const bool geglu = c.layers[l].activation == Activation::kGeGluTanh;
  for_rows(pool_, m, [&](int64_t i) {
    float* g = gate_.data() + i * F;
    if (geglu)
      geglu_tanh(g, up_.data() + i * F, g, F);
    else
      swiglu(g, up_.data() + i * F, g, F);
  });
  matmul(w.w_down, gate_.data(), m, o_.data(), pool_);
  add_residual(w.post_ffn_norm, m);
}

}  // namespace pc
