// What the AVX2 kernels (matmul_avx2.cc, matmul_avx2_unpack.cc) share with
// each other and with the AVX-512 ones (matmul_avx512_impl.h), which must
// compute every element exactly as they do: the tiles' row pointers, the
// K-quant tile on stored Q4_K / Q5_K rows;
// the fixed horizontal sum and the weight loaders of the float tiles; the
// Q8_0 / Q4_0 block helpers, the prompt panel layout (see matmul_avx2.cc,
// "Q8_0 / Q4_0 weights"), its packing, and its reuse by the thread's next task
// of the same call and columns.
//
// Include only inside an AVX2-or-better target region (after the GCC/Clang
// target pragma, with <immintrin.h> included before it): everything here has
// internal linkage, so each translation unit keeps its own copy compiled for
// its own target and none can leak into another through COMDAT folding.
#pragma once

namespace pc::kern {
namespace {

// The quantized activation rows r .. r + R - 1 of a tile: quants, scales and
// block sums (matmul_internal.h).
template <int R>
struct TileRows {
  const int8_t* q[R];
  const float* d[R];
  const int16_t* s[R];
  const int16_t* s32[R];  // the sums of 32 (K-quant layouts, ActLayout::bsum32_off)
  TileRows(const MatmulArgs& a, int64_t r) {
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      q[i] = a.xq(r + i);
      d[i] = a.xd(r + i);
      s[i] = a.xbs(r + i);
      s32[i] = a.xbs32(r + i);
    }
  }
};

// The weight rows c .. c + C - 1 of a tile on stored rows, as blocks B.
template <class B, int C>
struct TileCols {
  const B* w[C];
  TileCols(const MatmulArgs& a, int64_t c) {
#pragma GCC unroll 16
    for (int j = 0; j < C; ++j) w[j] = reinterpret_cast<const B*>(a.w + (c + j) * a.row_bytes);
  }
  const B* operator[](int j) const { return w[j]; }
};

// Fixed horizontal sum: (v0+v4, v1+v5, v2+v6, v3+v7) -> (t0+t2, t1+t3) -> u0+u1.
inline float hsum8(__m256 v) {
  __m128 t = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  __m128 u = _mm_add_ps(t, _mm_movehl_ps(t, t));
  __m128 s = _mm_add_ss(u, _mm_shuffle_ps(u, u, 1));
  return _mm_cvtss_f32(s);
}

// The sum of 8 int32 lanes (exact; wraps as int32 like any grouping).
inline int32_t hsum8_i32(__m256i v) {
  __m128i t = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  t = _mm_add_epi32(t, _mm_unpackhi_epi64(t, t));
  t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 1));
  return _mm_cvtsi128_si32(t);
}

inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

// How far ahead of its read position a decode kernel (one activation row,
// weights streaming from DRAM once per token) prefetches the weight row into
// L1, in bytes. 8 KiB against 1 KiB: 1.15x (AVX2 Q4_K) to 1.4x (AVX2 and
// AVX-512 Q8_0) less CPU time per decode step on the tinyllama shape (AMD
// EPYC Zen 4 VM, kernels_bench BM_DecodeStep, one thread); 16 KiB was no
// faster. The AVX-512 K-quant row kernels gained nothing from it on that
// Zen 4 and 1.4-1.6x on an Intel Xeon (2.8 GHz, AVX-512 VNNI: 2 threads
// 13-14 -> 21-22 GB/s, the machine's measured read bandwidth; 2 KiB ahead
// did as well as 8), so every decode kernel prefetches. On a 2-core Zen 5
// (BM_DecodeStep, 2 threads, medians of 3 rounds) the X16 decode tiles
// streamed, without prefetches / with them: Q4_K_X16 48-50 / 56-60 GB/s,
// Q5_K_X16 28-29 / 60-66, Q6_K_X16 46-49 / 60-64; 4 KiB or 16 KiB ahead,
// or prefetching to L2 or non-temporally, measured the same within that
// machine's noise. The 32-value X16 tiles are the exception (q32x_tile16:
// whole models decoded slower with their prefetch), and the AVX-512
// Q5_K_X16 decode tile prefetches 12 KiB ahead (kQ5kxPrefetchAhead: one
// thread streamed it 1.09x as fast, where Q4_K_X16 and Q6_K_X16 gained
// nothing in whole models).
constexpr int64_t kDecodePrefetchAhead = 8192;

// Part i of kN of the kBytes at p (a block of a weight row a decode kernel is
// about to read), kAhead bytes further on: one prefetch for each
// 64-byte offset in [i·kBytes/kN, (i+1)·kBytes/kN), so the kN parts (and
// consecutive blocks) cover the stream without gaps. A kernel that spends
// long on each block (the X16 K-quant blocks hold 16 rows' blocks, 36-53
// lines) calls it once a step of its loop, so its prefetches go out at the
// rate it reads rather than in one burst a block. Each prefetch is an
// `asm volatile` instruction, which the compiler neither deletes nor moves:
// as `_mm_prefetch`, GCC took a function whose only effects are prefetches
// for one without side effects (ipa-pure-const) and deleted the calls it had
// not inlined by then (the Q4_K_X16 / Q6_K_X16 tiles lost every prefetch),
// and where it kept them it scheduled the prefetches of a fully unrolled
// block (Q5_K_X16's 8 sub-blocks) all at the block's start, where that tile
// streamed 0.7x as fast (BM_DecodeStep, 2-core Zen 5). Always inlined, so
// a part's line offsets fold to constants where the part index is one.
template <size_t kBytes, size_t kN, int64_t kAhead = kDecodePrefetchAhead>
__attribute__((always_inline)) inline void prefetch_part(const void* p, size_t i) {
  constexpr size_t kMaxLines = (kBytes / kN + 63) / 64 + 1;
  const size_t o0 = (i * kBytes / kN + 63) & ~size_t(63), o1 = (i + 1) * kBytes / kN;
  const char* q = static_cast<const char*>(p) + kAhead;
#pragma GCC unroll 64
  for (size_t j = 0; j < kMaxLines; ++j)
    if (o0 + 64 * j < o1) asm volatile("prefetcht0 %0" : : "m"(q[o0 + 64 * j]));
}

// The whole block at once (blocks of a few lines).
template <size_t kBytes>
__attribute__((always_inline)) inline void prefetch_block(const void* p) { prefetch_part<kBytes, 1>(p, 0); }

struct LoadF32 {
  static constexpr GgmlType kType = GgmlType::F32;
  static constexpr int kBytes = 4;
  static __m256 load8(const uint8_t* w, int64_t i) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(w) + i);
  }
  static float load1(const uint8_t* w, int64_t i) {
    float v;
    std::memcpy(&v, w + 4 * i, 4);
    return v;
  }
};
struct LoadF16 {
  static constexpr GgmlType kType = GgmlType::F16;
  static constexpr int kBytes = 2;
  static __m256 load8(const uint8_t* w, int64_t i) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 2 * i)));
  }
  static float load1(const uint8_t* w, int64_t i) {
    uint16_t h;
    std::memcpy(&h, w + 2 * i, 2);
    return h2f(h);
  }
};
struct LoadBF16 {
  static constexpr GgmlType kType = GgmlType::BF16;
  static constexpr int kBytes = 2;
  static __m256 load8(const uint8_t* w, int64_t i) {
    __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 2 * i)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
  }
  static float load1(const uint8_t* w, int64_t i) {
    uint16_t h;
    std::memcpy(&h, w + 2 * i, 2);
    return bf16_to_float(h);
  }
};

// The 6-bit scales and mins of a Q4_K block's 8 sub-blocks (the mapping of
// q4k_scales()), decoded in one vector: 32-bit words u0..u2 of the 12 scale
// bytes give
//   sc[0..3] = u0 & 0x3f..               mn[0..3] = u1 & 0x3f..
//   sc[4..7] = u2 & 0x0f.. | (u0 >> 2) & 0x30..
//   mn[4..7] = (u2 >> 4) & 0x0f.. | (u1 >> 2) & 0x30..
// -> bytes [sc0..sc7 | mn0..mn7].
inline __m128i q4k_scmn(const BlockQ4_K& blk) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales));  // + 4 bytes of qs
  const __m128i lo6 = _mm_and_si128(_mm_srlv_epi32(_mm_shuffle_epi32(raw, _MM_SHUFFLE(2, 1, 2, 0)), _mm_setr_epi32(0, 0, 0, 4)),
                                    _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
  const __m128i hi2 = _mm_and_si128(_mm_srli_epi32(_mm_shuffle_epi32(raw, _MM_SHUFFLE(1, 1, 0, 0)), 2),
                                    _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
  return _mm_or_si128(lo6, hi2);
}
// Shuffle of [scales | mins] (in both 128-bit lanes) giving the mins as int16,
// each repeated for the two 16-value halves of its sub-block.
inline __m256i q4k_mins_pattern() {
  return _mm256_setr_epi8(8, -1, 8, -1, 9, -1, 9, -1, 10, -1, 10, -1, 11, -1, 11, -1,
                          12, -1, 12, -1, 13, -1, 13, -1, 14, -1, 14, -1, 15, -1, 15, -1);
}

// ---- the tiling driver of the tiles on stored rows -------------------------
// Micro-tiles of up to kMaxR activation rows × kMaxC weight rows; K<R, C>::run
// is a tile's kernel.
constexpr int kMaxR = 4;  // activation rows per micro-tile
constexpr int kMaxC = 4;  // weight rows per micro-tile

using TileFn = void (*)(const MatmulArgs&, int64_t r, int64_t c);

template <template <int, int> class K>
struct Table {
  static constexpr TileFn fns[kMaxR][kMaxC] = {
      {K<1, 1>::run, K<1, 2>::run, K<1, 3>::run, K<1, 4>::run},
      {K<2, 1>::run, K<2, 2>::run, K<2, 3>::run, K<2, 4>::run},
      {K<3, 1>::run, K<3, 2>::run, K<3, 3>::run, K<3, 4>::run},
      {K<4, 1>::run, K<4, 2>::run, K<4, 3>::run, K<4, 4>::run},
  };
};

// Columns per micro-tile for a given number of rows in it (C2, C3, C4 for
// 2, 3, 4 rows; narrower as rows grow: register budget, 16 ymm). One row
// (decode) takes one column at a time: see matmul_avx2.cc, prefetch_ahead().
// Loop order: row tiles outer, column tiles inner, so the R activation rows
// stay in L1 while the task's weight rows (sized to stay in L2 by matmul.cc)
// stream past them.
template <template <int, int> class K, int C4, int C3 = 3, int C2 = 4>
void run_task(const MatmulArgs& a, int64_t r0, int64_t r1, int64_t c0, int64_t c1, uint8_t*) {
  static constexpr int kCols[kMaxR] = {1, C2, C3, C4};
  for (int64_t r = r0; r < r1;) {
    const int nr = static_cast<int>(r1 - r < kMaxR ? r1 - r : kMaxR);
    const int want = kCols[nr - 1];
    for (int64_t c = c0; c < c1;) {
      const int nc = static_cast<int>(c1 - c < want ? c1 - c : want);
      Table<K>::fns[nr - 1][nc - 1](a, r, c);
      c += nc;
    }
    r += nr;
  }
}

// ---- Q4_K / Q5_K weights as stored, Q8 activations (256 per block) -------
// Tiles of R activation rows × C weight rows (matmul_avx2.cc runs Q4_K,
// matmul_avx2_unpack.cc Q5_K). Block: 4 chunks of 32 bytes of qs; low nibbles
// = sub-block 2ch, high = 2ch + 1; Q5_K adds bit 2ch (low) or 2ch + 1 (high)
// of qh[l] as bit 4 (levels 0..31, so vpmaddubsw pair sums stay below
// 2·31·127). Per block and element: isum = sum_j sc_j · (q·x)_j and msum =
// madd(bsums, mins), int32 lanes summed to exact integers; then the scalar
// kernel's float operations (matmul_scalar.cc dot_q4_k / dot_q5_k):
//   sum = sum + (d·d_x)·float(isum); sum = sum − (dmin·d_x)·float(msum),
// so this, the scalar and the X16 kernels give the same bits. (Such weights
// are read as stored only where no group of 16 rows fits, or where the layout
// choice keeps them so; matmul_repacked_type() makes the rest X16.)
template <bool kQ5, int R, int C>
void tile_q45_k(const MatmulArgs& a, int64_t r, int64_t c) {
  using B = std::conditional_t<kQ5, BlockQ5_K, BlockQ4_K>;
  const int64_t nb = a.k / 256;
  const TileCols<B, C> w(a, c);
  const TileRows<R> rows(a, r);
  const int8_t* const* xq = rows.q;
  const float* const* xd = rows.d;
  const int16_t* const* xb = rows.s;
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i one = _mm256_set1_epi8(1);
  float sum[R][C] = {};
  for (int64_t b = 0; b < nb; ++b) {
#pragma GCC unroll 16
    for (int j = 0; j < C; ++j) {
      const B& blk = w[j][b];
      if constexpr (R == 1) prefetch_block<sizeof blk>(&blk);
      // BlockQ5_K starts like BlockQ4_K (d, dmin, scales): the same scale decoder.
      const __m256i scmn = _mm256_broadcastsi128_si256(q4k_scmn(*reinterpret_cast<const BlockQ4_K*>(&blk)));
      // mins as int16, each repeated for the two 16-value halves of its sub-block
      const __m256i mins = _mm256_shuffle_epi8(scmn, q4k_mins_pattern());
      __m256i qh = _mm256_setzero_si256();
      if constexpr (kQ5) qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh));
      __m256i isum[R];
#pragma GCC unroll 16
      for (int i = 0; i < R; ++i) isum[i] = _mm256_setzero_si256();
#pragma GCC unroll 16
      for (int ch = 0; ch < 4; ++ch) {
        const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs + 32 * ch));
        __m256i lo = _mm256_and_si256(q, m4);
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
        if constexpr (kQ5) {
          // (qh >> s) & 1 per byte (the 16-bit shift's spill-over from the next byte is masked off), to bit 4.
          lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * ch), one), 4));
          hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * ch + 1), one), 4));
        }
        // sc[2ch], sc[2ch+1] zero-extended into every int16 lane
        __m256i slo = _mm256_shuffle_epi8(scmn, _mm256_set1_epi16(int16_t(0xFF00 | (2 * ch))));
        __m256i shi = _mm256_shuffle_epi8(scmn, _mm256_set1_epi16(int16_t(0xFF00 | (2 * ch + 1))));
        // Keep the chunks in program order: GCC would otherwise hoist all four
        // chunks' operands and spill them.
        __asm__ volatile("" : "+x"(lo), "+x"(hi), "+x"(slo), "+x"(shi));
#pragma GCC unroll 16
        for (int i = 0; i < R; ++i) {
          const int8_t* x = xq[i] + 256 * b + 64 * ch;
          const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
          const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 32));
          isum[i] = _mm256_add_epi32(isum[i], _mm256_madd_epi16(_mm256_maddubs_epi16(lo, x0), slo));
          isum[i] = _mm256_add_epi32(isum[i], _mm256_madd_epi16(_mm256_maddubs_epi16(hi, x1), shi));
        }
      }
      const float d = h2f(blk.d), dmin = h2f(blk.dmin);
#pragma GCC unroll 16
      for (int i = 0; i < R; ++i) {
        const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb[i] + 16 * b));
        const int32_t is = hsum8_i32(isum[i]), ms = hsum8_i32(_mm256_madd_epi16(bs, mins));
        const float dx = xd[i][b];
        sum[i][j] = sum[i][j] + (d * dx) * float(is);
        sum[i][j] = sum[i][j] - (dmin * dx) * float(ms);
      }
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 16
    for (int j = 0; j < C; ++j) a.y[(r + i) * a.ldy + c + j] = sum[i][j];
}

// The 32 4-bit values of a Q4_0 block, unsigned (0..15), in value order.
inline __m256i unpack_u4(const BlockQ4_0& b) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
  const __m256i v = _mm256_set_m128i(_mm_srli_epi16(q, 4), q);  // high nibbles -> 16..31
  return _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
}
inline __m256i unpack_q4_0(const BlockQ4_0& b) { return _mm256_sub_epi8(unpack_u4(b), _mm256_set1_epi8(8)); }

// The 32 int8 weights and the F16 scale of block b of a row.
template <bool kQ4>
inline __m256i q32_block(const uint8_t* row, int64_t b, uint16_t* d) {
  if constexpr (kQ4) {
    const BlockQ4_0& blk = reinterpret_cast<const BlockQ4_0*>(row)[b];
    *d = blk.d;
    return unpack_q4_0(blk);
  } else {
    const BlockQ8_0& blk = reinterpret_cast<const BlockQ8_0*>(row)[b];
    *d = blk.d;
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs));
  }
}

// Stores the first n (1..8) lanes of v at y.
inline void store_cols(float* y, __m256 v, int64_t n) {
  if (n >= 8) {
    _mm256_storeu_ps(y, v);
    return;
  }
  alignas(32) float t[8];
  _mm256_store_ps(t, v);
  for (int64_t j = 0; j < n; ++j) y[j] = t[j];
}

// 8×8 transpose of 32-bit elements: out[p] lane j = in[j] lane p.
inline void transpose8(const __m256i in[8], __m256i out[8]) {
  __m256i t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_epi32(in[2 * i], in[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_epi32(in[2 * i], in[2 * i + 1]);
  }
  for (int h = 0; h < 2; ++h) {  // rows 0-3, rows 4-7
    const __m256i* th = t + 4 * h;
    u[4 * h + 0] = _mm256_unpacklo_epi64(th[0], th[2]);
    u[4 * h + 1] = _mm256_unpackhi_epi64(th[0], th[2]);
    u[4 * h + 2] = _mm256_unpacklo_epi64(th[1], th[3]);
    u[4 * h + 3] = _mm256_unpackhi_epi64(th[1], th[3]);
  }
  for (int p = 0; p < 4; ++p) {
    out[p] = _mm256_permute2x128_si256(u[p], u[4 + p], 0x20);
    out[p + 4] = _mm256_permute2x128_si256(u[p], u[4 + p], 0x31);
  }
}

// Stored Q8_0 / Q4_0: batches (and tasks) of fewer rows read the weights a
// row of x at a time (q32_rows; on AVX-512 q8_0_rows16), larger ones pack an
// int16 panel. The panel's packing is paid once per task whatever its rows:
// at 4 rows the row kernels ran 1.5-2.0x as fast, at 8 0.86-1.16x, at 12-16
// the panel won (docs/benchmarks.md, "small batches").
constexpr int64_t kPanelRows = 8;
// Q8_0_X16 on the AVX2 set: the panel from this many rows; fewer run the
// 16-lane kernels' 4-row tiles on the emulation (x16_kernel_set()), which
// need no packing: 4.9x at 4 rows, 1.7x at 32, even at 128, the panel 1.16x
// at 512. (Q4_0_X16 never takes the panel: the 16-lane tiles were 1.2x
// faster even at 512-1024 rows.)
constexpr int64_t kX16PanelRows = 128;

struct Q32Panel {
  int64_t nb = 0;
  const int16_t* q = nullptr;  // [groups][nb][16][8][2]
  const float* d = nullptr;    // [groups][nb][8]
};

inline int64_t q32_groups(int64_t cols) { return (cols + 7) / 8; }

// Where the panel of `cols` columns lives in the scratch.
inline Q32Panel q32_panel(int64_t k, int64_t cols, uint8_t* scratch) {
  Q32Panel p;
  p.nb = k / 32;
  p.q = reinterpret_cast<const int16_t*>(scratch);
  p.d = reinterpret_cast<const float*>(scratch + round_up64(q32_groups(cols) * p.nb * 512));
  return p;
}

// Block b of column `lane` of a Q8_0_X16 group of nb blocks a row
// (weight_repack.h): its 32 values (the codes' sign bits flipped back) and
// its F16 scale.
inline __m256i q80x_block(const uint8_t* group, int64_t nb, int lane, int64_t b, uint16_t* d) {
  const Q8X16Block blk = q8x16_block(group, nb, b);
  *d = blk.d[lane];
  const __m256i v = _mm256_i32gather_epi32(reinterpret_cast<const int*>(blk.qs[0] + 4 * lane),
                                           _mm256_setr_epi32(0, 16, 32, 48, 64, 80, 96, 112), 4);
  return _mm256_xor_si256(v, _mm256_set1_epi8(static_cast<char>(0x80)));
}

// kX16: the weights are Q8_0_X16 groups, read by q80x_block.
template <bool kQ4, bool kX16 = false>
Q32Panel q32_pack(const MatmulArgs& a, int64_t c0, int64_t c1, uint8_t* scratch) {
  static_assert(!(kQ4 && kX16), "Q4_0_X16 runs the 16-lane tiles, never a panel");
  const Q32Panel p = q32_panel(a.k, c1 - c0, scratch);
  const int64_t groups = q32_groups(c1 - c0);
  auto* q = const_cast<int16_t*>(p.q);
  auto* d = const_cast<float*>(p.d);
  for (int64_t g = 0; g < groups; ++g) {
    const uint8_t* w[8];
    int lane[8];
    bool live[8];
    for (int j = 0; j < 8; ++j) {
      const int64_t c = c0 + 8 * g + j, cl = c < c1 ? c : c1 - 1;
      live[j] = c < c1;
      lane[j] = static_cast<int>(cl % kX16Rows);
      w[j] = kX16 ? a.w + (cl - lane[j]) * a.row_bytes : a.w + cl * a.row_bytes;
    }
    for (int64_t b = 0; b < p.nb; ++b) {
      __m256i lo[8], hi[8], out[8];
      for (int j = 0; j < 8; ++j) {
        uint16_t dh;
        __m256i wv;
        if constexpr (kX16) wv = q80x_block(w[j], a.row_bytes / int64_t(sizeof(BlockQ8_0)), lane[j], b, &dh);
        else wv = q32_block<kQ4>(w[j], b, &dh);
        if (!live[j]) wv = _mm256_setzero_si256();
        lo[j] = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(wv));       // pairs 0..7 as dwords
        hi[j] = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(wv, 1));  // pairs 8..15
        d[(g * p.nb + b) * 8 + j] = live[j] ? _cvtsh_ss(dh) : 0.f;
      }
      __m256i* dst = reinterpret_cast<__m256i*>(q + (g * p.nb + b) * 256);
      transpose8(lo, out);
      for (int k = 0; k < 8; ++k) _mm256_store_si256(dst + k, out[k]);
      transpose8(hi, out);
      for (int k = 0; k < 8; ++k) _mm256_store_si256(dst + 8 + k, out[k]);
    }
  }
  return p;
}


// Rows r..r+R of the activations as the panel tiles read them: the int16
// quant pairs (one int32 a pair) and the block scales.
template <int R>
inline void panel_rows(const MatmulArgs& a, int64_t r, const int32_t* (&x)[R], const float* (&dx)[R]) {
  for (int i = 0; i < R; ++i) {
    x[i] = reinterpret_cast<const int32_t*>(a.x16(r + i));
    dx[i] = a.xd(r + i);
  }
}

// The panel of columns [c0, c1) for a task: the one this thread packed in
// `scratch` for its previous task, if that was the same call and columns
// (must_pack_task_block), else packed now.
template <bool kQ4, bool kX16 = false>
Q32Panel q32_task_panel(const MatmulArgs& a, int64_t c0, int64_t c1, uint8_t* scratch) {
  if (!must_pack_task_block(a, c0, c1, scratch)) return q32_panel(a.k, c1 - c0, scratch);
  return q32_pack<kQ4, kX16>(a, c0, c1, scratch);
}

}  // namespace
}  // namespace pc::kern
