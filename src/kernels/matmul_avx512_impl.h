// AVX-512 prompt matmul kernels (Q8_0 / Q4_0, Q4_K and F32 / F16 / BF16 weights),
// written once over a 16-lane backend V: V512 (AVX-512 F/BW/DQ/VL + VNNI,
// simd16_avx512.h, built in kernels_avx512.cc) or V512Emu (the same
// operations on pairs of AVX2 vectors, simd16_emu.h, built in
// kernels_avx512_emu.cc, so that machines without AVX-512 test this code's
// logic bitwise). V provides:
//   I, F              16 int32 / 16 float lanes
//   zero_i, zero_f    all lanes 0
//   load_i2(lo, hi)   lanes 0-7 from lo, 8-15 from hi (8 int32 each)
//   load_f2(lo, hi)   the same for floats
//   set1_i, set1_f    one value in every lane
//   dpwssd(acc, a, b) per lane: acc + a.w0*b.w0 + a.w1*b.w1 (int16 halves, int32
//                     wraparound: vpdpwssd; exact here, the sums fit)
//   cvt, mul, add     int32 -> float, float * and + (rounded separately)
//   lo8, hi8          lanes 0-7 / 8-15 as an AVX2 vector
//   load_w2<L>(p, q, i)  8 weights from row p at i (lanes 0-7) and 8 from row q
//                     (8-15), converted as L::load8 converts them
//   bcast8(x)         x[0..7] in lanes 0-7 and again in 8-15
//   fmadd(a, b, c)    a * b + c per lane, rounded once
//   loadu_f, storeu_f 16 floats
//   load_h2(lo, hi)   8 F16 values from lo (lanes 0-7) and 8 from hi, as floats
//   load_h16(p)       16 F16 values, as floats
//   fnmadd(a, b, c)   c - a * b per lane, rounded once
//   set2_f(x, y)      x in lanes 0-7, y in 8-15
//   bytes (I as 64 bytes, 2 × 32 = the two halves): bcast256_i(p) 32 bytes in both
//   halves; load2x256_i(p, q); join256_i(lo, hi) / dup256_i(v) from AVX2 vectors;
//   and_i, or_i, srli4_16 (int16 >> 4), shuffle8 (vpshufb), maddubs, madd, add32
//   (each per 128-bit lane as its AVX2 form)
//
// Q4_K weights: the AVX2 tile_q4_k's arithmetic with two output columns per
// vector (each 256-bit half the AVX2 tile's vector for its column; the
// activations' 32 bytes in both halves), tiles of up to 4 rows × 4 columns.
// Q5_K weights likewise with matmul_avx2_unpack.cc's tile_q5_k arithmetic (the
// fifth bits made per column with AVX2 operations, then joined).
//
// Float weights (F32 / F16 / BF16): the AVX2 tile_float's arithmetic with two
// output columns per vector (lanes 0-7 one column, 8-15 the next): per output
// an 8-lane accumulator where lane l sums x[k] * w[k] for k = l mod 8 with
// FMA, in k order; then the same hsum8 and the k % 8 tail in order. Tiles of
// up to 4 rows × 12 columns (24 accumulators of the 32 registers); batches of
// fewer than 4 rows (decode) are the AVX2 kernels'.
//
// The panel is the AVX2 kernels' (matmul_avx2_shared.h: groups of 8 columns, int16
// pairs), read two groups at a time: lanes 0-7 group g, lanes 8-15 group g + 1.
// Per row, pair of groups and block: 16 dpwssd give the 16 columns' exact int32
// block sums; then the float part of the AVX2 tile, s = d_w * d_x and
// acc = acc + s * float(isum), in block order. Each column's lane performs the
// AVX2 (and scalar) kernel's operations in its order, so results are bitwise
// equal on every path.
//
// Include inside a target region (after the GCC/Clang target pragma); internal
// linkage only, like matmul_avx2_shared.h.
#pragma once

namespace pc::kern {
namespace {

#ifndef PC_UNROLL
#define PC_UNROLL _Pragma("GCC unroll 16")
#endif

constexpr int kR16 = 4, kC16 = 3;  // largest Q8_0 / Q4_0 tile: 4 rows × 3 pairs of groups (48 columns)
constexpr int kFR = 4, kFP = 6;    // largest float tile: 4 rows × 6 pairs of columns
constexpr int kKP = 2;             // largest Q4_K tile: 4 rows × 2 pairs of columns

// y[r..r+R) × columns [c, c + nc), nc <= 2·P: pair j = columns c + 2j and
// c + 2j + 1 (past the last column: the last one again, never stored).
template <class V, class L, int R, int P>
void float_tile16(const MatmulArgs& a, int64_t r, int64_t c, int nc) {
  using F = typename V::F;
  const int64_t k = a.k, k8 = k & ~int64_t(7);
  const uint8_t* w[P][2];
  const float* x[R];
  PC_UNROLL for (int j = 0; j < P; ++j) {
    const int64_t lo = c + 2 * j, hi = 2 * j + 1 < nc ? lo + 1 : c + nc - 1;
    w[j][0] = a.w + (lo < c + nc ? lo : c + nc - 1) * a.row_bytes;
    w[j][1] = a.w + hi * a.row_bytes;
  }
  PC_UNROLL for (int i = 0; i < R; ++i) x[i] = a.x + (r + i) * k;
  F acc[R][P];
  PC_UNROLL for (int i = 0; i < R; ++i)
    PC_UNROLL for (int j = 0; j < P; ++j) acc[i][j] = V::zero_f();
  for (int64_t kk = 0; kk < k8; kk += 8) {
    F wv[P];
    PC_UNROLL for (int j = 0; j < P; ++j) wv[j] = V::template load_w2<L>(w[j][0], w[j][1], kk);
    PC_UNROLL for (int i = 0; i < R; ++i) {
      const F xv = V::bcast8(x[i] + kk);
      PC_UNROLL for (int j = 0; j < P; ++j) acc[i][j] = V::fmadd(xv, wv[j], acc[i][j]);
    }
  }
  PC_UNROLL for (int i = 0; i < R; ++i)
    PC_UNROLL for (int j = 0; j < P; ++j)
      PC_UNROLL for (int h = 0; h < 2; ++h) {
        if (2 * j + h >= nc) continue;
        float s = hsum8(h ? V::hi8(acc[i][j]) : V::lo8(acc[i][j]));
        for (int64_t kk = k8; kk < k; ++kk) s = s + x[i][kk] * L::load1(w[j][h], kk);
        a.y[(r + i) * a.ldy + c + 2 * j + h] = s;
      }
}

// y[r..r+R) × the columns of groups [g, g + 2C) (task columns from c0; a
// pair's second group past the last one repeats the first, never stored).
template <class V, int R, int C>
void q32_tile16(const MatmulArgs& a, const Q32Panel& p, int64_t r, int64_t g, int64_t groups, int64_t c0,
                int64_t c1) {
  using I = typename V::I;
  using F = typename V::F;
  const int64_t nb = p.nb;
  const int32_t* x[R];
  const float* dx[R];
  panel_rows<R>(a, r, x, dx);
  const __m256i* wq[C][2];
  const float* wd[C][2];
  PC_UNROLL for (int j = 0; j < C; ++j) {
    const int64_t glo = g + 2 * j, ghi = glo + 1 < groups ? glo + 1 : glo;
    wq[j][0] = reinterpret_cast<const __m256i*>(p.q) + glo * nb * 16;
    wq[j][1] = reinterpret_cast<const __m256i*>(p.q) + ghi * nb * 16;
    wd[j][0] = p.d + glo * nb * 8;
    wd[j][1] = p.d + ghi * nb * 8;
  }
  F acc[R][C];
  PC_UNROLL for (int i = 0; i < R; ++i)
    PC_UNROLL for (int j = 0; j < C; ++j) acc[i][j] = V::zero_f();
  for (int64_t b = 0; b < nb; ++b) {
    I is[R][C];
    PC_UNROLL for (int i = 0; i < R; ++i)
      PC_UNROLL for (int j = 0; j < C; ++j) is[i][j] = V::zero_i();
    PC_UNROLL for (int pp = 0; pp < 16; ++pp) {
      I wv[C];
      PC_UNROLL for (int j = 0; j < C; ++j) wv[j] = V::load_i2(wq[j][0] + 16 * b + pp, wq[j][1] + 16 * b + pp);
      PC_UNROLL for (int i = 0; i < R; ++i) {
        const I xv = V::set1_i(x[i][16 * b + pp]);
        PC_UNROLL for (int j = 0; j < C; ++j) is[i][j] = V::dpwssd(is[i][j], xv, wv[j]);
      }
    }
    PC_UNROLL for (int i = 0; i < R; ++i) {
      const F dxv = V::set1_f(dx[i][b]);
      PC_UNROLL for (int j = 0; j < C; ++j) {
        const F s = V::mul(V::load_f2(wd[j][0] + 8 * b, wd[j][1] + 8 * b), dxv);
        acc[i][j] = V::add(acc[i][j], V::mul(s, V::cvt(is[i][j])));
      }
    }
  }
  PC_UNROLL for (int i = 0; i < R; ++i)
    PC_UNROLL for (int j = 0; j < C; ++j) {
      const int64_t c = c0 + 8 * (g + 2 * j);
      float* y = a.y + (r + i) * a.ldy + c;
      if (c < c1) store_cols(y, V::lo8(acc[i][j]), c1 - c);
      if (c + 8 < c1) store_cols(y + 8, V::hi8(acc[i][j]), c1 - c - 8);
    }
}

// y[r..r+R) × columns [c, c + nc) of Q4_K weights, nc <= 2·P (pairs as in
// float_tile16).
template <class V, int R, int P>
void q4k_tile16(const MatmulArgs& a, int64_t r, int64_t c, int nc) {
  using I = typename V::I;
  using F = typename V::F;
  const int64_t nb = a.k / 256;
  const BlockQ4_K* w[P][2];
  PC_UNROLL for (int j = 0; j < P; ++j) {
    const int64_t lo = c + 2 * j, hi = 2 * j + 1 < nc ? lo + 1 : lo;
    w[j][0] = reinterpret_cast<const BlockQ4_K*>(a.w + lo * a.row_bytes);
    w[j][1] = reinterpret_cast<const BlockQ4_K*>(a.w + hi * a.row_bytes);
  }
  const int8_t* xq[R];
  const float* xd[R];
  const int16_t* xb[R];
  PC_UNROLL for (int i = 0; i < R; ++i) {
    xq[i] = a.xq(r + i);
    xd[i] = a.xd(r + i);
    xb[i] = a.xbs(r + i);
  }
  const I m4 = V::dup256_i(_mm256_set1_epi8(0x0F));
  const I minpat = V::dup256_i(q4k_mins_pattern());
  F acc[R][P];
  PC_UNROLL for (int i = 0; i < R; ++i) PC_UNROLL for (int j = 0; j < P; ++j) acc[i][j] = V::zero_f();
  for (int64_t b = 0; b < nb; ++b) {
    PC_UNROLL for (int j = 0; j < P; ++j) {
      const BlockQ4_K& b0 = w[j][0][b];
      const BlockQ4_K& b1 = w[j][1][b];
      const I scmn = V::join256_i(_mm256_broadcastsi128_si256(q4k_scmn(b0)), _mm256_broadcastsi128_si256(q4k_scmn(b1)));
      const I mins = V::shuffle8(scmn, minpat);
      I isum[R];
      PC_UNROLL for (int i = 0; i < R; ++i) isum[i] = V::zero_i();
      PC_UNROLL for (int ch = 0; ch < 4; ++ch) {
        const I q = V::load2x256_i(b0.qs + 32 * ch, b1.qs + 32 * ch);
        const I lo = V::and_i(q, m4), hi = V::and_i(V::srli4_16(q), m4);
        const I slo = V::shuffle8(scmn, V::dup256_i(_mm256_set1_epi16(int16_t(0xFF00 | (2 * ch)))));
        const I shi = V::shuffle8(scmn, V::dup256_i(_mm256_set1_epi16(int16_t(0xFF00 | (2 * ch + 1)))));
        PC_UNROLL for (int i = 0; i < R; ++i) {
          const int8_t* x = xq[i] + 256 * b + 64 * ch;
          const I x0 = V::bcast256_i(x), x1 = V::bcast256_i(x + 32);
          isum[i] = V::add32(isum[i], V::madd(V::maddubs(lo, x0), slo));
          isum[i] = V::add32(isum[i], V::madd(V::maddubs(hi, x1), shi));
        }
      }
      const F d = V::set2_f(h2f(b0.d), h2f(b1.d));
      const F dmin = V::set2_f(h2f(b0.dmin), h2f(b1.dmin));
      PC_UNROLL for (int i = 0; i < R; ++i) {
        const F msum = V::cvt(V::madd(V::bcast256_i(xb[i] + 16 * b), mins));
        const F dx = V::set1_f(xd[i][b]);
        acc[i][j] = V::fmadd(V::mul(d, dx), V::cvt(isum[i]), acc[i][j]);
        acc[i][j] = V::fnmadd(V::mul(dmin, dx), msum, acc[i][j]);
      }
    }
  }
  PC_UNROLL for (int i = 0; i < R; ++i)
    PC_UNROLL for (int j = 0; j < P; ++j)
      PC_UNROLL for (int h = 0; h < 2; ++h)
        if (2 * j + h < nc) a.y[(r + i) * a.ldy + c + 2 * j + h] = hsum8(h ? V::hi8(acc[i][j]) : V::lo8(acc[i][j]));
}

// The fifth bits of Q5_K chunk ch of a block, as tile_q5_k makes them: bit
// 2ch (low-nibble values) or 2ch + 1 (high) of qh[l], moved to bit 4.
inline __m256i q5k_fifth(const uint8_t* qh, int shift) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh));
  return _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(v, shift), _mm256_set1_epi8(1)), 4);
}

// y[r..r+R) × columns [c, c + nc) of Q5_K weights, nc <= 2·P (pairs as in
// float_tile16).
template <class V, int R, int P>
void q5k_tile16(const MatmulArgs& a, int64_t r, int64_t c, int nc) {
  using I = typename V::I;
  using F = typename V::F;
  const int64_t nb = a.k / 256;
  const BlockQ5_K* w[P][2];
  PC_UNROLL for (int j = 0; j < P; ++j) {
    const int64_t lo = c + 2 * j, hi = 2 * j + 1 < nc ? lo + 1 : lo;
    w[j][0] = reinterpret_cast<const BlockQ5_K*>(a.w + lo * a.row_bytes);
    w[j][1] = reinterpret_cast<const BlockQ5_K*>(a.w + hi * a.row_bytes);
  }
  const int8_t* xq[R];
  const float* xd[R];
  const int16_t* xb[R];
  PC_UNROLL for (int i = 0; i < R; ++i) {
    xq[i] = a.xq(r + i);
    xd[i] = a.xd(r + i);
    xb[i] = a.xbs(r + i);
  }
  const I m4 = V::dup256_i(_mm256_set1_epi8(0x0F));
  const I minpat = V::dup256_i(q4k_mins_pattern());
  F acc[R][P];
  PC_UNROLL for (int i = 0; i < R; ++i) PC_UNROLL for (int j = 0; j < P; ++j) acc[i][j] = V::zero_f();
  for (int64_t b = 0; b < nb; ++b) {
    PC_UNROLL for (int j = 0; j < P; ++j) {
      const BlockQ5_K& b0 = w[j][0][b];
      const BlockQ5_K& b1 = w[j][1][b];
      // BlockQ5_K starts like BlockQ4_K (d, dmin, scales).
      const I scmn = V::join256_i(_mm256_broadcastsi128_si256(q4k_scmn(*reinterpret_cast<const BlockQ4_K*>(&b0))),
                                  _mm256_broadcastsi128_si256(q4k_scmn(*reinterpret_cast<const BlockQ4_K*>(&b1))));
      const I mins = V::shuffle8(scmn, minpat);
      I isum[R];
      PC_UNROLL for (int i = 0; i < R; ++i) isum[i] = V::zero_i();
      PC_UNROLL for (int ch = 0; ch < 4; ++ch) {
        const I q = V::load2x256_i(b0.qs + 32 * ch, b1.qs + 32 * ch);
        const I h0 = V::join256_i(q5k_fifth(b0.qh, 2 * ch), q5k_fifth(b1.qh, 2 * ch));
        const I h1 = V::join256_i(q5k_fifth(b0.qh, 2 * ch + 1), q5k_fifth(b1.qh, 2 * ch + 1));
        const I lo = V::or_i(V::and_i(q, m4), h0), hi = V::or_i(V::and_i(V::srli4_16(q), m4), h1);
        const I slo = V::shuffle8(scmn, V::dup256_i(_mm256_set1_epi16(int16_t(0xFF00 | (2 * ch)))));
        const I shi = V::shuffle8(scmn, V::dup256_i(_mm256_set1_epi16(int16_t(0xFF00 | (2 * ch + 1)))));
        PC_UNROLL for (int i = 0; i < R; ++i) {
          const int8_t* x = xq[i] + 256 * b + 64 * ch;
          const I x0 = V::bcast256_i(x), x1 = V::bcast256_i(x + 32);
          isum[i] = V::add32(isum[i], V::madd(V::maddubs(lo, x0), slo));
          isum[i] = V::add32(isum[i], V::madd(V::maddubs(hi, x1), shi));
        }
      }
      const F d = V::set2_f(h2f(b0.d), h2f(b1.d));
      const F dmin = V::set2_f(h2f(b0.dmin), h2f(b1.dmin));
      PC_UNROLL for (int i = 0; i < R; ++i) {
        const F msum = V::cvt(V::madd(V::bcast256_i(xb[i] + 16 * b), mins));
        const F dx = V::set1_f(xd[i][b]);
        acc[i][j] = V::fmadd(V::mul(d, dx), V::cvt(isum[i]), acc[i][j]);
        acc[i][j] = V::fnmadd(V::mul(dmin, dx), msum, acc[i][j]);
      }
    }
  }
  PC_UNROLL for (int i = 0; i < R; ++i)
    PC_UNROLL for (int j = 0; j < P; ++j)
      PC_UNROLL for (int h = 0; h < 2; ++h)
        if (2 * j + h < nc) a.y[(r + i) * a.ldy + c + 2 * j + h] = hsum8(h ? V::hi8(acc[i][j]) : V::lo8(acc[i][j]));
}

template <class V>
struct Avx512Q32 {
  using TileFn = void (*)(const MatmulArgs&, const Q32Panel&, int64_t, int64_t, int64_t, int64_t, int64_t);
  template <int R>
  static constexpr TileFn row_tile(int nc) {
    return nc == 1 ? q32_tile16<V, R, 1> : nc == 2 ? q32_tile16<V, R, 2> : q32_tile16<V, R, 3>;
  }
  static TileFn tile(int nr, int nc) {
    static_assert(kR16 == 4 && kC16 == 3, "tile table below");
    switch (nr) {
      case 1: return row_tile<1>(nc);
      case 2: return row_tile<2>(nc);
      case 3: return row_tile<3>(nc);
      default: return row_tile<4>(nc);
    }
  }

  // Prompt tasks (kPanelRows rows or more, int16 activation copy present);
  // anything smaller is the AVX2 kernel's (decode streams the weights).
  template <bool kQ4>
  static void run_task(const MatmulArgs& a, int64_t r0, int64_t r1, int64_t c0, int64_t c1, uint8_t* scratch) {
    if (r1 - r0 < kPanelRows || !a.al.x16_off) {
      avx2_kernel(kQ4 ? GgmlType::Q4_0 : GgmlType::Q8_0)(a, r0, r1, c0, c1, scratch);
      return;
    }
    const Q32Panel p = q32_task_panel<kQ4>(a, c0, c1, scratch);
    const int64_t groups = q32_groups(c1 - c0);
    // Pairs of groups outer: a tile's 2C groups stay in L1 while every row
    // tile of the task passes over them.
    for (int64_t g = 0; g < groups; g += 2 * kC16) {
      const int64_t pairs = (groups - g + 1) / 2;
      const int nc = static_cast<int>(pairs < kC16 ? pairs : kC16);
      for (int64_t r = r0; r < r1;) {
        const int nr = static_cast<int>(r1 - r < kR16 ? r1 - r : kR16);
        tile(nr, nc)(a, p, r, g, groups, c0, c1);
        r += nr;
      }
    }
  }

  static TaskKernel kernel(GgmlType t) {
    switch (t) {
      case GgmlType::Q8_0: return run_task<false>;
      case GgmlType::Q4_0: return run_task<true>;
      case GgmlType::F32: return run_float<LoadF32>;
      case GgmlType::F16: return run_float<LoadF16>;
      case GgmlType::BF16: return run_float<LoadBF16>;
      case GgmlType::Q4_K: return run_q4k;
      case GgmlType::Q5_K: return run_q5k;
      default: return avx2_kernel(t);
    }
  }

  // Column blocks of whole 16-column pairs of groups for prompt batches.
  static int64_t task_col_multiple(GgmlType t, int64_t m) {
    if ((t == GgmlType::Q8_0 || t == GgmlType::Q4_0) && m >= kPanelRows) return 16;
    return avx2_task_col_multiple(t, m);
  }

  using FloatFn = void (*)(const MatmulArgs&, int64_t, int64_t, int);
  template <class L, int R>
  static FloatFn float_row(int np) {
    static_assert(kFP == 6, "pair table below");
    switch (np) {
      case 1: return float_tile16<V, L, R, 1>;
      case 2: return float_tile16<V, L, R, 2>;
      case 3: return float_tile16<V, L, R, 3>;
      case 4: return float_tile16<V, L, R, 4>;
      case 5: return float_tile16<V, L, R, 5>;
      default: return float_tile16<V, L, R, 6>;
    }
  }
  template <class L>
  static FloatFn float_tile(int nr, int np) {
    static_assert(kFR == 4, "row table below");
    switch (nr) {
      case 1: return float_row<L, 1>(np);
      case 2: return float_row<L, 2>(np);
      case 3: return float_row<L, 3>(np);
      default: return float_row<L, 4>(np);
    }
  }
  // Tiles of up to kFR rows × 2·P columns (`tile(nr, pairs)`), row tiles
  // outer, column tiles inner (the AVX2 order: a tile's rows of x stay in L1
  // while the task's weight rows stream past); fewer rows than a tile (decode):
  // the AVX2 kernel for t.
  template <int P, class TileFor>
  static void run_pairs(GgmlType t, const MatmulArgs& a, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                        uint8_t* scratch, TileFor tile) {
    if (r1 - r0 < kFR) {
      avx2_kernel(t)(a, r0, r1, c0, c1, scratch);
      return;
    }
    for (int64_t r = r0; r < r1;) {
      const int nr = static_cast<int>(r1 - r < kFR ? r1 - r : kFR);
      for (int64_t c = c0; c < c1;) {
        const int nc = static_cast<int>(c1 - c < 2 * P ? c1 - c : 2 * P);
        tile(nr, (nc + 1) / 2)(a, r, c, nc);
        c += nc;
      }
      r += nr;
    }
  }
  template <class L>
  static void run_float(const MatmulArgs& a, int64_t r0, int64_t r1, int64_t c0, int64_t c1, uint8_t* scratch) {
    run_pairs<kFP>(L::kType, a, r0, r1, c0, c1, scratch, float_tile<L>);
  }

  using Q4kFn = void (*)(const MatmulArgs&, int64_t, int64_t, int);
  static Q4kFn q4k_tile(int nr, int np) {
    static_assert(kKP == 2, "pair table below");
    switch (nr) {
      case 1: return np == 1 ? q4k_tile16<V, 1, 1> : q4k_tile16<V, 1, 2>;
      case 2: return np == 1 ? q4k_tile16<V, 2, 1> : q4k_tile16<V, 2, 2>;
      case 3: return np == 1 ? q4k_tile16<V, 3, 1> : q4k_tile16<V, 3, 2>;
      default: return np == 1 ? q4k_tile16<V, 4, 1> : q4k_tile16<V, 4, 2>;
    }
  }
  static void run_q4k(const MatmulArgs& a, int64_t r0, int64_t r1, int64_t c0, int64_t c1, uint8_t* scratch) {
    run_pairs<kKP>(GgmlType::Q4_K, a, r0, r1, c0, c1, scratch, q4k_tile);
  }
  static Q4kFn q5k_tile(int nr, int np) {
    switch (nr) {
      case 1: return np == 1 ? q5k_tile16<V, 1, 1> : q5k_tile16<V, 1, 2>;
      case 2: return np == 1 ? q5k_tile16<V, 2, 1> : q5k_tile16<V, 2, 2>;
      case 3: return np == 1 ? q5k_tile16<V, 3, 1> : q5k_tile16<V, 3, 2>;
      default: return np == 1 ? q5k_tile16<V, 4, 1> : q5k_tile16<V, 4, 2>;
    }
  }
  static void run_q5k(const MatmulArgs& a, int64_t r0, int64_t r1, int64_t c0, int64_t c1, uint8_t* scratch) {
    run_pairs<kKP>(GgmlType::Q5_K, a, r0, r1, c0, c1, scratch, q5k_tile);
  }

  static KernelSet make_set(const char* name) {
    return KernelSet{name, kernel, avx2_quantize_row_fn(), avx2_wants_x16, avx2_task_scratch_bytes,
                     avx2_task_col_bytes, task_col_multiple};
  }
};

}  // namespace
}  // namespace pc::kern
