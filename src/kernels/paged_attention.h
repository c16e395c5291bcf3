// Attention of query vectors over a sequence's paged KV (F16, Q8_0 or Q4_0:
// kernels/kv_quant.h), flash-style:
// keys are visited in sequence order with an online softmax, so a query's
// result depends only on the query and the KV it sees — never on how many
// other queries are batched with it. paged_attention.cc states the arithmetic.
#pragma once
#include <cstdint>

#include "kernels/kv_quant.h"

namespace pc {

// Default softmax segment (PagedAttentionArgs::segment): contexts up to this
// many slots are one segment; longer ones can be split across threads by
// segment (decode) with bitwise the result of the whole computation.
constexpr int kAttnSegmentSlots = 256;

struct PagedAttentionArgs {
  // Per page of the sequence, in order: the layer's K and V blocks, each
  // [n_kv_head][page_size × head_dim]. F16: K in blocks of 8 slots,
  // dimension-major (k_layout.h), V slot-major rows. Quantized types: K and V
  // both slot-major rows of kv_row_bytes(kv_type, head_dim) bytes (kv_quant.h),
  // the block's address given as a 16-bit word pointer.
  const uint16_t* const* k_pages = nullptr;
  const uint16_t* const* v_pages = nullptr;
  KvType kv_type = KvType::kF16;
  int page_size = 16;
  int head_dim = 0;
  int kv_head = 0;     // which KV head (selects its page_size × head_dim slabs)
  int n_kv_head = 0;
  int n_ctx = 0;       // number of slots visible to the query, in sequence order
  // Filled slots of each page (null: every page but the last is full). With
  // fills, the sequence's slots are page 0's first fills[0] slots, then page
  // 1's first fills[1], ... (PML plans reference module pages ending mid-page).
  const int32_t* fills = nullptr;
  float scale = 1.f;   // usually 1/sqrt(head_dim)
  // Logit soft-capping (gemma2): each score s becomes softcap * tanh(s / softcap)
  // (paged_attention.cc states the operations); 0: none.
  float softcap = 0.f;
  // Sliding window, in position ids: a query at position q_pos sees the slot
  // holding position j only when q_pos - j < window (0: no window). Needs
  // pos_pages: per page of the sequence, in order, the position id of each slot.
  int window = 0;
  const int32_t* const* pos_pages = nullptr;
  int q_pos = 0;       // the query's position (paged_attention(); the tokens form has its own)
  // Softmax segment length in slots (paged_attention.cc): a block belongs to
  // segment floor(its first slot's position / segment); the online softmax
  // restarts at each segment's first block, and the segments' states are
  // merged in order. Part of the arithmetic: every path that must
  // agree bitwise uses one value (the forward pass: kAttnSegmentSlots).
  int segment = kAttnSegmentSlots;
  // Attention sinks (gpt-oss): per query head of the group ([group], the heads
  // that share kv_head, in order), a logit that takes softmax mass but has no
  // value: out = acc / (S + exp(sink - M)) (paged_attention.cc). null: none.
  const float* sinks = nullptr;
};

// q: [group][head_dim] — the query heads that share kv_head (grouped-query
// attention loads each key once for all of them). out: [group][head_dim].
// scratch: at least paged_attention_scratch(page_size, head_dim, group) floats.
// Scratch floats for nq query heads (AVX2 kernel: chunks of 8 blocks of 8
// slots, each query's state and merged state, a chunk's K and V dequantized
// and 8 rows being transposed; the scalar path needs less).
inline int64_t attention_scratch_floats(int head_dim, int64_t nq) {
  const int64_t chunk = 64;
  return 3 * nq * head_dim + 4 * nq + chunk * head_dim / 2 + nq * chunk + nq * chunk / 8 + 3 * nq +
         (2 * chunk + 8) * head_dim + 64;
}
inline int64_t paged_attention_scratch(int /*page_size*/, int head_dim, int group) {
  return attention_scratch_floats(head_dim, group);
}
void paged_attention(const PagedAttentionArgs& a, const float* q, int group, float* out,
                     float* scratch);

// Several query tokens of one sequence and one KV head at once (a prompt
// chunk): each page of K/V is loaded once for all n_tok × group queries.
// Token i's query heads are at q + i*q_stride ([group][head_dim]), its output
// at out + i*out_stride, and it sees slots [0, n_ctx[i]) (a.n_ctx is unused).
// Every query gets bitwise the result paged_attention() would give it alone:
// the per-key arithmetic (paged_attention.cc) is unchanged, only the loops are
// reordered. n_tok <= kAttnMaxTokens.
constexpr int kAttnMaxTokens = 32;
// Softmax state of nq queries over part of their context, before the final
// normalization: acc [nq][head_dim], running maximum m [nq], sum s [nq]
// (m = -inf, s = 0, acc = 0: the query saw no slot of that part).
struct AttentionState {
  float* acc = nullptr;
  float* m = nullptr;
  float* s = nullptr;
};
inline int64_t attention_state_floats(int head_dim, int64_t nq) { return nq * (head_dim + 2); }
inline AttentionState attention_state_at(float* base, int head_dim, int64_t nq) {
  return {base, base + nq * head_dim, base + nq * head_dim + nq};
}

struct PagedAttentionTokens {
  int n_tok = 0;
  const float* q = nullptr;
  int64_t q_stride = 0;
  const int* n_ctx = nullptr;  // [n_tok]
  const int* q_pos = nullptr;  // [n_tok] the tokens' positions (with a window; else unused)
  float* out = nullptr;
  int64_t out_stride = 0;
  // Split form (decode over many threads): with seg >= 0, only the blocks of
  // softmax segment `seg` (slots from seg * a.segment), and each query's state
  // written to `state` (query i * group + j) instead of an output;
  // attention_merge() of segments 0, 1, ... then gives bitwise the output of
  // the whole computation. out is unused.
  int seg = -1;
  AttentionState state;
  // Split form: the calling thread runs segment seg + 1 of the same tokens
  // next, KV head 0 first (a decode task over all KV heads); the last KV
  // head's call then prefetches into those pages as it ends. Results never
  // depend on it.
  bool next_segment_next = false;
};
// scratch floats for up to n_tok tokens of `group` query heads.
inline int64_t paged_attention_tokens_scratch(int /*page_size*/, int head_dim, int group, int n_tok) {
  return attention_scratch_floats(head_dim, int64_t(group) * n_tok);
}
void paged_attention_tokens(const PagedAttentionArgs& a, int group, const PagedAttentionTokens& t,
                            float* scratch);

// Whether decode calls prefetch the KV ahead of their arithmetic
// (paged_attention_internal.h, AttnPrefetch): on unless turned off. Results
// never depend on it; it is a process-wide setting for measuring the prefetch
// side by side (bench prefill --attn-prefetch on off) and for tests.
void set_attn_prefetch(bool on);
bool attn_prefetch();

// The output of query qi from its states over segments 0 .. n_seg-1 (the
// split form above, segment k in parts[k]): merged in that order as
// paged_attention.cc states, then normalized; with `sink`, the query head's
// attention sink folded in before the normalization (PagedAttentionArgs::sinks).
// out: [head_dim].
void attention_merge(int head_dim, const AttentionState* parts, int n_seg, int64_t qi, float* out,
                     const float* sink = nullptr);

}  // namespace pc
