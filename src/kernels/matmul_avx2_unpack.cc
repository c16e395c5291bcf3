// AVX2 + FMA + F16C kernels for the weight types whose blocks are unpacked to
// int8 vectors before an int8 dot product with the quantized activations:
//   32-element blocks (Q8_0-style activations):  Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4
//   256-element blocks (Q8_K-style, with bsums): Q5_K, IQ4_XS
// matmul_avx2.cc's avx2_kernel() hands these types here; the AVX-512 kernel
// sets run them through it too. Weights in whole groups of 16 rows are
// repacked to the X16 layouts, which have kernels of their own: these run the
// tensors that are not (and the paths' tests). Compiled for
// AVX2 like matmul_avx2.cc (target pragma after the standard headers; internal
// linkage but for the entry point).
//
// Tiling as matmul_avx2.cc's run_task: micro-tiles of R activation rows × C
// weight rows (R <= 4), one weight row at a time for decode (R = 1), with the
// same forward prefetch of the stream.
//
// Batch invariance and exactness: every output element owns its sum and
// runs, per block in increasing order, the same operations whatever the tile
// it sits in: the block's exact integers (isum in 8 lanes, summed; IQ4_XS:
// the sum over sub-blocks of (ls - 32) times each one's dot product), then
// the scalar kernel's float operations (sum = sum + (d_w·d_x)·float(isum),
// and for Q4_1 / Q5_1 sum = sum + (m_w·d_x)·float(the block's activation
// sum)). So these, the scalar kernels and the X16 layouts' kernels give the
// same bits.
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "gguf/quants.h"
#include "kernels/matmul_internal.h"
#include "kernels/weight_repack.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "kernels/avx2_target_begin.inc"

#include "kernels/matmul_avx2_shared.h"  // hsum8, h2f, q4k_scmn, q4k_mins_pattern

namespace pc::kern {

namespace {

#define PC_UNROLL _Pragma("GCC unroll 16")


// The 32 4-bit codes of a 32-element group: low nibbles of qs[0..15], then
// their high nibbles.
inline __m256i nibbles32(const uint8_t* qs) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0x0F));
}

// 0x10 in byte e where bit e of the little-endian uint32 qh is set (bit 4 of
// the Q5_0 / Q5_1 level of element e), else 0.
inline __m256i q5_high(const uint8_t* qh) {
  uint32_t bits;
  std::memcpy(&bits, qh, 4);
  // Byte e of the vector takes byte e / 8 of bits (both 128-bit lanes hold all four).
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(int32_t(bits)),
      _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i sel = _mm256_set1_epi64x(int64_t(0x8040201008040201));  // bit e % 8 of byte e
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, sel), sel);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

inline __m256i table16(const int8_t (&t)[16]) {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(t)));
}

// Exact int32 sums (8 lanes) of w[i] * x[i] over 32 int8 pairs; |w|, |x| <= 127
// so the int16 pair sums of vpmaddubsw cannot saturate.
inline __m256i dot32_signed(__m256i w, __m256i x) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w)), _mm256_set1_epi16(1));
}
inline __m256i dot32_unsigned(__m256i w, __m256i x) {  // w in [0, 127]
  return _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), _mm256_set1_epi16(1));
}

// ---- 32-element types ------------------------------------------------------
// A decoder gives block b's 32 weights as int8 (`q`), its scale d and, for the
// types with an offset (kMin), m.
struct DecQ4_1 {
  using Block = BlockQ4_1;
  static constexpr bool kMin = true, kSigned = false;
  static __m256i q(const Block& b) { return nibbles32(b.qs); }
  static float d(const Block& b) { return h2f(b.d); }
  static float m(const Block& b) { return h2f(b.m); }
};
struct DecQ5_0 {
  using Block = BlockQ5_0;
  static constexpr bool kMin = false, kSigned = true;
  static __m256i q(const Block& b) {
    return _mm256_sub_epi8(_mm256_or_si256(nibbles32(b.qs), q5_high(b.qh)), _mm256_set1_epi8(16));
  }
  static float d(const Block& b) { return h2f(b.d); }
  static float m(const Block&) { return 0.f; }
};
struct DecQ5_1 {
  using Block = BlockQ5_1;
  static constexpr bool kMin = true, kSigned = false;
  static __m256i q(const Block& b) { return _mm256_or_si256(nibbles32(b.qs), q5_high(b.qh)); }
  static float d(const Block& b) { return h2f(b.d); }
  static float m(const Block& b) { return h2f(b.m); }
};
struct DecIQ4_NL {
  using Block = BlockIQ4_NL;
  static constexpr bool kMin = false, kSigned = true;
  static __m256i q(const Block& b) { return _mm256_shuffle_epi8(table16(kIq4nlValues), nibbles32(b.qs)); }
  static float d(const Block& b) { return h2f(b.d); }
  static float m(const Block&) { return 0.f; }
};
struct DecMXFP4 {
  using Block = BlockMXFP4;
  static constexpr bool kMin = false, kSigned = true;
  static __m256i q(const Block& b) { return _mm256_shuffle_epi8(table16(kMxfp4Values), nibbles32(b.qs)); }
  static float d(const Block& b) {  // 2^(e-128), as e8m0_half_to_fp32
    const uint32_t bits = b.e < 2 ? 0x00200000u << b.e : uint32_t(b.e - 1) << 23;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  static float m(const Block&) { return 0.f; }
};

template <class D, int R, int C>
void tile_q32(const MatmulArgs& a, int64_t r, int64_t c) {
  using Block = typename D::Block;
  const int64_t nb = a.k / 32;
  const TileCols<Block, C> w(a, c);
  const TileRows<R> rows(a, r);
  const int8_t* const* xq = rows.q;
  const float* const* xd = rows.d;
  const int16_t* const* xs = rows.s;  // the blocks' activation sums (Q4_1 / Q5_1)
  float sum[R][C] = {};
  for (int64_t b = 0; b < nb; ++b) {
    __m256i xv[R];
    PC_UNROLL for (int i = 0; i < R; ++i) xv[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[i] + 32 * b));
    PC_UNROLL for (int j = 0; j < C; ++j) {
      const Block& blk = w[j][b];
      if constexpr (R == 1) {
        if (b % 2 == 0) prefetch_block<2 * sizeof(Block)>(&blk);
      }
      const __m256i q = D::q(blk);
      const float dw = D::d(blk);
      PC_UNROLL for (int i = 0; i < R; ++i) {
        const __m256i isum = D::kSigned ? dot32_signed(q, xv[i]) : dot32_unsigned(q, xv[i]);
        sum[i][j] = sum[i][j] + (dw * xd[i][b]) * float(hsum8_i32(isum));
        if constexpr (D::kMin) sum[i][j] = sum[i][j] + (D::m(blk) * xd[i][b]) * float(xs[i][b]);
      }
    }
  }
  PC_UNROLL for (int i = 0; i < R; ++i)
    PC_UNROLL for (int j = 0; j < C; ++j) a.y[(r + i) * a.ldy + c + j] = sum[i][j];
}

// ---- Q5_K: tile_q45_k (matmul_avx2_shared.h) -------------------------------

// ---- IQ4_XS ----------------------------------------------------------------
// Sub-block s (32 values, IQ4_NL's layout in qs[16s..16s+15]) adds
// madd(maddubs(|w|, sign(x, w)), ls_s - 32) to isum: the int16 pair sums
// (<= 2·127·127) times a 6-bit scale, exact in int32.
template <int R, int C>
void tile_iq4_xs(const MatmulArgs& a, int64_t r, int64_t c) {
  const int64_t nb = a.k / 256;
  const TileCols<BlockIQ4_XS, C> w(a, c);
  const TileRows<R> rows(a, r);
  const int8_t* const* xq = rows.q;
  const float* const* xd = rows.d;
  const __m256i table = table16(kIq4nlValues);
  float sum[R][C] = {};
  for (int64_t b = 0; b < nb; ++b) {
    PC_UNROLL for (int j = 0; j < C; ++j) {
      const BlockIQ4_XS& blk = w[j][b];
      if constexpr (R == 1) prefetch_block<sizeof blk>(&blk);
      __m256i isum[R];
      PC_UNROLL for (int i = 0; i < R; ++i) isum[i] = _mm256_setzero_si256();
      for (int s = 0; s < 8; ++s) {
        const int ls = ((blk.scales_l[s / 2] >> (4 * (s % 2))) & 0xF) | (((blk.scales_h >> (2 * s)) & 3) << 4);
        const __m256i wv = _mm256_shuffle_epi8(table, nibbles32(blk.qs + 16 * s));
        const __m256i aw = _mm256_abs_epi8(wv);
        const __m256i sc = _mm256_set1_epi16(int16_t(ls - 32));
        PC_UNROLL for (int i = 0; i < R; ++i) {
          const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[i] + 256 * b + 32 * s));
          isum[i] = _mm256_add_epi32(isum[i], _mm256_madd_epi16(_mm256_maddubs_epi16(aw, _mm256_sign_epi8(x, wv)), sc));
        }
      }
      const float dw = h2f(blk.d);
      PC_UNROLL for (int i = 0; i < R; ++i) sum[i][j] = sum[i][j] + (dw * xd[i][b]) * float(hsum8_i32(isum[i]));
    }
  }
  PC_UNROLL for (int i = 0; i < R; ++i)
    PC_UNROLL for (int j = 0; j < C; ++j) a.y[(r + i) * a.ldy + c + j] = sum[i][j];
}

// ---- tiling driver: run_task (matmul_avx2_shared.h) ------------------------

template <class D>
struct KQ32 {
  template <int R, int C>
  struct K {
    static void run(const MatmulArgs& a, int64_t r, int64_t c) { tile_q32<D, R, C>(a, r, c); }
  };
};
template <int R, int C> struct KQ5_K { static void run(const MatmulArgs& a, int64_t r, int64_t c) { tile_q45_k<true, R, C>(a, r, c); } };
template <int R, int C> struct KIQ4_XS { static void run(const MatmulArgs& a, int64_t r, int64_t c) { tile_iq4_xs<R, C>(a, r, c); } };

}  // namespace
}  // namespace pc::kern

#include "kernels/avx2_target_end.inc"

namespace pc::kern {

TaskKernel avx2_unpack_kernel(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_1: return run_task<KQ32<DecQ4_1>::K, 2, 2, 3>;
    case GgmlType::Q5_0: return run_task<KQ32<DecQ5_0>::K, 2, 2, 3>;
    case GgmlType::Q5_1: return run_task<KQ32<DecQ5_1>::K, 2, 2, 3>;
    case GgmlType::IQ4_NL: return run_task<KQ32<DecIQ4_NL>::K, 2, 2, 3>;
    case GgmlType::MXFP4: return run_task<KQ32<DecMXFP4>::K, 2, 2, 3>;
    case GgmlType::Q5_K: return run_task<KQ5_K, 1, 2, 3>;
    case GgmlType::IQ4_XS: return run_task<KIQ4_XS, 2, 2, 3>;
    default: return nullptr;
  }
}

}  // namespace pc::kern

#else  // not x86

namespace pc::kern {
TaskKernel avx2_unpack_kernel(GgmlType) { return nullptr; }
}  // namespace pc::kern

#endif
