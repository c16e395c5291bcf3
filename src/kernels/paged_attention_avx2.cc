// AVX2 + FMA + F16C attention path: the arithmetic of paged_attention.cc (the
// query's F16 rounding done by vcvtps2ph). Only this file is compiled for AVX2 (the
// target pragma after the includes), so the rest of the binary stays portable;
// paged_attention() / paged_attention_tokens() select it at run time.
//
// One kernel, tokens_kernel<NV> (NV = head_dim / 8), for up to kAttnMaxTokens
// tokens × group query heads of one KV head (a single token too:
// paged_attention() calls it with one), in chunks of up to 8 blocks of
// visible slots, read straight from the pages (F16, converted as loaded; the
// quantized types' K levels prepared per chunk into scratch as int16 pairs in
// the F16 pages' block layout, V rows dequantized into scratch and the F16
// update tiles run on F32):
// scores in register tiles of up to 3 queries × 4 blocks (AVX-512's: 6 × 8
// on F16 pages), on the pages' K (dimension-major per block of 8 slots, k_layout.h:
// a lane per slot, each K load serves the tile's queries; each pair's dot is
// one FMA chain over head_dim in order, so no horizontal sums; quantized K:
// the integer dot of the quantized query per quantization block, vpmaddwd on
// a pair of dimensions at a time, then one FMA per block); the softmax steps
// 8 (AVX-512: 16) queries at a time with a lane per query (fixed_exp8: the
// operations of fixed_exp); the accumulators in tiles of 3 (AVX-512: 6)
// queries × 4 vectors (each V load serves them all); at each
// softmax segment's end the queries' states merged into their merged states
// (or, for the split form, one segment's blocks only). A query's operations
// and their order are exactly those of paged_attention.cc, so the grouping
// never changes a bit.
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "kernels/paged_attention_internal.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "kernels/avx2_target_begin.inc"

#include "kernels/attn_tile_loops.h"
#include "kernels/kv_block_levels.h"
#include "kernels/transpose8_avx2.h"

namespace pc {

namespace {

#define PC_UNROLL _Pragma("GCC unroll 16")

inline __m256 load_f16(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
// 8 values the tiles read: F16 from a page, or F32 dequantized.
inline __m256 load8(const uint16_t* p) { return load_f16(p); }
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }

inline __m256 round_f16(__m256 v) {
  return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

template <class E>
constexpr bool E_is_float = std::is_same_v<E, float>;

constexpr int kChunkBlocks = kAttnChunkBlocks;  // blocks of 8 slots per chunk
constexpr int kChunkSlots = kAttnChunkSlots;

// Scores of QT queries × the chunk's KB blocks (8 slots each, a lane per
// slot): the dot of paged_attention.cc per pair, one FMA chain over head_dim
// in order, on the blocks' keys kb[b] ([head_dim][8] F16); each K load serves
// QT queries, each broadcast query element KB blocks. Times scale.
// (Not inlined: inlined into a loop, GCC turns each load address into an
// induction variable of its own and spills them.)
template <int NV, int QT, int KB, class E>
__attribute__((noinline)) void score_tile(const float* const* qv, const E* const* kb, float scale, float* const* sc,
                                          AttnPrefetch* pf) {
  AttnPrefetchCursor pfc(pf);
  constexpr int hd = 8 * NV;
  __m256 s[QT][KB];
  PC_UNROLL for (int i = 0; i < QT; ++i) PC_UNROLL for (int b = 0; b < KB; ++b) s[i][b] = _mm256_setzero_ps();
  const float* q[QT];
  const E* k16[KB];
  PC_UNROLL for (int i = 0; i < QT; ++i) q[i] = qv[i];
  PC_UNROLL for (int b = 0; b < KB; ++b) k16[b] = kb[b];
  auto dim = [&](int d) __attribute__((always_inline)) {
    __m256 qb[QT];
    PC_UNROLL for (int i = 0; i < QT; ++i) qb[i] = _mm256_broadcast_ss(q[i] + d);
    PC_UNROLL for (int b = 0; b < KB; ++b) {
      const __m256 k = load8(k16[b] + 8 * d);
      PC_UNROLL for (int i = 0; i < QT; ++i) s[i][b] = _mm256_fmadd_ps(qb[i], k, s[i][b]);
    }
  };
  attn_dims<2>(pfc, hd, dim);
  const __m256 sv = _mm256_set1_ps(scale);
  PC_UNROLL for (int i = 0; i < QT; ++i) PC_UNROLL for (int b = 0; b < KB; ++b) _mm256_storeu_ps(sc[i] + 8 * b, _mm256_mul_ps(s[i][b], sv));
}

// The values the update tiles read for slot u of a block, dimensions from
// 8 v0, 8 at a time (load(j): dimensions 8 (v0 + j) ..): F16 from a page or
// F32 dequantized (VT = kF16; E uint16_t or float, vb the block's rows
// [8][head_dim]), or a quantized row read straight from the page and
// dequantized as loaded (VT = kQ8_0 / kQ4_0, E = uint8_t, vb the block's first
// row; head_dim a multiple of 32 and v0 a multiple of 4, so the vectors are
// those of quantization block v0 / 4): bitwise dequant_rows()'s values.
template <int NV, class E, KvType VT>
struct VSlot {
  static constexpr size_t kBlockBytes = VT == KvType::kQ8_0 ? 34 : 18;
  const E* p;
  __m256 d;
  VSlot(const E* vb, int u, int v0) {
    if constexpr (VT == KvType::kF16) {
      p = vb + u * 8 * NV + 8 * v0;
      d = _mm256_setzero_ps();
    } else {
      p = vb + size_t(u) * (NV / 4) * kBlockBytes + size_t(v0 / 4) * kBlockBytes;
      uint16_t h;
      std::memcpy(&h, p, 2);
      d = _mm256_set1_ps(_cvtsh_ss(h));
    }
  }
  __m256 load(int j) const {
    if constexpr (VT == KvType::kF16) {
      return load8(p + 8 * j);
    } else if constexpr (VT == KvType::kQ8_0) {
      const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 2 + 8 * j));
      return _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)));
    } else {  // q4_0: values 0-15 the low nibbles of the 16 bytes, 16-31 the high ones
      const __m128i qs = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 2 + 8 * (j & 1)));
      const __m128i mask = _mm_set1_epi8(15);
      const __m128i nib = j < 2 ? _mm_and_si128(qs, mask) : _mm_and_si128(_mm_srli_epi16(qs, 4), mask);
      return _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_sub_epi8(nib, _mm_set1_epi8(8)))));
    }
  }
};

// Accumulator update of QT queries that see every slot of the chunk, for the
// DV vectors [v0, v0 + DV) of head_dim: per block, the rescale (when a query's
// maximum grew), then acc = fma(V[t], p_t, acc) slot by slot; each V vector
// loaded once for the QT queries (vb[b]: block b's values, VSlot).
template <int NV, int QT, int DV, class E, KvType VT = KvType::kF16>
__attribute__((noinline)) void update_tile(float* const* acc, const float* const* p, const float* const* c,
                                           const E* const* vb, const int* blk_len, int n_blk, int v0,
                                           AttnPrefetch* pf) {
  AttnPrefetchCursor pfc(pf);
  [[maybe_unused]] constexpr int hd = 8 * NV;
  __m256 a[QT][DV];
  PC_UNROLL for (int i = 0; i < QT; ++i) PC_UNROLL for (int j = 0; j < DV; ++j) a[i][j] = _mm256_loadu_ps(acc[i] + 8 * (v0 + j));
  const bool rescale = attn_chunk_rescales<QT>(c, n_blk);
  for (int b = 0; b < n_blk; ++b) {
    if (rescale) {
      PC_UNROLL for (int i = 0; i < QT; ++i) {
        const __m256 ci = _mm256_broadcast_ss(c[i] + b);
        PC_UNROLL for (int j = 0; j < DV; ++j) a[i][j] = _mm256_mul_ps(a[i][j], ci);
      }
    }
    auto slot = [&](int u) __attribute__((always_inline)) {
      const int t = 8 * b + u;
      __m256 pv[QT];
      PC_UNROLL for (int i = 0; i < QT; ++i) pv[i] = _mm256_broadcast_ss(p[i] + t);
      const VSlot<NV, E, VT> vt(vb[b], u, v0);
      PC_UNROLL for (int j = 0; j < DV; ++j) {
        const __m256 vv = vt.load(j);
        PC_UNROLL for (int i = 0; i < QT; ++i) a[i][j] = _mm256_fmadd_ps(vv, pv[i], a[i][j]);
      }
    };
    attn_block_slots(pfc, blk_len[b], slot);
  }
  PC_UNROLL for (int i = 0; i < QT; ++i) PC_UNROLL for (int j = 0; j < DV; ++j) _mm256_storeu_ps(acc[i] + 8 * (v0 + j), a[i][j]);
}

// Softmax steps of 8 queries that see every slot of the chunk, a lane per
// query (the scores of a block transposed to a vector per slot): per block the
// maximum, c = exp(M - m) where it grew (else 1), S = S * c, the exps
// p_t = exp(s_t - M) and S = S + p_t slot by slot — each lane exactly the
// operations of the one-query path.
__attribute__((noinline)) void softmax_x8(const int* qs, float* sc, float* cf, float* M, float* S,
                                          const int* blk_len, int n_blk) {
  alignas(32) float mv[8], sv[8], cv[8];
  PC_UNROLL for (int i = 0; i < 8; ++i) {
    mv[i] = M[qs[i]];
    sv[i] = S[qs[i]];
  }
  __m256 m = _mm256_load_ps(mv), sum = _mm256_load_ps(sv);
  const __m256 one = _mm256_set1_ps(1.f);
  for (int b = 0; b < n_blk; ++b) {
    __m256 rows[8], s[8];
    PC_UNROLL for (int i = 0; i < 8; ++i) rows[i] = _mm256_loadu_ps(sc + qs[i] * kChunkSlots + 8 * b);
    transpose8_ps(rows, s);
    const int nb = blk_len[b];
    __m256 bm = s[0];
    for (int u = 1; u < nb; ++u) bm = _mm256_max_ps(bm, s[u]);  // exact: any order
    const __m256 grew = _mm256_cmp_ps(bm, m, _CMP_GT_OQ);
    const __m256 c = _mm256_blendv_ps(one, fixed_exp8(_mm256_sub_ps(m, bm)), grew);
    sum = _mm256_mul_ps(sum, c);
    m = _mm256_blendv_ps(m, bm, grew);
    __m256 p[8];
    PC_UNROLL for (int u = 0; u < 8; ++u) p[u] = fixed_exp8(_mm256_sub_ps(s[u], m));
    for (int u = 0; u < nb; ++u) sum = _mm256_add_ps(sum, p[u]);
    transpose8_ps(p, rows);
    PC_UNROLL for (int i = 0; i < 8; ++i) _mm256_storeu_ps(sc + qs[i] * kChunkSlots + 8 * b, rows[i]);
    _mm256_store_ps(cv, c);
    PC_UNROLL for (int i = 0; i < 8; ++i) cf[qs[i] * kChunkBlocks + b] = cv[i];
  }
  _mm256_store_ps(mv, m);
  _mm256_store_ps(sv, sum);
  PC_UNROLL for (int i = 0; i < 8; ++i) {
    M[qs[i]] = mv[i];
    S[qs[i]] = sv[i];
  }
}

// merge_attention_state() (paged_attention_internal.h) of one query, the
// accumulators NV vectors at a time: the same operations.
template <int NV>
inline void merge_state(float* mm, float* sm, float* accm, float mk, float sk, const float* acck) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  if (mk == kNegInf) return;
  if (*mm == kNegInf) {
    *mm = mk;
    *sm = sk;
    PC_UNROLL for (int v = 0; v < NV; ++v) _mm256_storeu_ps(accm + 8 * v, _mm256_loadu_ps(acck + 8 * v));
    return;
  }
  const float m = mk > *mm ? mk : *mm;
  // (both exps in one fixed_exp8: the scalar fixed_exp, compiled outside this
  // file's target, would call libm for every fma)
  alignas(32) float e[8];
  _mm256_store_ps(e, fixed_exp8(_mm256_setr_ps(*mm - m, mk - m, 0, 0, 0, 0, 0, 0)));
  const float cm = e[0], ck = e[1];
  *sm = *sm * cm + sk * ck;
  const __m256 cmv = _mm256_set1_ps(cm), ckv = _mm256_set1_ps(ck);
  PC_UNROLL for (int v = 0; v < NV; ++v)
    _mm256_storeu_ps(accm + 8 * v, _mm256_fmadd_ps(_mm256_loadu_ps(acck + 8 * v), ckv,
                                                   _mm256_mul_ps(_mm256_loadu_ps(accm + 8 * v), cmv)));
  *mm = m;
}

// n rows of a quantized type (rows rb bytes apart) dequantized to out [n][hd]:
// bitwise kv_dequantize_row() (d * q is exact in F32 either way).
void dequant_rows(KvType t, const uint8_t* rows, size_t rb, int n, int hd, float* out) {
  if (hd % 32 != 0) {  // one block a row (heads of 8 or 16): the reference
    for (int u = 0; u < n; ++u) kv_dequantize_row(t, rows + u * rb, hd, out + size_t(u) * hd);
    return;
  }
  const int nb = hd / 32;
  for (int u = 0; u < n; ++u) {
    const uint8_t* r = rows + u * rb;
    float* o = out + size_t(u) * hd;
    if (t == KvType::kQ8_0) {
      for (int b = 0; b < nb; ++b, r += 34, o += 32) {
        const __m256 d = _mm256_set1_ps(_cvtsh_ss(*reinterpret_cast<const uint16_t*>(r)));
        const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r + 2));
        const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
        _mm256_storeu_ps(o, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo))));
        _mm256_storeu_ps(o + 8, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8)))));
        _mm256_storeu_ps(o + 16, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi))));
        _mm256_storeu_ps(o + 24, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8)))));
      }
    } else {  // q4_0: values 0-15 the low nibbles, 16-31 the high ones
      const __m128i mask = _mm_set1_epi8(15), eight = _mm_set1_epi8(8);
      for (int b = 0; b < nb; ++b, r += 18, o += 32) {
        const __m256 d = _mm256_set1_ps(_cvtsh_ss(*reinterpret_cast<const uint16_t*>(r)));
        const __m128i qs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r + 2));
        const __m128i lo = _mm_sub_epi8(_mm_and_si128(qs, mask), eight);
        const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(qs, 4), mask), eight);
        _mm256_storeu_ps(o, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo))));
        _mm256_storeu_ps(o + 8, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8)))));
        _mm256_storeu_ps(o + 16, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi))));
        _mm256_storeu_ps(o + 24, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8)))));
      }
    }
  }
}

// n <= 8 rows of quantized K (rows rb bytes apart) into an AttnKeysQ block
// (paged_attention_internal.h): pairs [hd/2][8] int16 level pairs, d [hd/B][8]
// scales, slots u >= n zero. With hd a multiple of 32, per quantization block
// the rows' int8 levels transposed as bytes (kv_block_levels.h), each two
// dimensions' bytes interleaved per row and widened to int16; heads of 8 or 16
// (one block a row) through kv_row_levels().
template <KvType Q>
void prepare_keys_q(const uint8_t* rows, size_t rb, int n, int hd, int32_t* pairs, float* d) {
  if (hd % 32 != 0) {
    int8_t lv[16] = {};
    float sc = 0.f;
    for (int u = 0; u < 8; ++u) {
      if (u < n) kv_row_levels(Q, rows + u * rb, hd, lv, &sc);
      for (int p = 0; p < hd / 2; ++p)
        pairs[p * 8 + u] = u < n ? int32_t(uint32_t(uint16_t(int16_t(lv[2 * p]))) |
                                           uint32_t(uint16_t(int16_t(lv[2 * p + 1]))) << 16)
                                 : 0;
      d[u] = u < n ? sc : 0.f;
    }
    return;
  }
  for (int qb = 0; qb < hd / 32; ++qb) {
    __m256i x[8];
    _mm256_storeu_ps(d + 8 * qb, kvq_block_levels<Q>(rows, rb, n, qb, x));
    int32_t* o = pairs + qb * 16 * 8;  // the block's 16 pairs of dimensions
    kvq_transpose_levels(x, [&](int D, __m256i c) {
      // c, per 128-bit lane: 8 rows' bytes of one dimension, then of the next;
      // interleaved: row u's two bytes at 2u, 2u + 1 (lane 0: dimensions D,
      // D + 1, pair D / 2; lane 1: 16 + D, 17 + D, pair 8 + D / 2)
      const __m256i t = _mm256_unpacklo_epi8(c, _mm256_srli_si256(c, 8));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 8 * (D / 2)), _mm256_cvtepi8_epi16(_mm256_castsi256_si128(t)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 8 * (8 + D / 2)),
                          _mm256_cvtepi8_epi16(_mm256_extracti128_si256(t, 1)));
    });
  }
}

void prepare_keys_q(KvType t, const uint8_t* rows, size_t rb, int n, int hd, int32_t* pairs, float* d) {
  if (t == KvType::kQ8_0) prepare_keys_q<KvType::kQ8_0>(rows, rb, n, hd, pairs, d);
  else prepare_keys_q<KvType::kQ4_0>(rows, rb, n, hd, pairs, d);
}

// Scores of QT quantized queries × KB prepared blocks of quantized K (a lane
// per slot), as paged_attention.cc states: per quantization block the integer
// dot of the int16 query levels with K's levels (vpmaddwd, exact in int32),
// then r = fma(float(dot), d_k * d_q, r) block by block; times scale.
template <int NV, int QT, int KB>
__attribute__((noinline)) void qscore_tile(const AttnQueryQ* qv, const AttnKeysQ* kb, float scale, float* const* sc,
                                           AttnPrefetch* pf) {
  AttnPrefetchCursor pfc(pf);
  constexpr int hd = 8 * NV, B = hd % 32 == 0 ? 32 : hd, NB = hd / B, PB = B / 2;
  const __m256 sv = _mm256_set1_ps(scale);
  PC_UNROLL for (int b = 0; b < KB; ++b) {
    __m256 r[QT];
    PC_UNROLL for (int i = 0; i < QT; ++i) r[i] = _mm256_setzero_ps();
    for (int qb = 0; qb < NB; ++qb) {
      __m256i s[QT];
      PC_UNROLL for (int i = 0; i < QT; ++i) s[i] = _mm256_setzero_si256();
      const int32_t* kp = kb[b].pairs + qb * PB * 8;
      PC_UNROLL for (int p = 0; p < PB; ++p) {
        if (p % 4 == 0) {
          pfc.step();
          pfc.skip(1);
        }
        const __m256i k = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kp + 8 * p));
        PC_UNROLL for (int i = 0; i < QT; ++i)
          s[i] = _mm256_add_epi32(s[i], _mm256_madd_epi16(k, _mm256_set1_epi32(qv[i].pairs[qb * PB + p])));
      }
      const __m256 kd = _mm256_loadu_ps(kb[b].d + 8 * qb);
      PC_UNROLL for (int i = 0; i < QT; ++i)
        r[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[i]), _mm256_mul_ps(kd, _mm256_set1_ps(qv[i].d[qb])), r[i]);
    }
    PC_UNROLL for (int i = 0; i < QT; ++i) _mm256_storeu_ps(sc[i] + 8 * b, _mm256_mul_ps(r[i], sv));
  }
}

// dequant_rows() for head_dim a multiple of 32 (the AttnTileSet signature).
void dequant_v_avx2(KvType t, const uint8_t* rows, size_t rb, int n, int hd, float* out) {
  dequant_rows(t, rows, rb, n, hd, out);
}

// NV = head_dim / 8 vectors per head. The visible slots are taken in chunks of
// up to kChunkBlocks blocks (a block: up to 8 slots of one page, as
// paged_attention.cc defines them; a chunk may span pages). Per chunk:
//   1. the blocks' K and V addresses in the pages (a block shorter than 8
//      slots: its keys copied, zero-padded to 8, so no lane reads past it);
//      with a quantized type (E = float), the block's rows into scratch
//      instead: V dequantized as rows [8][hd], K's levels as int16 pairs
//      [hd/2][8] and its scales (prepare_keys_q; lanes past the block zero);
//   2. scores of every query that sees part of the chunk, in tiles of qt
//      queries × kb blocks (register blocking: each K load serves qt queries;
//      qt = 3 and kb = 4 on AVX2, 6 and 8 with AVX-512's 32 registers on F16
//      pages, 4 and 4 on quantized ones);
//   3. per query and visible block, in order: the block maximum, the rescale
//      factor c (1 when the maximum did not grow; multiplying by 1 is exact),
//      the exps p (in place of the scores), S = S * c, S = S + p_t;
//      With a soft-cap, the scores of those queries capped in place (8 lanes
//      at a time, fixed_tanh8: the operations of fixed_tanh);
//   4. the accumulators: queries that see the whole chunk in tiles of uqt
//      queries × dv vectors (each V load serves uqt queries; a decode token on
//      quantized pages: tiles of vqt that read the rows themselves); the others (the
//      causal diagonal, the edge of a sliding window) one at a time over their
//      visible slots (window_bits), skipping blocks they see none of.
// A chunk never spans two softmax segments; at each segment's end every
// query's state (M, S, acc) is merged into its merged state (Mm, Sm, accm)
// and restarted.
// Every query's operations and their order are those of paged_attention.cc.
template <int NV, class E>
void tokens_kernel(const PagedAttentionArgs& a, int group, const PagedAttentionTokens& tk,
                   float* scratch, const AttnTileSet<E>& tiles) {
  constexpr int hd = 8 * NV;
  constexpr int DV = attn_update_vectors(NV);
  constexpr int QT = kAttnMaxQT;  // (arrays; tiles take up to qt queries)
  const int qt = tiles.qt;
  // The queries of the next tile when `left` remain: the fewest tiles of at
  // most qt, as even as they go (a group of 4 heads: 2 + 2, whose tiles
  // keep 8 accumulator chains each, not 3 + 1, whose one-query tile waits
  // on its 4 chains and converts every K and V vector again for one query).
  auto tiles_of = [](int left, int most) {
    const int n_tiles = (left + most - 1) / most;
    return (left + n_tiles - 1) / n_tiles;
  };
  auto tile_queries = [&](int left) { return tiles_of(left, qt); };
  const int uqt = tiles.uqt;  // an update tile's queries
  const int dv = tiles.dv > 0 ? tiles.dv : DV;
  const int nq = tk.n_tok * group;
  float* q16 = scratch;                          // [nq][hd] query rounded to F16 (F16 K), or
                                                 // quantized: [nq][hd/2] level pairs or lohi
                                                 // (AttnTileSet::byte_query), then [nq][NB] scales
                                                 // and [nq][NB] corrections
  float* acc = q16 + size_t(nq) * hd;            // [nq][hd] this segment
  float* accm = acc + size_t(nq) * hd;           // [nq][hd] the segments before, merged
  float* M = accm + size_t(nq) * hd;             // [nq]
  float* S = M + nq;                             // [nq]
  float* Mm = S + nq;                            // [nq]
  float* Sm = Mm + nq;                           // [nq]
  auto* kpad = reinterpret_cast<uint16_t*>(Sm + nq);  // [kChunkBlocks][hd][8] short blocks' K
  float* sc = Sm + nq + size_t(kChunkSlots) * hd / 2;  // [nq][kChunkSlots] scores, then exps
  float* cf = sc + size_t(nq) * kChunkSlots;     // [nq][kChunkBlocks] rescale factors
  int* ctx = reinterpret_cast<int*>(cf + size_t(nq) * kChunkBlocks);  // [nq]
  int* live = ctx + nq;                          // [nq] queries that see any of the chunk, then those that see all of it
  int* part = live + nq;                         // [nq] queries that see only part of it
  float* kdq = reinterpret_cast<float*>(part + nq) + 8;  // quantized K (E = float), prepared:
  auto* kqp = reinterpret_cast<int32_t*>(kdq);   //   [kChunkBlocks][hd/2][8] level pairs
  float* kqd = kdq + size_t(kChunkSlots) * hd / 2;  //   [kChunkBlocks][NB][8] scales
  float* vdq = kdq + size_t(kChunkSlots) * hd;   // [kChunkBlocks][8][hd] dequantized V
  constexpr int NB = hd % 32 == 0 ? hd / 32 : 1;  // quantization blocks a row
  [[maybe_unused]] const size_t rb = E_is_float<E> ? kv_row_bytes(a.kv_type, hd) : 0;
  [[maybe_unused]] auto* qqp = reinterpret_cast<int32_t*>(q16);  // quantized queries' level pairs
  [[maybe_unused]] auto* qql = qqp;                                // or their lo / hi bytes
  [[maybe_unused]] float* qqd = q16 + size_t(nq) * hd / 2;        // [nq][NB] scales
  [[maybe_unused]] auto* qqc = reinterpret_cast<int32_t*>(qqd + nq * NB);  // [nq][NB] corrections
  [[maybe_unused]] AttnKeysQ kq[kChunkBlocks];
  int n_max = 0;
  for (int qi = 0; qi < nq; ++qi) {
    ctx[qi] = tk.n_ctx[qi / group];
    n_max = ctx[qi] > n_max ? ctx[qi] : n_max;
    const float* src = tk.q + (qi / group) * tk.q_stride + (qi % group) * hd;
    if constexpr (E_is_float<E>) {  // quantized K: the query quantized (quantize_query)
      int16_t lv[hd];
      quantize_query(src, hd, hd / NB, lv, qqd + qi * NB);
      if (!tiles.byte_query)
        for (int p = 0; p < hd / 2; ++p)
          qqp[qi * (hd / 2) + p] = int32_t(uint32_t(uint16_t(lv[2 * p])) | uint32_t(uint16_t(lv[2 * p + 1])) << 16);
      else for (int g = 0; g < hd / 4; ++g) {  // q = 256 hi + lo (AttnQueryQ)
        uint32_t lo = 0, hi = 0;
        for (int e = 0; e < 4; ++e) {
          const int l = lv[4 * g + e], h = (l + 128) >> 8;
          lo |= uint32_t(uint8_t(int8_t(l - 256 * h))) << (8 * e);
          hi |= uint32_t(uint8_t(int8_t(h))) << (8 * e);
        }
        qql[qi * (hd / 2) + 2 * g] = int32_t(lo);
        qql[qi * (hd / 2) + 2 * g + 1] = int32_t(hi);
      }
      for (int b = 0; b < NB; ++b) {
        int32_t sum = 0;
        for (int j = 0; j < hd / NB; ++j) sum += lv[b * (hd / NB) + j];
        qqc[qi * NB + b] = 128 * sum;
      }
    }
    PC_UNROLL for (int v = 0; v < NV; ++v) {
      if constexpr (!E_is_float<E>) _mm256_storeu_ps(q16 + qi * hd + 8 * v, round_f16(_mm256_loadu_ps(src + 8 * v)));
      _mm256_storeu_ps(acc + qi * hd + 8 * v, _mm256_setzero_ps());
      _mm256_storeu_ps(accm + qi * hd + 8 * v, _mm256_setzero_ps());
    }
    M[qi] = Mm[qi] = -std::numeric_limits<float>::infinity();
    S[qi] = Sm[qi] = 0.f;
  }
  const float neg_inf = -std::numeric_limits<float>::infinity();

  int blk_pos[kChunkBlocks], blk_len[kChunkBlocks], n_blk = 0;
  [[maybe_unused]] const E* kblk[kChunkBlocks];
  const E* vblk[kChunkBlocks];
  const int32_t* kpos[kChunkBlocks];
  const bool windowed = a.window > 0;
  // Quantized V read straight from the pages by the update tiles (vupdate):
  // one token without a window sees every slot of every chunk it is given,
  // so every query takes step 4a, in tiles of at most vqt queries; with at
  // most vtiles of them (each converting the rows it reads) the copy is saved.
  [[maybe_unused]] const AttnTileSet<float>::QUpdateFn* vupd =
      E_is_float<E> && tk.n_tok == 1 && !windowed && nq <= tiles.vtiles * tiles.vqt && hd % 32 == 0
          ? tiles.vupdate[a.kv_type == KvType::kQ8_0 ? 0 : 1]
          : nullptr;
  [[maybe_unused]] const uint8_t* vrow[kChunkBlocks];
  // Prefetching (AttnPrefetch) for a decode step's few tokens (a prompt's
  // chunk of tokens uses each line for many queries, its arithmetic is the
  // bound): the lines of the page kAttnPrefetchSlots slots ahead, queued as
  // the walk reaches each page the window lets the call's earliest query see;
  // a split call goes on into the next KV head's pages, and the last KV
  // head's call of a task over all heads into head 0's pages of the next
  // segment. per_step follows the tiles: after each chunk, 2 when it queued
  // more lines than its tiles took steps, else 1, so that the queue drains
  // within about one chunk's arithmetic (a chunk queues 4 lines a head
  // dimension, its tiles take at least 3 steps a dimension with AVX2's score
  // steps of two dimensions, 2 with AVX-512's of one).
  AttnPrefetch pf;
  AttnPrefetchWalk walk;
  const bool stream = tk.n_tok <= 4 && attn_prefetch();
  int q_pos_min = 0;  // (for the window)
  if (windowed) {
    q_pos_min = tk.q_pos[0];
    for (int i = 1; i < tk.n_tok; ++i) q_pos_min = tk.q_pos[i] < q_pos_min ? tk.q_pos[i] : q_pos_min;
  }
  if (stream) pf.per_step = 2;
  auto qpos = [&](int qi) { return int64_t(tk.q_pos[qi / group]); };
  // The visible slots of block b for query qi (window_bits); 0: none, -1: none
  // of this block or the chunk's later ones (causally).
  auto visible = [&](int qi, int b) -> int {
    const int vis = ctx[qi] - blk_pos[b];
    if (vis <= 0) return -1;
    return int(window_bits(a, kpos[b], vis < blk_len[b] ? vis : blk_len[b], windowed ? int(qpos(qi)) : 0));
  };
  auto run_chunk = [&] {
    const int first = blk_pos[0], end = blk_pos[n_blk - 1] + blk_len[n_blk - 1];
    // The chunk's smallest and largest key positions: a query sees all its keys
    // through the window when q_pos - lo_pos < window, none when q_pos - hi_pos >= window.
    int64_t lo_pos = 0, hi_pos = 0;
    if (windowed) {
      lo_pos = std::numeric_limits<int64_t>::max();
      hi_pos = std::numeric_limits<int64_t>::min();
      for (int b = 0; b < n_blk; ++b)
        for (int u = 0; u < blk_len[b]; ++u) {
          lo_pos = kpos[b][u] < lo_pos ? kpos[b][u] : lo_pos;
          hi_pos = kpos[b][u] > hi_pos ? kpos[b][u] : hi_pos;
        }
    }
    // 2. scores of the queries that may see any of it
    int n_live = 0, n_full = 0, n_part = 0;
    for (int qi = 0; qi < nq; ++qi)
      if (ctx[qi] > first && (!windowed || qpos(qi) - hi_pos < a.window)) live[n_live++] = qi;
    for (int l = 0, n_here; l < n_live; l += n_here) {
      const float* qv[QT];
      float* row[QT];
      n_here = tile_queries(n_live - l);
      [[maybe_unused]] AttnQueryQ qq[QT];
      PC_UNROLL for (int i = 0; i < QT; ++i) {
        const int qi = live[l + (i < n_here ? i : 0)];
        qv[i] = q16 + qi * hd;
        row[i] = sc + qi * kChunkSlots;
        if constexpr (E_is_float<E>) qq[i] = {qqp + qi * (hd / 2), qqd + qi * NB, qql + qi * (hd / 2), qqc + qi * NB};
      }
      for (int b0 = 0; b0 < n_blk; b0 += tiles.kb) {
        const int nb = n_blk - b0 < tiles.kb ? n_blk - b0 : tiles.kb;
        float* rb[QT];
        PC_UNROLL for (int i = 0; i < QT; ++i) rb[i] = row[i] + 8 * b0;
        if constexpr (E_is_float<E>) tiles.qscore[n_here - 1][nb - 1](qq, kq + b0, a.scale, rb, &pf);
        else tiles.score[n_here - 1][nb - 1](qv, kblk + b0, a.scale, rb, &pf);
      }
    }
    if (a.softcap > 0) {
      const __m256 cap = _mm256_set1_ps(a.softcap), inv = _mm256_set1_ps(1.f / a.softcap);
      for (int l = 0; l < n_live; ++l) {
        float* row = sc + live[l] * kChunkSlots;
        for (int b = 0; b < n_blk; ++b)
          _mm256_storeu_ps(row + 8 * b, _mm256_mul_ps(cap, fixed_tanh8(_mm256_mul_ps(_mm256_loadu_ps(row + 8 * b), inv))));
      }
    }
    // 3. softmax steps: the queries that see the whole chunk (live[0, n_full))
    // sixteen (tiles.softmax16) or eight (tiles.softmax8) at a time with a lane per query,
    // the rest of them with their slots in the lanes (tiles.softmax_rows),
    // the others one at a time.
    for (int l = 0; l < n_live; ++l) {
      const int qi = live[l];
      if (ctx[qi] >= end && (!windowed || qpos(qi) - lo_pos < a.window))
        live[n_full++] = qi;  // (n_full <= l: entries already read)
      else part[n_part++] = qi;
    }
    int l8 = 0;
    if (tiles.softmax16)
      for (; l8 + 16 <= n_full; l8 += 16) tiles.softmax16(live + l8, sc, cf, M, S, blk_len, n_blk);
    for (; l8 + 8 <= n_full; l8 += 8) (tiles.softmax8 ? tiles.softmax8 : softmax_x8)(live + l8, sc, cf, M, S, blk_len, n_blk);
    if (l8 < n_full && tiles.softmax_rows) {  // the last 1-7 (a decode token's group)
      tiles.softmax_rows(live + l8, n_full - l8, sc, cf, M, S, blk_len, n_blk);
      l8 = n_full;
    }
    // The queries that see only part of the chunk (the causal diagonal) see
    // its first full_blocks() blocks whole (without a window): runs of them
    // with the same count take those blocks through the tiles, then the
    // rest one at a time from there (the same operations, in order).
    auto full_blocks = [&](int qi) {
      int k = 0;
      if (!windowed)
        while (k < n_blk && blk_pos[k] + blk_len[k] <= ctx[qi]) ++k;
      return k;
    };
    // Runs of part[] with the same full_blocks() > 0: f(first, count, blocks).
    auto part_runs = [&](int max_run, auto&& f) {
      for (int r0 = 0; r0 < n_part;) {
        const int k = full_blocks(part[r0]);
        int r1 = r0 + 1;
        while (r1 < n_part && r1 - r0 < max_run && full_blocks(part[r1]) == k) ++r1;
        if (k > 0) f(r0, r1 - r0, k);
        r0 = r1;
      }
    };
    if (tiles.softmax_rows)
      part_runs(n_part, [&](int r0, int n, int k) { tiles.softmax_rows(part + r0, n, sc, cf, M, S, blk_len, k); });
    for (int r = 0; r < (n_full - l8) + n_part; ++r) {
      const int qi = r < n_full - l8 ? live[l8 + r] : part[r - (n_full - l8)];
      float* s = sc + qi * kChunkSlots;
      float* c = cf + qi * kChunkBlocks;
      float m = M[qi], sum = S[qi];
      for (int b = r < n_full - l8 || !tiles.softmax_rows ? 0 : full_blocks(qi); b < n_blk; ++b) {
        const int bits = visible(qi, b);
        c[b] = 1.f;
        if (bits < 0) break;
        if (bits == 0) continue;
        const __m256i lane = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
        const __m256 livem = _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(bits), lane), lane));
        const __m256 sv = _mm256_loadu_ps(s + 8 * b);
        __m256 mx = _mm256_blendv_ps(_mm256_set1_ps(neg_inf), sv, livem);
        mx = _mm256_max_ps(mx, _mm256_permute2f128_ps(mx, mx, 1));
        mx = _mm256_max_ps(mx, _mm256_shuffle_ps(mx, mx, _MM_SHUFFLE(1, 0, 3, 2)));
        mx = _mm256_max_ps(mx, _mm256_shuffle_ps(mx, mx, _MM_SHUFFLE(2, 3, 0, 1)));
        const float bm = _mm256_cvtss_f32(mx);  // max is exact: any order
        if (bm > m) {
          c[b] = _mm256_cvtss_f32(fixed_exp8(_mm256_set1_ps(m - bm)));
          sum = sum * c[b];
          m = bm;
        }
        const __m256 e = fixed_exp8(_mm256_sub_ps(sv, _mm256_set1_ps(m)));
        _mm256_storeu_ps(s + 8 * b, e);
        for (int u = 0; u < blk_len[b]; ++u)
          if (bits >> u & 1) sum = sum + s[8 * b + u];
      }
      M[qi] = m;
      S[qi] = sum;
    }
    // An update tile's pointers for queries qs[0, n) (its unused lanes
    // repeat the first): accumulators, probabilities, block corrections.
    auto tile_rows = [&](const int* qs, int n, float** ap, const float** pp, const float** cp) {
      PC_UNROLL for (int i = 0; i < QT; ++i) {
        const int qi = qs[i < n ? i : 0];
        ap[i] = acc + qi * hd;
        pp[i] = sc + qi * kChunkSlots;
        cp[i] = cf + qi * kChunkBlocks;
      }
    };
    // 4a. accumulators of the queries that see the whole chunk
    for (int l = 0, n_here; l < n_full; l += n_here) {
      n_here = tiles_of(n_full - l, vupd ? tiles.vqt : uqt);
      float* ap[QT];
      const float* pp[QT];
      const float* cp[QT];
      tile_rows(live + l, n_here, ap, pp, cp);
      if constexpr (E_is_float<E>) {
        if (vupd) {
          for (int v0 = 0; v0 < NV; v0 += tiles.vdv) vupd[n_here - 1](ap, pp, cp, vrow, blk_len, n_blk, v0, &pf);
          continue;
        }
      }
      for (int v0 = 0; v0 < NV; v0 += dv) tiles.update[n_here - 1](ap, pp, cp, vblk, blk_len, n_blk, v0, &pf);
    }
    // 4b. the others: the blocks they see whole in tiles, then each over
    // its visible slots
    part_runs(uqt, [&](int r0, int n, int k) {
      float* ap[QT];
      const float* pp[QT];
      const float* cp[QT];
      tile_rows(part + r0, n, ap, pp, cp);
      for (int v0 = 0; v0 < NV; v0 += dv) tiles.update[n - 1](ap, pp, cp, vblk, blk_len, k, v0, &pf);
    });
    for (int r = 0; r < n_part; ++r) {
      const int qi = part[r];
      const float* p = sc + qi * kChunkSlots;
      const float* c = cf + qi * kChunkBlocks;
      __m256 ac[NV];
      PC_UNROLL for (int v = 0; v < NV; ++v) ac[v] = _mm256_loadu_ps(acc + qi * hd + 8 * v);
      for (int b = full_blocks(qi); b < n_blk; ++b) {
        const int bits = visible(qi, b);
        if (bits < 0) break;
        if (c[b] != 1.f) {
          const __m256 cv = _mm256_set1_ps(c[b]);
          PC_UNROLL for (int v = 0; v < NV; ++v) ac[v] = _mm256_mul_ps(ac[v], cv);
        }
        for (int u = 0; u < blk_len[b]; ++u) {
          if (!(bits >> u & 1)) continue;
          const __m256 pv = _mm256_broadcast_ss(p + 8 * b + u);
          PC_UNROLL for (int v = 0; v < NV; ++v) ac[v] = _mm256_fmadd_ps(load8(vblk[b] + u * hd + 8 * v), pv, ac[v]);
        }
      }
      PC_UNROLL for (int v = 0; v < NV; ++v) _mm256_storeu_ps(acc + qi * hd + 8 * v, ac[v]);
    }
    n_blk = 0;
    if (stream && pf.steps > 0) {
      pf.per_step = pf.queued > pf.steps ? 2 : 1;
    }
    pf.queued = 0;
    pf.steps = 0;
  };

  auto end_segment = [&] {
    for (int qi = 0; qi < nq; ++qi) {
      if (M[qi] == neg_inf) continue;  // saw none of it
      merge_state<NV>(Mm + qi, Sm + qi, accm + qi * hd, M[qi], S[qi], acc + qi * hd);
      M[qi] = neg_inf;
      S[qi] = 0.f;
      PC_UNROLL for (int v = 0; v < NV; ++v) _mm256_storeu_ps(acc + qi * hd + 8 * v, _mm256_setzero_ps());
    }
  };

  // 1. gather the visible blocks (for_each_key_block: pages and fills) into
  // chunks, a segment's end ending a chunk
  int lo, hi, cur = -1;  // cur: the segment of the blocks gathered
  segment_range(a, tk.seg, &lo, &hi);
  const int walk_end = n_max < hi ? n_max : hi;
  const int next_end =
      tk.seg >= 0 && tk.next_segment_next && hi < n_max ? (n_max < hi + a.segment ? n_max : hi + a.segment) : 0;
  auto on_page = [&](int p, int t0) {
    if (!stream) return;
    if (!page_in_window(a, p, t0, walk_end, q_pos_min)) return;
    if (walk.a == nullptr)
      walk.start(a, walk_end, q_pos_min, (kAttnPrefetchSlots + a.page_size - 1) / a.page_size, tk.seg >= 0, p, t0,
                 next_end);
    const uint16_t *k, *v;
    size_t bytes;
    if (walk.next(&k, &v, &bytes)) {
      pf.push(k, bytes);
      pf.push(v, bytes);
    }
  };
  for_each_key_block(a, n_max, [&](const uint16_t* K, int kw, const uint16_t* V, int len, int pos,
                                   const int32_t* kp) {
    if (pos / a.segment != cur) {
      if (n_blk > 0) run_chunk();
      end_segment();
      cur = pos / a.segment;
    }
    if constexpr (E_is_float<E>) {  // a quantized block: K prepared, V dequantized into scratch
      float* vd = vdq + size_t(8 * n_blk) * hd;
      int32_t* kl = kqp + size_t(4 * n_blk) * hd;
      float* kd = kqd + size_t(8 * n_blk) * NB;
      tiles.prep_k(a.kv_type, reinterpret_cast<const uint8_t*>(K), rb, len, hd, kl, kd);
      vrow[n_blk] = reinterpret_cast<const uint8_t*>(V);
      if (!vupd) {  // (with vupd the tiles read the rows)
        if (hd % 32 == 0) tiles.dequant_v(a.kv_type, vrow[n_blk], rb, len, hd, vd);
        else dequant_rows(a.kv_type, vrow[n_blk], rb, len, hd, vd);  // (one block a row)
      }
      kq[n_blk] = {kl, kd};
      vblk[n_blk] = vd;
    } else if (len == 8) {  // (then kw == 8 too)
      kblk[n_blk] = K;
    } else {  // zero keys past the block's end (never read past it)
      uint16_t* kp = kpad + size_t(8 * n_blk) * hd;
      if (kw == 8) {
        const __m128i keep = _mm_cmpgt_epi16(_mm_set1_epi16(int16_t(len)), _mm_setr_epi16(0, 1, 2, 3, 4, 5, 6, 7));
        for (int d = 0; d < hd; ++d)
          _mm_storeu_si128(reinterpret_cast<__m128i*>(kp + 8 * d),
                           _mm_and_si128(keep, _mm_loadu_si128(reinterpret_cast<const __m128i*>(K + 8 * d))));
      } else {  // a narrow last block of a page (page_size % 8 != 0)
        std::memset(kp, 0, sizeof(uint16_t) * 8 * hd);
        for (int d = 0; d < hd; ++d)
          for (int u = 0; u < len; ++u) kp[8 * d + u] = K[d * kw + u];
      }
      kblk[n_blk] = kp;
    }
    if constexpr (!E_is_float<E>) vblk[n_blk] = V;
    kpos[n_blk] = kp;
    blk_pos[n_blk] = pos;
    blk_len[n_blk] = len;
    if (++n_blk == kChunkBlocks) run_chunk();
  }, lo, hi, on_page);
  if (n_blk > 0) run_chunk();
  end_segment();

  if (tk.seg >= 0) {  // the split form: the state
    for (int qi = 0; qi < nq; ++qi) {
      tk.state.m[qi] = Mm[qi];
      tk.state.s[qi] = Sm[qi];
      PC_UNROLL for (int v = 0; v < NV; ++v)
        _mm256_storeu_ps(tk.state.acc + qi * hd + 8 * v, _mm256_loadu_ps(accm + qi * hd + 8 * v));
    }
    return;
  }
  for (int qi = 0; qi < nq; ++qi) {
    if (a.sinks) add_attention_sink(hd, Mm + qi, Sm + qi, accm + qi * hd, a.sinks[qi % group]);
    const __m256 inv = _mm256_set1_ps(1.f / Sm[qi]);
    float* dst = tk.out + (qi / group) * tk.out_stride + (qi % group) * hd;
    PC_UNROLL for (int v = 0; v < NV; ++v)
      _mm256_storeu_ps(dst + 8 * v, _mm256_mul_ps(_mm256_loadu_ps(accm + qi * hd + 8 * v), inv));
  }
}


// attention_merge() of one query (paged_attention.cc), NV vectors a head.
template <int NV>
void merge_query(const AttentionState* parts, int n_seg, int64_t qi, float* out, const float* sink) {
  constexpr int hd = 8 * NV;
  float mm = -std::numeric_limits<float>::infinity(), sm = 0.f;
  PC_UNROLL for (int v = 0; v < NV; ++v) _mm256_storeu_ps(out + 8 * v, _mm256_setzero_ps());
  for (int k = 0; k < n_seg; ++k) merge_state<NV>(&mm, &sm, out, parts[k].m[qi], parts[k].s[qi], parts[k].acc + qi * hd);
  if (sink) add_attention_sink(hd, &mm, &sm, out, *sink);
  const __m256 inv = _mm256_set1_ps(1.f / sm);
  PC_UNROLL for (int v = 0; v < NV; ++v) _mm256_storeu_ps(out + 8 * v, _mm256_mul_ps(_mm256_loadu_ps(out + 8 * v), inv));
}

// The AVX2 kernel's own tiles for head size 8·NV.
template <int NV>
const AttnTiles& avx2_tiles() {
  static const AttnTiles t = [] {
    AttnTiles x = make_attn_tiles<kAttnQuantQT, kAttnQuantKB, kAttnQuantQT>(
        [](auto sh) { return score_tile<NV, decltype(sh)::kQT, decltype(sh)::kKB, typename decltype(sh)::Elem>; },
        [](auto qt) { return update_tile<NV, decltype(qt)::kQT, attn_update_vectors(NV), typename decltype(qt)::Elem>; });
    fill_attn_qscore<kAttnQuantQT>(x.f32, [](auto sh) { return qscore_tile<NV, decltype(sh)::kQT, decltype(sh)::kKB>; });
    x.f32.prep_k = prepare_keys_q;
    if constexpr (NV % 4 == 0 && attn_update_vectors(NV) == 4)
      fill_attn_vupdate<kAttnQuantQT>(x.f32, 4, [](auto qt, auto vt) {
        return update_tile<NV, decltype(qt)::kQT, 4, uint8_t, decltype(vt)::value>;
      });
    x.f32.dequant_v = dequant_v_avx2;
    // The row-wise softmax of the 16-lane code on its AVX2 emulation (the
    // same operations on pairs of AVX2 vectors).
    if (const AttnTiles* e = avx512_emulated_attn_tiles(8 * NV)) x.f16.softmax_rows = x.f32.softmax_rows = e->f16.softmax_rows;
    return x;
  }();
  return t;
}

}  // namespace

bool paged_attention_tokens_avx2(const PagedAttentionArgs& a, int group,
                                 const PagedAttentionTokens& t, float* scratch, const AttnTiles* tiles) {
  return with_head_vectors(a.head_dim, [&](auto nv) {
    constexpr int NV = decltype(nv)::value;
    const AttnTiles& tl = tiles ? *tiles : avx2_tiles<NV>();
    if (a.kv_type == KvType::kF16) tokens_kernel<NV>(a, group, t, scratch, tl.f16);
    else tokens_kernel<NV>(a, group, t, scratch, tl.f32);
  });
}

bool attention_merge_avx2(int head_dim, const AttentionState* parts, int n_seg, int64_t qi, float* out,
                          const float* sink) {
  return with_head_vectors(head_dim, [&](auto nv) { merge_query<decltype(nv)::value>(parts, n_seg, qi, out, sink); });
}

}  // namespace pc
#include "kernels/avx2_target_end.inc"

#else  // not x86-64: never called (cpu_level() is Scalar)

namespace pc {
bool paged_attention_tokens_avx2(const PagedAttentionArgs&, int, const PagedAttentionTokens&,
                                 float*, const AttnTiles*) {
  return false;
}
bool attention_merge_avx2(int, const AttentionState*, int, int64_t, float*, const float*) { return false; }
}  // namespace pc

#endif
