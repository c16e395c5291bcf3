// AVX-512 register tiles of the attention kernel (paged_attention_avx2.cc
// runs them through its AttnTiles table; F16 pages and dequantized F32 chunks
// alike), written once over a 16-lane backend
// V (simd16_avx512.h on AVX-512, simd16_emu.h emulated on AVX2 for tests; the
// operations are listed in matmul_avx512_impl.h). Each lane performs the AVX2
// tile's operations in its order, so scores, exps and accumulators are
// bitwise those of the AVX2 tiles:
//   scores: a lane per slot, two blocks of 8 slots per vector (lanes 0-7 block
//     b, 8-15 block b + 1), per pair one FMA chain over head_dim in order, then
//     times scale;
//   update: a lane per dimension, 16 dimensions per vector; per block the
//     rescale (when any query's maximum grew in the chunk), then
//     acc = fma(V[t], p_t, acc) slot by slot.
// Head sizes whose update covers an odd number of 8-dimension vectors (head
// dimension 8) have no 16-lane tiles: the AVX2 ones run.
//
// Include inside a target region, after the backend header; internal linkage
// only (see matmul_avx2_shared.h).
#pragma once

#include "kernels/kv_block_levels.h"

namespace pc {
namespace {

#ifndef PC_UNROLL
#define PC_UNROLL _Pragma("GCC unroll 16")
#endif

// 8 values from lo (lanes 0-7) and 8 from hi (8-15) / 16 from p: F16 from a
// page, or F32 dequantized (AttnTileSet).
template <class V>
inline typename V::F load2_16(const uint16_t* lo, const uint16_t* hi) { return V::load_h2(lo, hi); }
template <class V>
inline typename V::F load2_16(const float* lo, const float* hi) { return V::load_f2(lo, hi); }
template <class V>
inline typename V::F load16(const uint16_t* p) { return V::load_h16(p); }
template <class V>
inline typename V::F load16(const float* p) { return V::loadu_f(p); }

template <class V, int NV, int QT, int KB, class E>
__attribute__((noinline)) void score_tile16(const float* const* qv, const E* const* kb, float scale,
                                            float* const* sc) {
  using F = typename V::F;
  constexpr int hd = 8 * NV, KP = (KB + 1) / 2;
  F s[QT][KP];
  PC_UNROLL for (int i = 0; i < QT; ++i) PC_UNROLL for (int j = 0; j < KP; ++j) s[i][j] = V::zero_f();
  const float* q[QT];
  const E* k16[KP][2];
  PC_UNROLL for (int i = 0; i < QT; ++i) q[i] = qv[i];
  PC_UNROLL for (int j = 0; j < KP; ++j) {
    k16[j][0] = kb[2 * j];
    k16[j][1] = kb[2 * j + 1 < KB ? 2 * j + 1 : 2 * j];  // (past the last block: never stored)
  }
  for (int d = 0; d < hd; ++d) {
    F kv[KP];
    PC_UNROLL for (int j = 0; j < KP; ++j) kv[j] = load2_16<V>(k16[j][0] + 8 * d, k16[j][1] + 8 * d);
    PC_UNROLL for (int i = 0; i < QT; ++i) {
      const F qb = V::set1_f(q[i][d]);
      PC_UNROLL for (int j = 0; j < KP; ++j) s[i][j] = V::fmadd(qb, kv[j], s[i][j]);
    }
  }
  const F sv = V::set1_f(scale);
  PC_UNROLL for (int i = 0; i < QT; ++i)
    PC_UNROLL for (int j = 0; j < KP; ++j) {
      const F r = V::mul(s[i][j], sv);
      _mm256_storeu_ps(sc[i] + 16 * j, V::lo8(r));
      if (2 * j + 1 < KB) _mm256_storeu_ps(sc[i] + 16 * j + 8, V::hi8(r));
    }
}

// DV (even) vectors of 8 dimensions from v0: DV / 2 vectors of 16.
template <class V, int NV, int QT, int DV, class E>
__attribute__((noinline)) void update_tile16(float* const* acc, const float* const* p, const float* const* c,
                                             const E* const* vb, const int* blk_len, int n_blk, int v0) {
  static_assert(DV % 2 == 0, "16 dimensions a vector");
  using F = typename V::F;
  constexpr int hd = 8 * NV, DW = DV / 2;
  F a[QT][DW];
  PC_UNROLL for (int i = 0; i < QT; ++i) PC_UNROLL for (int w = 0; w < DW; ++w) a[i][w] = V::loadu_f(acc[i] + 8 * v0 + 16 * w);
  bool rescale = false;  // (as the AVX2 tile: one branch per chunk)
  for (int b = 0; b < n_blk; ++b) PC_UNROLL for (int i = 0; i < QT; ++i) rescale |= c[i][b] != 1.f;
  for (int b = 0; b < n_blk; ++b) {
    if (rescale) {
      PC_UNROLL for (int i = 0; i < QT; ++i) {
        const F ci = V::set1_f(c[i][b]);
        PC_UNROLL for (int w = 0; w < DW; ++w) a[i][w] = V::mul(a[i][w], ci);
      }
    }
    for (int u = 0; u < blk_len[b]; ++u) {
      const int t = 8 * b + u;
      F pv[QT];
      PC_UNROLL for (int i = 0; i < QT; ++i) pv[i] = V::set1_f(p[i][t]);
      const E* vt = vb[b] + u * hd + 8 * v0;
      PC_UNROLL for (int w = 0; w < DW; ++w) {
        const F vv = load16<V>(vt + 16 * w);
        PC_UNROLL for (int i = 0; i < QT; ++i) a[i][w] = V::fmadd(vv, pv[i], a[i][w]);
      }
    }
  }
  PC_UNROLL for (int i = 0; i < QT; ++i) PC_UNROLL for (int w = 0; w < DW; ++w) V::storeu_f(acc[i] + 8 * v0 + 16 * w, a[i][w]);
}

// AttnTileSet::dequant_k on 16 lanes: per quantization block, the rows' levels
// transposed as bytes (kv_block_levels.h), then two dimensions' 8 rows (16
// values) widened and times the rows' scales at a time. Bitwise
// kv_dequantize_row()'s values (d * level is exact in F32).
template <class V, KvType Q>
void dequant_k16(const uint8_t* rows, size_t rb, int n, int hd, float* out) {
  for (int qb = 0; qb < hd / 32; ++qb) {
    __m256i x[8];
    alignas(32) float scl[8];
    _mm256_store_ps(scl, kvq_block_levels<Q>(rows, rb, n, qb, x));
    const typename V::F sv = V::bcast8(scl);
    float* o = out + size_t(qb) * 32 * 8;
    kvq_transpose_levels(x, [&](int D, __m256i c) {  // dimensions D, D+1 and 16+D, 17+D
      V::storeu_f(o + 8 * D, V::mul(sv, V::cvt_i8(_mm256_castsi256_si128(c))));
      V::storeu_f(o + 8 * (16 + D), V::mul(sv, V::cvt_i8(_mm256_extracti128_si256(c, 1))));
    });
  }
}

template <class V>
void dequant_k16(KvType t, const uint8_t* rows, size_t rb, int n, int hd, float* out) {
  if (t == KvType::kQ8_0) dequant_k16<V, KvType::kQ8_0>(rows, rb, n, hd, out);
  else dequant_k16<V, KvType::kQ4_0>(rows, rb, n, hd, out);
}

// AttnTileSet::dequant_v on 16 lanes: each block's 32 levels in two vectors,
// times its scale.
template <class V>
void dequant_v16(KvType t, const uint8_t* rows, size_t rb, int n, int hd, float* out) {
  const __m128i mask = _mm_set1_epi8(15), eight = _mm_set1_epi8(8);
  for (int u = 0; u < n; ++u) {
    const uint8_t* r = rows + u * rb;
    float* o = out + size_t(u) * hd;
    for (int b = 0; b < hd / 32; ++b, o += 32) {
      uint16_t dh;
      std::memcpy(&dh, r, 2);
      const typename V::F d = V::set1_f(_cvtsh_ss(dh));
      __m128i lo, hi;
      if (t == KvType::kQ8_0) {
        lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r + 2));
        hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r + 18));
        r += 34;
      } else {  // q4_0: values 0-15 the low nibbles, 16-31 the high ones
        const __m128i qs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r + 2));
        lo = _mm_sub_epi8(_mm_and_si128(qs, mask), eight);
        hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(qs, 4), mask), eight);
        r += 18;
      }
      V::storeu_f(o, V::mul(d, V::cvt_i8(lo)));
      V::storeu_f(o + 16, V::mul(d, V::cvt_i8(hi)));
    }
  }
}

// The 16-lane tiles for a head size (nullptr: none for it).
template <class V>
const AttnTiles* attn_tiles16(int head_dim) {
  const AttnTiles* tiles = nullptr;
  with_head_vectors(head_dim, [&](auto nv) {
    constexpr int NV = decltype(nv)::value, DV = attn_update_vectors(NV);
    if constexpr (DV % 2 == 0) {
      static const AttnTiles t = [] {
        AttnTiles x = make_attn_tiles(
            [](auto sh) { return score_tile16<V, NV, decltype(sh)::kQT, decltype(sh)::kKB, typename decltype(sh)::Elem>; },
            [](auto qt) { return update_tile16<V, NV, decltype(qt)::kQT, DV, typename decltype(qt)::Elem>; });
        x.f32.dequant_k = dequant_k16<V>;
        x.f32.dequant_v = dequant_v16<V>;
        return x;
      }();
      tiles = &t;
    }
  });
  return tiles;
}

}  // namespace
}  // namespace pc
