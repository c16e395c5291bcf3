// The forward pass over a batch of tokens from any number of sequences.
//
// Each batch entry carries its own sequence, position id and KV slot:
//
//   entry  token  pos  seq  slot  logits
//   0      1      0    0    0     no      ┐ sequence 0: prompt chunk
//   1      450    1    0    1     yes     ┘
//   2      29871  57   1    57    yes       sequence 1: one decode step
//
// An entry writes its K (after RoPE) and V into slot `slot` of its sequence's
// page table and attends to slots [0, slot] of that table, in table order.
// Position ids are independent of slots (modules keep schema positions).
//
// Batch invariance: an entry's logits depend only on its token, position and
// the KV it attends to — bit for bit, whatever else is in the batch, however a
// prompt is chunked, and whatever the thread count.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "common/line_vector.h"
#include "kernels/elementwise.h"
#include "kernels/paged_attention.h"
#include "kv/kv_page_store.h"
#include "model/delta_net.h"
#include "model/moe.h"

namespace pc {

class Model;
class RecurrentState;
struct StateCapture;
class ThreadPool;

struct SeqKv {
  const int32_t* pages = nullptr;  // page ids, in sequence order
  int32_t n_pages = 0;
  // Filled slots of each page, or null when every page but the last is full.
  // With fills, logical slot t is the t-th filled slot counting page by page
  // (PML plans reference cached module pages that end mid-page).
  const int32_t* fills = nullptr;
  // Models with recurrent layers (ModelConfig::n_recurrent > 0): the sequence's
  // state, which its entries must continue: in batch order, at slots
  // state->n_tokens(), +1, ... (run() advances it by its entries). Unused otherwise.
  RecurrentState* state = nullptr;
  // Copies of `state` to take inside this pass, each right after the token that brings
  // it to `after` tokens (resume points: engine/state_snapshots.h). Empty: none.
  std::span<const StateCapture> captures = {};
};

struct BatchEntry {
  int32_t token = 0;
  int32_t pos = 0;
  int32_t seq = 0;    // index into the SeqKv span
  int32_t slot = 0;   // logical slot in the sequence
  bool logits = false;
};

class Forward {
 public:
  Forward(const Model& model, KvPageStore& kv, ThreadPool& pool);
  ~Forward();

  // Runs the batch. Returns logits for the entries with logits=true, in batch
  // order: [n_logits][n_vocab], valid until the next call. Throws pc::Error on
  // invalid entries (token out of range, slot outside the page table).
  const float* run(std::span<const BatchEntry> batch, std::span<const SeqKv> seqs);

  // Runs only layers [0, layer) of the batch (their K/V, and layer `layer`'s, written to
  // the slots as run() writes them) and returns layer `layer`'s K (after RoPE) and V of every entry as
  // stored, decoded to F32 (F16 or the KV type's quantization): k_out, v_out [m][n_kv_head * head_dim], and when
  // q_out is given the queries, F32 after RoPE: [m][n_head * head_dim]. The arithmetic of
  // those layers is run()'s. For the deviation check of approximate reuse; not
  // for models with recurrent layers (throws pc::Error).
  void run_to_layer(std::span<const BatchEntry> batch, std::span<const SeqKv> seqs, int layer,
                    std::vector<float>& k_out, std::vector<float>& v_out,
                    std::vector<float>* q_out = nullptr);

  // Probes of one layer's attention over KV already in pages (model/layer_probe.cc), for
  // the check pass of approximate reuse. They read K through the kernels' page layout
  // (kernels/k_layout.h).
  //
  // Layer `layer`'s K and V of `slot` of `page`, decoded to F32: k_out, v_out
  // [n_kv_head * head_dim].
  void slot_kv(int layer, int32_t page, int32_t slot, float* k_out, float* v_out) const;
  // The softmax attention of one query row at `layer` — q [n_head * head_dim], F32 after
  // RoPE — over the first n_slots logical slots of `seq`, without a window or soft-cap:
  // out [n_head][n_slots], each row summing to 1. In double precision, in slot order, so
  // the weights do not depend on threads or batches.
  void attention_weights(int layer, const float* q, const SeqKv& seq, int32_t n_slots,
                         std::vector<double>& out) const;

  int64_t n_vocab() const;
  const Model& model() const { return model_; }

  // Sizes the batch buffers for batches of up to m entries, n_logits of them
  // with logits (run() grows them to each batch's size otherwise). Growing
  // them zero-fills and faults in their pages, which a batch waits for: the
  // first prompt of 512 tokens ran 100-220 ms slower than the next on a
  // tinyllama shape (45 MB of buffers), and ~0.25 s went to them before an
  // 8B shape's first prompt (100 MB). The engine sizes them for a step of up
  // to 512 tokens when it starts.
  void reserve(int64_t m, int64_t n_logits);

 private:
  void validate(std::span<const BatchEntry> batch, std::span<const SeqKv> seqs) const;
  // Embeddings, RoPE angles and slot mapping of a batch; positions written.
  void begin_batch(std::span<const BatchEntry> batch, std::span<const SeqKv> seqs);
  // Normed input, Q/K/V projections, biases, Q/K norms and RoPE of a layer (q_, k_, v_);
  // without Q when !with_q (run_to_layer's last layer, when no queries are asked for).
  void project_qkv(int layer, int64_t m, bool with_q = true);
  void attention_block(int layer, std::span<const BatchEntry> batch, std::span<const SeqKv> seqs);
  bool plan_split(int64_t n_blocks, int group);
  void ffn_block(int layer, int64_t m);
  // Gated DeltaNet mixer of a layer (delta_net.h), on the sequences' states.
  void delta_net_block(int layer, int64_t m);
  void moe_block(int layer, int64_t m);
  // Runs layers [0, n) of the batch.
  void run_layers(int n, std::span<const BatchEntry> batch, std::span<const SeqKv> seqs);
  void add_residual(const std::vector<float>& post_norm, int64_t m);
  // K and V of one KV head of every batch entry, rounded to F16, into their slots.
  void store_kv(int layer, int64_t head, int64_t m);
  void map_slots(std::span<const BatchEntry> batch, std::span<const SeqKv> seqs);

  const Model& model_;
  KvPageStore& kv_;
  ThreadPool& pool_;
  // The distinct RoPE settings of the layers (gemma3: local and global) and
  // which one each layer uses; angles are computed once per token and setting.
  std::vector<Rope> ropes_;
  std::vector<int> layer_rope_;  // [n_layer] index into ropes_
  // Activations, grown on demand and reused (no allocation in steady state).
  int64_t cap_m_ = 0, cap_logits_ = 0;
  LineVector<float> x_;      // [m][n_embd] residual stream
  LineVector<float> xn_;     // [m][n_embd] normed input of a sub-block
  LineVector<float> q_;      // [m][n_head*hd]
  LineVector<float> k_, v_;  // [m][n_kv*hd]
  LineVector<float> att_;    // [m][n_head*hd] attention output
  LineVector<float> o_;      // [m][n_embd]
  LineVector<float> gate_, up_;  // [m][n_ff]
  LineVector<float> qg_;     // [m][2*n_head*hd] gated attention's projection: per head [q | gate]
  LineVector<float> gatt_;   // [m][n_head*hd] its output gates
  DeltaNet delta_net_;
  MoeFfn moe_;
  // Recurrent layers: per sequence, its batch rows in order and its state.
  std::vector<std::vector<int32_t>> seq_rows_;
  std::vector<RecurrentState*> seq_states_;
  std::vector<std::span<const StateCapture>> seq_captures_;
  LineVector<float> cs_;     // [n_ropes][m][n_rot] rope cos/sin
  std::vector<int> pos_;      // [m] position ids (the attention window's queries)
  LineVector<float> logits_; // [n_logits][n_vocab]
  LineVector<float> scratch_;  // per-thread attention scratch
  std::vector<int32_t> blocks_;  // attention: first entry of each run of tokens, then m
  std::vector<int> n_ctx_;       // attention: visible slots per entry
  // Attention split by softmax segment (few runs, long contexts): the tasks
  // (head -1: every KV head); per run, KV head and segment, in that order, its
  // queries' state; per run and KV head, its first state.
  struct SplitTask {
    int32_t run, head, seg;
  };
  std::vector<SplitTask> split_;
  std::vector<AttentionState> split_state_;
  std::vector<int64_t> split_first_;
  LineVector<float> states_;
  std::vector<std::vector<const uint16_t*>> kptr_, vptr_;  // per sequence: page block pointers
  std::vector<std::vector<const int32_t*>> ppos_;  // per sequence: page position ids (windowed layers)
  std::vector<std::vector<int32_t>> slot_page_, slot_off_;  // per sequence with fills: slot → page, offset
  std::vector<KvSlot> slots_;  // [m] the page slot each entry writes
};

}  // namespace pc
