// AVX2 form of copy_k_f16 (k_relocate.h), bitwise equal to the scalar form.
// A head's F16 keys are blocks of 8 slots, each [head_dim][8] (k_layout.h), so
// one dimension of a full block is one 128-bit load. The copy goes through a
// dimension-major buffer in which the n slots are contiguous (slot src_slot + t
// at column t + 8), so the source's and the destination's block boundaries may
// fall anywhere:
//   gather   each source block's 8 keys of a dimension, one 128-bit move into
//            the buffer (lanes outside the range land in its 8-column margins);
//   rotate   per dimension pair, 8 slots at a time: F16 to F32 (exact), the
//            products and sums of rotate_key_row lane by lane, F32 to F16 rounded
//            to nearest even (vcvtps2ph, bitwise fp32_to_fp16); the dimensions
//            of no pair keep their bits;
//   scatter  each destination block's lanes in range, one 128-bit store per
//            dimension (blended with the kept lanes at the range's ends).
// A page's narrow last block (page_size % 8 slots) goes lane by lane.
#include <algorithm>

#include "kernels/k_layout.h"
#include "kernels/k_relocate_internal.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "kernels/avx2_target_begin.inc"

namespace pc {

namespace {

inline __m128i load8(const uint16_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
inline void store8(uint16_t* p, __m128i v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), v); }

}  // namespace

void copy_k_f16_avx2(uint16_t* dst, int dst_slot, const uint16_t* src, int src_slot, int n, int P, int hd,
                     const KeyRotation* rot, KeyCopyScratch& scratch) {
  const int span = (n + 7) & ~7;
  const size_t W = size_t(span) + 16;  // margin 8 | the slots, rounded up to 8 | margin 8
  if (scratch.h.size() < size_t(hd) * W) scratch.h.resize(size_t(hd) * W);
  uint16_t* buf = scratch.h.data();

  for (int sb = src_slot & ~7; sb < src_slot + n; sb += 8) {
    const int w = k_block_width(P, sb);
    const uint16_t* blk = src + size_t(sb) * hd;
    uint16_t* col = buf + (sb - src_slot + 8);
    if (w == 8) {
      for (int d = 0; d < hd; ++d) store8(col + d * W, load8(blk + d * 8));
    } else {
      const int u0 = std::max(0, src_slot - sb), u1 = std::min(w, src_slot + n - sb);
      for (int d = 0; d < hd; ++d)
        for (int u = u0; u < u1; ++u) col[d * W + u] = blk[d * w + u];
    }
  }

  if (rot) {
    const int half = rot->n_pairs;
    for (int i = 0; i < half; ++i) {
      const __m256 c = _mm256_set1_ps(rot->cs[2 * i]), s = _mm256_set1_ps(rot->cs[2 * i + 1]);
      uint16_t* ra = buf + size_t(rot->neox ? i : 2 * i) * W;
      uint16_t* rb = buf + size_t(rot->neox ? i + half : 2 * i + 1) * W;
      for (int j = 8; j < 8 + span; j += 8) {
        const __m256 x0 = _mm256_cvtph_ps(load8(ra + j)), x1 = _mm256_cvtph_ps(load8(rb + j));
        const __m256 y0 = _mm256_sub_ps(_mm256_mul_ps(x0, c), _mm256_mul_ps(x1, s));
        const __m256 y1 = _mm256_add_ps(_mm256_mul_ps(x0, s), _mm256_mul_ps(x1, c));
        store8(ra + j, _mm256_cvtps_ph(y0, _MM_FROUND_TO_NEAREST_INT));
        store8(rb + j, _mm256_cvtps_ph(y1, _MM_FROUND_TO_NEAREST_INT));
      }
    }
  }

  const __m128i lane = _mm_setr_epi16(0, 1, 2, 3, 4, 5, 6, 7);
  for (int db = dst_slot & ~7; db < dst_slot + n; db += 8) {
    const int w = k_block_width(P, db);
    uint16_t* blk = dst + size_t(db) * hd;
    const uint16_t* col = buf + (db - dst_slot + 8);
    const int u0 = std::max(0, dst_slot - db), u1 = std::min(w, dst_slot + n - db);
    if (w == 8 && u0 == 0 && u1 == 8) {
      for (int d = 0; d < hd; ++d) store8(blk + d * 8, load8(col + d * W));
    } else if (w == 8) {
      const __m128i in = _mm_and_si128(_mm_cmpgt_epi16(lane, _mm_set1_epi16(int16_t(u0 - 1))),
                                       _mm_cmpgt_epi16(_mm_set1_epi16(int16_t(u1)), lane));
      for (int d = 0; d < hd; ++d)
        store8(blk + d * 8, _mm_blendv_epi8(load8(blk + d * 8), load8(col + d * W), in));
    } else {
      for (int d = 0; d < hd; ++d)
        for (int u = u0; u < u1; ++u) blk[d * w + u] = col[d * W + u];
    }
  }
}

}  // namespace pc

#include "kernels/avx2_target_end.inc"

#endif  // __x86_64__
