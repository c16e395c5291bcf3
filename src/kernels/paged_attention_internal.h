// Internals shared by the scalar and AVX2 attention paths.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "kernels/fixed_exp.h"
#include "kernels/paged_attention.h"
#include "kernels/k_layout.h"

namespace pc {

// The walk of the arithmetic (paged_attention.cc): f(K, kw, V, nb, pos, kpos)
// for each block of a query's causally visible slots in order — a page's slots
// [b, b + nb), b a multiple of 8, nb <= 8, the block's first slot at sequence
// position pos — in the page's slab for a.kv_head, with kpos the position ids
// of its slots ([nb]; null without a.pos_pages). F16: K the block's keys
// ([head_dim][kw], kw its width in the page: key u, dimension d at K[d * kw + u];
// k_layout.h), V its values ([nb][head_dim]). Quantized types: K and V the
// bytes of the block's first row (rows kv_row_bytes() apart), kw unused.
// Only blocks with lo <= pos < hi.
// on_page(p, t0) is called before the blocks of each page p that holds any
// of them (t0: the page's first slot in the sequence).
struct NoPageHook {
  void operator()(int, int) const {}
};
template <class F, class G = NoPageHook>
inline void for_each_key_block(const PagedAttentionArgs& a, int n_ctx, F&& f, int lo = 0,
                               int hi = std::numeric_limits<int>::max(), G&& on_page = G{}) {
  const bool f16 = a.kv_type == KvType::kF16;
  // a row's size and the head's slab offset, in 16-bit words (row bytes are even)
  const size_t row = f16 ? size_t(a.head_dim) : kv_row_bytes(a.kv_type, a.head_dim) / 2;
  const size_t slab = size_t(a.kv_head) * a.page_size * row;
  // Without fills, page p starts at slot p * page_size: the walk starts at
  // the page holding slot lo (a split decode call's segment deep in a long
  // context would otherwise step over every page before it).
  const int p_lo = !a.fills && lo > 0 ? lo / a.page_size : 0;
  for (int t0 = p_lo * a.page_size, p = p_lo; t0 < n_ctx && t0 < hi; ++p) {
    const int pg = a.fills ? a.fills[p] : a.page_size;
    const int nk = n_ctx - t0 < pg ? n_ctx - t0 : pg;
    if (t0 + nk > lo) on_page(p, t0);
    if (t0 + nk > lo)
      for (int b = 0; b < nk; b += 8) {
        if (t0 + b < lo) continue;
        if (t0 + b >= hi) return;
        f(a.k_pages[p] + slab + size_t(b) * row, k_block_width(a.page_size, b),
          a.v_pages[p] + slab + size_t(b) * row, nk - b < 8 ? nk - b : 8, t0 + b,
          a.pos_pages ? a.pos_pages[p] + b : nullptr);
      }
    t0 += pg;
  }
}

// Which of a block's first nb slots (causally visible) a query at position
// q_pos sees through the window (paged_attention.cc): bit u set when slot u is
// visible. All nb bits without a window.
inline unsigned window_bits(const PagedAttentionArgs& a, const int32_t* kpos, int nb, int q_pos) {
  unsigned bits = (1u << nb) - 1u;
  if (a.window > 0)
    for (int u = 0; u < nb; ++u)
      if (int64_t(q_pos) - kpos[u] >= a.window) bits &= ~(1u << u);
  return bits;
}

// Soft-capped score (paged_attention.cc): softcap * tanh(s * (1 / softcap)).
inline float softcap_score(float s, float softcap) { return softcap * fixed_tanh(s * (1.f / softcap)); }

// The slots [lo, hi) whose blocks a call of the tokens form covers: all, or
// one softmax segment (PagedAttentionTokens::seg).
inline void segment_range(const PagedAttentionArgs& a, int seg, int* lo, int* hi) {
  *lo = seg < 0 ? 0 : seg * a.segment;
  *hi = seg < 0 ? std::numeric_limits<int>::max() : (seg + 1) * a.segment;
}

// Merges the state of the next segment (mk, sk, acck) into the state of the
// segments before it (mm, sm, accm), as paged_attention.cc states: an empty
// state (m = -inf) on either side takes the other unchanged.
inline void merge_attention_state(int hd, float* mm, float* sm, float* accm, float mk, float sk,
                                  const float* acck) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  if (mk == kNegInf) return;
  if (*mm == kNegInf) {
    *mm = mk;
    *sm = sk;
    for (int d = 0; d < hd; ++d) accm[d] = acck[d];
    return;
  }
  const float m = mk > *mm ? mk : *mm;
  const float cm = fixed_exp(*mm - m), ck = fixed_exp(mk - m);
  *sm = *sm * cm + sk * ck;
  for (int d = 0; d < hd; ++d) accm[d] = std::fma(acck[d], ck, accm[d] * cm);
  *mm = m;
}

// Folds an attention sink (a logit with no value; PagedAttentionArgs::sinks)
// into a merged state, as a last segment with M = sink, S = 1, acc = 0:
//   m = max(Mm, sink); cm = exp(Mm - m); Sm = Sm * cm + exp(sink - m);
//   accm = accm * cm; Mm = m
// Every path (scalar, AVX2, the split form's merge) calls this one function.
inline void add_attention_sink(int hd, float* mm, float* sm, float* accm, float sink) {
  const float m = sink > *mm ? sink : *mm;
  const float cm = fixed_exp(*mm - m), ck = fixed_exp(sink - m);
  *sm = *sm * cm + ck;
  for (int d = 0; d < hd; ++d) accm[d] = accm[d] * cm;
  *mm = m;
}

// Prefetching for decode. A decode step's few queries use each K and V line
// of the context a few times, so its attention streams the KV from memory;
// left to the hardware, the reads wait on memory between bursts of arithmetic
// (reading a segment's pages first and computing on them after was faster,
// but still one after the other). Instead the kernel queues the K and V lines
// of the page kAttnPrefetchSlots slots ahead of each page it reaches
// (AttnPrefetchWalk), and its register tiles issue `per_step` of the queued
// lines at each step (two dimensions of the scores, a slot of the update),
// so that memory works while the arithmetic runs. Prefetches change no result.
constexpr int kAttnPrefetchSlots = 64;  // one chunk (kAttnChunkSlots) ahead

struct AttnPrefetch {
  static constexpr unsigned kRanges = 64;
  const char* ptr[kRanges];
  const char* end[kRanges];
  unsigned head = 0, tail = 0;
  const char* cur = nullptr;  // the range being issued: its next line and
  const char* stop = nullptr; // its end
  int per_step = 0;  // lines a step issues (0: none; 1 or 2)
  int steps = 0;     // steps taken, and
  int queued = 0;    // lines queued: what the kernel sets per_step from
  // Queues the 64-byte lines of [p, p + bytes) (dropped when the queue is full).
  void push(const void* p, size_t bytes) {
    if (tail - head == kRanges || bytes == 0) return;
    const char* c = static_cast<const char*>(p);
    ptr[tail % kRanges] = c;
    end[tail % kRanges] = c + (bytes + 63) / 64 * 64;
    queued += int((bytes + 63) / 64);
    ++tail;
  }
  // The next queued range into cur / stop (false: none).
  bool refill() {
    if (head == tail) return false;
    cur = ptr[head % kRanges];
    stop = end[head % kRanges];
    ++head;
    return true;
  }
};

// A register tile's hold on the queue: the range being issued (its next line
// and its end) in locals (registers) while the tile runs, written back when
// it ends, so that a step costs a compare, a prefetch and an add — not a walk
// of the ring in memory, and no count kept a step: the tiles' loops take
// fixed numbers of steps, which they add up with skip(). (Counting lines and
// steps at every step kept more state than the registers hold beside a
// tile's addresses; with the KV in cache that cost a decode of 8K tokens a
// third of its arithmetic's time.)
class AttnPrefetchCursor {
 public:
  explicit AttnPrefetchCursor(AttnPrefetch* q) : q_(q), p_(q->cur), end_(q->stop), per_(q->per_step) {}
  ~AttnPrefetchCursor() {
    q_->cur = p_;
    q_->stop = end_;
    q_->steps += steps_;
  }
  AttnPrefetchCursor(const AttnPrefetchCursor&) = delete;
  AttnPrefetchCursor& operator=(const AttnPrefetchCursor&) = delete;
  // Whether step() issues prefetches (a prompt's tiles, and a decode tile
  // once the queue ran dry, do not): the tiles then take loops without the
  // steps.
  bool issuing() const { return per_ > 0; }
  // n steps taken (issuing or not): what the kernel paces per_step by.
  void skip(int n) { steps_ += n; }
  // Issues per_step lines (not counted: skip()).
  void step() {
    line();
    if (per_ > 1) line();
  }
  // The next queued line, taken from the queue (null: none left, or the
  // cursor stopped); step() prefetches what it gives.
  const char* next_line() {
    if (p_ == end_ && (per_ == 0 || !refill())) return nullptr;
    const char* l = p_;
    p_ += 64;
    return l;
  }

 private:
  void line() {
    if (const char* l = next_line()) __builtin_prefetch(l, 0, 3);
  }
  // (once a range; inline: a call in a tile's loop would make the compiler
  // keep its accumulators in memory around it. An empty queue stops the
  // tile's issuing.)
  bool refill() {
    if (!q_->refill()) {
      per_ = 0;
      end_ = p_;
      return false;
    }
    p_ = q_->cur;
    end_ = q_->stop;
    return true;
  }
  AttnPrefetch* q_;
  const char* p_;
  const char* end_;
  int per_;
  int steps_ = 0;
};

// Whether a query at q_pos sees any of page p's slots in use before slot end
// (t0: the page's first slot) through a.window; every page without one.
inline bool page_in_window(const PagedAttentionArgs& a, int p, int t0, int end, int q_pos) {
  if (a.window <= 0) return true;
  const int fill = a.fills ? a.fills[p] : a.page_size, n = end - t0 < fill ? end - t0 : fill;
  for (int u = 0; u < n; ++u)
    if (int64_t(q_pos) - a.pos_pages[p][u] < a.window) return true;
  return false;
}

// The pages a call of the kernel reads, ahead of it: for_each_key_block's
// pages of the slots [first slot, end) in order, less those the window hides
// from a query at q_pos (page_in_window: the call's earliest query sees what
// any of them sees), each as its KV head's K and V slabs; with next_head, then
// the same pages of KV head kv_head + 1 (a split decode call, whose caller
// takes the next head's same segment next); with next_end > the range's end
// and the call's KV head the last, then KV head 0's pages of the slots [end,
// next_end) (a split decode task over all KV heads, whose thread takes the
// next segment next). start() at the first of those pages (index p, first
// slot t0), then next() gives the page `ahead` pages on, one more each call,
// until the pages end (false).
struct AttnPrefetchWalk {
  const PagedAttentionArgs* a = nullptr;  // null: not started
  int end = 0, q_pos = 0;
  bool next_head = false;
  int next_end = 0;  // 0: no next segment
  int p0 = 0, t00 = 0;       // the first page
  int p = 0, t0 = 0, g = 0;  // the cursor: page, its first slot, KV head
  size_t row = 0;            // a slot's K (or V) row, in 16-bit words
  bool done = true;

  void start(const PagedAttentionArgs& args, int range_end, int query_pos, int pages_ahead, bool also_next_head,
             int first_page, int first_t0, int next_segment_end = 0) {
    a = &args;
    end = range_end;
    q_pos = query_pos;
    next_head = also_next_head;
    next_end = args.kv_head + 1 >= args.n_kv_head && next_segment_end > range_end ? next_segment_end : 0;
    p0 = p = first_page;
    t00 = t0 = first_t0;
    g = args.kv_head;
    row = args.kv_type == KvType::kF16 ? size_t(args.head_dim) : kv_row_bytes(args.kv_type, args.head_dim) / 2;
    done = false;
    for (int i = 0; i < pages_ahead && !done; ++i) advance();
  }
  // The K and V slabs of the cursor's page (bytes each), then the cursor moves on.
  bool next(const uint16_t** k, const uint16_t** v, size_t* bytes) {
    if (done) return false;
    const size_t slab = size_t(g) * a->page_size * row;
    *k = a->k_pages[p] + slab;
    *v = a->v_pages[p] + slab;
    *bytes = size_t(a->page_size) * row * 2;
    advance();
    return true;
  }

 private:
  void advance() {
    do {
      t0 += a->fills ? a->fills[p] : a->page_size;
      ++p;
      if (t0 >= end) {
        if (next_head && g == a->kv_head && g + 1 < a->n_kv_head) {
          ++g;  // the next KV head's pages, from the first
          p = p0;
          t0 = t00;
        } else if (next_end > end && t0 < next_end) {
          g = 0;  // KV head 0's pages of the next segment, from where this one ended
          end = next_end;
        } else {
          done = true;
          return;
        }
      }
    } while (!page_in_window(*a, p, t0, end, q_pos));
  }
};

// Quantized K (q8_0, q4_0; paged_attention.cc): the query of each query head
// quantized per block of B = kv_quant_block(type, head_dim) values to 15-bit
// levels: d = max|q| / 16383 (float), level = round-half-to-even(q * (1 / d))
// (levels 0 when d is 0), so |level| <= 16383, the integer dot of a block
// with K's levels (|level| <= 128) fits int32, and a level splits into two
// signed bytes (AttnQueryQ::lohi). lv [head_dim], d [head_dim / B].
// Every path calls this one function.
constexpr float kAttnQueryLevels = 16383.f;
inline void quantize_query(const float* q, int hd, int B, int16_t* lv, float* d) {
  for (int b = 0; b < hd / B; ++b) {
    const float* x = q + b * B;
    float amax = 0.f;
    for (int j = 0; j < B; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float db = amax / kAttnQueryLevels;
    const float id = db != 0.f ? 1.f / db : 0.f;
    d[b] = db;
    for (int j = 0; j < B; ++j) {
      const float v = std::nearbyint(x[j] * id);  // (the default rounding: to nearest even)
      lv[b * B + j] = int16_t(v >= -kAttnQueryLevels && v <= kAttnQueryLevels ? v : 0.f);  // (NaN: 0)
    }
  }
}

// The quantized query as the SIMD tiles read it: pairs[p] holds levels 2p
// (low 16 bits) and 2p + 1 (high 16 bits) ([head_dim / 2]); d its block
// scales. For byte dot products (vpdpbusd) each level q is also split as
// q = 256 hi + lo, hi = (q + 128) >> 8 (in [-64, 64]), lo in [-128, 127]:
// lohi[2g] the lo bytes of levels 4g .. 4g + 3, lohi[2g + 1] their hi bytes
// ([head_dim / 4][2]); corr[b] = 128 * (the sum of block b's levels), which
// the dot of K's levels stored plus 128 (unsigned bytes) overcounts.
struct AttnQueryQ {
  const int32_t* pairs = nullptr;
  const float* d = nullptr;
  const int32_t* lohi = nullptr;
  const int32_t* corr = nullptr;
};
// A block of 8 slots of quantized K as the SIMD tiles read it, prepared once
// per chunk for all its queries by the tile set's prep_k: AVX2 tiles,
// pairs[p * 8 + u] holds slot u's levels 2p (low 16 bits) and 2p + 1 (high),
// as int16 ([head_dim / 2][8]); 16-lane tiles, pairs[g * 8 + u] holds slot
// u's levels 4g .. 4g + 3 plus 128, as unsigned bytes ([head_dim / 4][8]).
// d[b * 8 + u] slot u's scale of quantization block b ([head_dim / B][8]).
// Slots past the block's length: levels 0 and scales 0.
struct AttnKeysQ {
  const int32_t* pairs = nullptr;
  const float* d = nullptr;
};

// Blocks of 8 slots in a chunk of the SIMD attention kernel, and its slots
// (the scores' scratch holds kAttnChunkSlots a query).
constexpr int kAttnChunkBlocks = 8;
constexpr int kAttnChunkSlots = 8 * kAttnChunkBlocks;
// Queries a register tile takes at most (AttnTileSet::qt); a quantized
// set's integer score tiles (qscore) 3 (AVX2's 16 registers) or at most
// kAttnQuantMaxQT (AVX-512's 32: 3 × 4 × 2 accumulators).
constexpr int kAttnMaxQT = 6;
constexpr int kAttnQuantQT = 3;
constexpr int kAttnQuantMaxQT = 4;
// Blocks of 8 slots a score tile takes at most (AttnTileSet::kb), and in the
// quantized tiles.
constexpr int kAttnMaxKB = 8;
constexpr int kAttnQuantKB = 4;

// The register tiles of the SIMD attention kernel (paged_attention_avx2.cc),
// by shape: score[QT-1][KB-1] the scores of QT (1..qt) queries × KB (1..kb)
// blocks of 8 slots; update[QT-1] the accumulators of QT queries for
// attn_update_vectors(NV) vectors of 8 dimensions from v0. The AVX2 kernel has
// its own; AVX-512 ones (paged_attention_avx512_impl.h) do the same
// operations per lane on 16-lane vectors. E is what the tiles read: uint16_t,
// F16 keys and values straight from the pages; float, a chunk of quantized
// rows the kernel dequantized (exactly) into scratch in the same layout.
template <class E>
struct AttnTileSet {
  // (Each tile issues a step at each of its steps: AttnPrefetchCursor.)
  using ScoreFn = void (*)(const float* const* qv, const E* const* kb, float scale, float* const* sc,
                           AttnPrefetch* pf);
  using UpdateFn = void (*)(float* const* acc, const float* const* p, const float* const* c,
                            const E* const* vb, const int* blk_len, int n_blk, int v0, AttnPrefetch* pf);
  ScoreFn score[kAttnMaxQT][kAttnMaxKB] = {};
  UpdateFn update[kAttnMaxQT] = {};
  // Queries a score and update tile takes (score[QT-1], update[QT-1] filled
  // for QT <= qt): as many as the registers hold accumulators for (AVX2's 16:
  // 3; AVX-512's 32: 6 on F16 pages). The quantized sets (E = float): their
  // qscore tiles' count (fill_attn_qscore), their update tiles' uqt.
  int qt = kAttnQuantQT;
  // Blocks a score tile takes (score[][KB-1] filled for KB <= kb): 4 (AVX2;
  // quantized sets), 8 with AVX-512 on F16 pages (a decode token's few
  // queries then have 12 FMA chains, 3 queries × 4 vectors).
  int kb = kAttnQuantKB;
  // Queries an update tile takes (update[QT-1] filled for QT <= uqt).
  // AVX-512's quantized sets take 6 there while their integer score tiles
  // take 4: F32 rows of V (dequantized once a chunk) are what F16 pages'
  // update tiles read, converted.
  int uqt = 0;
  // Vectors of 8 dimensions an update tile covers from v0 (0:
  // attn_update_vectors(NV)).
  int dv = 0;
  // Softmax steps of 16 queries that see every slot of the chunk, a lane per
  // query, each lane the operations of the one-query path (qs: the queries'
  // indices; sc: [query][kAttnChunkSlots] scores, replaced by the exps; cf:
  // [query][kAttnChunkBlocks] the blocks' rescale factors; M, S: the
  // queries' running maxima and sums; the chunk's n_blk blocks of blk_len[b]
  // slots). Null: 8 at a time (the AVX2 form).
  using SoftmaxFn = void (*)(const int* qs, float* sc, float* cf, float* M, float* S, const int* blk_len,
                             int n_blk);
  SoftmaxFn softmax16 = nullptr;
  // The same steps for 8 such queries, two blocks a vector (null:
  // softmax_x8, a block at a time).
  SoftmaxFn softmax8 = nullptr;
  // The same steps for n queries that see every slot of the chunk, one
  // query at a time with its slots in the lanes (the exps of two blocks a
  // vector, the running sum in slot order; for the few queries softmax16
  // leaves: a decode token's group of 3-7 heads). Null: softmax_x8.
  using SoftmaxRowsFn = void (*)(const int* qs, int n, float* sc, float* cf, float* M, float* S,
                                 const int* blk_len, int n_blk);
  SoftmaxRowsFn softmax_rows = nullptr;
  // E = float (quantized pages): scores from K's integer levels instead of
  // score[][]: qscore[QT-1][KB-1] the scores of QT quantized queries × KB
  // prepared blocks (AttnQueryQ, AttnKeysQ), as paged_attention.cc states for
  // quantized K, times scale; and dequant_v, a quantized block's n <= 8 V rows
  // (rows rb bytes apart, head_dim hd a multiple of 32) to [n][hd] F32, each
  // value bitwise kv_dequantize_row()'s.
  using QScoreFn = void (*)(const AttnQueryQ* qv, const AttnKeysQ* kb, float scale, float* const* sc,
                            AttnPrefetch* pf);
  QScoreFn qscore[kAttnQuantMaxQT][kAttnQuantKB] = {};
  using DequantFn = void (*)(KvType t, const uint8_t* rows, size_t rb, int n, int hd, float* out);
  DequantFn dequant_v = nullptr;
  // A quantized block's n <= 8 K rows (rows rb bytes apart) into the
  // AttnKeysQ layout qscore reads: pairs (4 * hd int32 at most), d.
  using PrepKFn = void (*)(KvType t, const uint8_t* rows, size_t rb, int n, int hd, int32_t* pairs, float* d);
  PrepKFn prep_k = nullptr;
  // Which form of the query qscore reads: AttnQueryQ::lohi and corr (true),
  // or pairs.
  bool byte_query = false;
  // update[] reading quantized V rows straight from the pages instead of
  // dequant_v's F32 copy, each value dequantized as loaded (the same values
  // and operations): vupdate[0] q8_0, [1] q4_0, by QT; vb[b] the block's
  // first row. Null for head sizes that are not multiples of 32. The kernel
  // uses them when at most vtiles tiles of up to vqt queries cover all of a
  // chunk's queries (decode): one tile converts each value once either way
  // and saves the copy; AVX-512's two convert it twice and still beat the
  // copy (its stores and loads). A tile covers vdv vectors of 8 dimensions
  // from v0 (4: one quantization block of 32; 8: two, each with its scale).
  using QUpdateFn = void (*)(float* const* acc, const float* const* p, const float* const* c,
                             const uint8_t* const* vb, const int* blk_len, int n_blk, int v0, AttnPrefetch* pf);
  QUpdateFn vupdate[2][kAttnMaxQT] = {};
  int vqt = 0;
  int vdv = 4;
  int vtiles = 1;
};
struct AttnTiles {
  AttnTileSet<uint16_t> f16;
  AttnTileSet<float> f32;
  template <class E>
  const AttnTileSet<E>& of() const {
    if constexpr (std::is_same_v<E, float>) return f32;
    else return f16;
  }
};
constexpr int attn_update_vectors(int nv) { return nv % 4 == 0 ? 4 : nv % 2 == 0 ? 2 : 1; }

template <int QT, int KB, class E>
struct AttnTileShape {
  static constexpr int kQT = QT, kKB = KB;
  using Elem = E;
};
template <int QT, class E>
struct AttnUpdateShape {
  static constexpr int kQT = QT;
  using Elem = E;
};
// A tile table from generic callables: score(AttnTileShape<QT, KB, E>{}) and
// update(AttnUpdateShape<QT, E>{}) return the tiles of that shape and element,
// for QT = 1..kQT and KB = 1..kKB, and the update tiles for QT = 1..kUQT
// (AttnTileSet::uqt).
template <int kQT, int kKB, int kUQT, class E, class Score, class Update>
void fill_attn_tiles(AttnTileSet<E>& t, Score& score, Update& update) {
  static_assert(kQT >= 1 && kQT <= kAttnMaxQT && kKB >= 1 && kKB <= kAttnMaxKB && kUQT >= 1 && kUQT <= kAttnMaxQT);
  [&]<int... I>(std::integer_sequence<int, I...>) {
    ((t.score[I / kKB][I % kKB] = score(AttnTileShape<I / kKB + 1, I % kKB + 1, E>{})), ...);
  }(std::make_integer_sequence<int, kKB * kQT>{});
  [&]<int... I>(std::integer_sequence<int, I...>) {
    ((t.update[I] = update(AttnUpdateShape<I + 1, E>{})), ...);
  }(std::make_integer_sequence<int, kUQT>{});
  t.qt = kQT;
  t.kb = kKB;
  t.uqt = kUQT;
}

// The vupdate table from vupdate(AttnUpdateShape<QT, uint8_t>{}, type), for
// QT = 1..kQT; the tiles cover dv vectors of 8 dimensions.
template <int kQT, class VUpdate>
void fill_attn_vupdate(AttnTileSet<float>& t, int dv, VUpdate&& vupdate) {
  static_assert(kQT >= 1 && kQT <= kAttnMaxQT);
  [&]<int... I>(std::integer_sequence<int, I...>) {
    ((t.vupdate[0][I] = vupdate(AttnUpdateShape<I + 1, uint8_t>{}, std::integral_constant<KvType, KvType::kQ8_0>{}),
      t.vupdate[1][I] = vupdate(AttnUpdateShape<I + 1, uint8_t>{}, std::integral_constant<KvType, KvType::kQ4_0>{})),
     ...);
  }(std::make_integer_sequence<int, kQT>{});
  t.vqt = kQT;
  t.vdv = dv;
}
// The qscore table from qscore(AttnTileShape<QT, KB, float>{}), for QT =
// 1..kQT (the set's qt).
template <int kQT, class QScore>
void fill_attn_qscore(AttnTileSet<float>& t, QScore&& qscore) {
  static_assert(kQT >= 1 && kQT <= kAttnQuantMaxQT);
  [&]<int... I>(std::integer_sequence<int, I...>) {
    ((t.qscore[I / kAttnQuantKB][I % kAttnQuantKB] =
          qscore(AttnTileShape<I / kAttnQuantKB + 1, I % kAttnQuantKB + 1, float>{})),
     ...);
  }(std::make_integer_sequence<int, kAttnQuantKB * kQT>{});
  t.qt = kQT;
}
// F16 pages' tiles for up to kF16QT queries × kF16KB blocks, the quantized
// sets' for kAttnQuantQT × kAttnQuantKB, their update tiles for up to
// kQuantUQT queries.
template <int kF16QT, int kF16KB, int kQuantUQT, class Score, class Update>
AttnTiles make_attn_tiles(Score&& score, Update&& update) {
  AttnTiles t;
  fill_attn_tiles<kF16QT, kF16KB, kF16QT>(t.f16, score, update);
  fill_attn_tiles<kAttnQuantQT, kAttnQuantKB, kQuantUQT>(t.f32, score, update);
  return t;
}

// f(std::integral_constant<int, NV>) for the head sizes with a kernel
// (NV = head_dim / 8); false for the others.
template <class F>
bool with_head_vectors(int head_dim, F&& f) {
  switch (head_dim) {
    case 8: f(std::integral_constant<int, 1>{}); return true;
    case 16: f(std::integral_constant<int, 2>{}); return true;
    case 32: f(std::integral_constant<int, 4>{}); return true;
    case 48: f(std::integral_constant<int, 6>{}); return true;
    case 64: f(std::integral_constant<int, 8>{}); return true;
    case 80: f(std::integral_constant<int, 10>{}); return true;
    case 96: f(std::integral_constant<int, 12>{}); return true;
    case 128: f(std::integral_constant<int, 16>{}); return true;
    case 160: f(std::integral_constant<int, 20>{}); return true;
    case 192: f(std::integral_constant<int, 24>{}); return true;
    case 256: f(std::integral_constant<int, 32>{}); return true;
    default: return false;
  }
}


// AVX-512 tiles for a head size (nullptr: none for it, or not an x86 build).
const AttnTiles* avx512_attn_tiles(int head_dim);
// The same tile code on the AVX2 emulation of its 16-lane operations (tests).
const AttnTiles* avx512_emulated_attn_tiles(int head_dim);
// The same tiles built with AVX-VNNI (kernels_avxvnni.cc) and on its
// emulation (kernels_avxvnni_emu.cc); the AvxVnni level runs the AVX2 tiles.
const AttnTiles* avxvnni_attn_tiles(int head_dim);
const AttnTiles* avxvnni_emulated_attn_tiles(int head_dim);
// Tests: take the tiles from `provider` whatever the CPU level (nullptr: by level).
void force_attn_tiles(const AttnTiles* (*provider)(int head_dim));

// Multi-token form (paged_attention.h); only call when the CPU runs AVX2.
// Returns false (and does nothing) for a head_dim it has no kernel for.
// `tiles`: its register tiles (nullptr: the AVX2 ones).
bool paged_attention_tokens_avx2(const PagedAttentionArgs& a, int group,
                                 const PagedAttentionTokens& t, float* scratch,
                                 const AttnTiles* tiles = nullptr);
// attention_merge() for one query, likewise (false: no kernel for head_dim).
bool attention_merge_avx2(int head_dim, const AttentionState* parts, int n_seg, int64_t qi, float* out,
                          const float* sink);


}  // namespace pc
