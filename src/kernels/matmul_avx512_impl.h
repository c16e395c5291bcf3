// AVX-512 matmul kernels (the X16 weights, the layouts of weight_repack.h,
// one output column per int32 lane; prompt
// tiles of Q8_0 / Q4_0 as stored and F32 / F16 / BF16 weights; decode kernels
// of Q8_0 and of Q6_K as stored),
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
//   bytes (I as 64 bytes, 2 × 32 = the two halves): bcast256_i(p) 32 bytes in both
//   halves; load2x256_i(p, q); join256_i(lo, hi) / dup256_i(v) from AVX2 vectors;
//   and_i, or_i, srli4_16 (int16 >> 4), add32
//   (each per 128-bit lane as its AVX2 form)
//   dpbusd(acc, u8, s8)  per int32 lane: acc + the 4 products u8 · s8 (vpdpbusd,
//                     exact); sub32, slli32_5; slli16<S>, srli16<S> (int16 shifts)
//   sll16_2 / srl16_2(v, s0, s1)  int16 shifts by s0 in lanes 0-7, s1 in 8-15
//   words_zx(table, idx)  word 2i = table word idx[2i], word 2i+1 = 0 (vpermw,
//                     zero-masked); load_i16x32, loadu_i (64 bytes)
//   lo8_i, hi8_i      lanes 0-7 / 8-15 as an AVX2 integer vector
//   xor_i, storeu_i   bitwise xor; store 64 bytes
//   pairsum(a, b)     int32 lanes 0-7: a0 + a1, a2 + a3, ..., a14 + a15; 8-15: the same of b
//   set2_f(lo, hi)    lo in lanes 0-7, hi in 8-15
//   max_f(a, b), select_gt(a, b, x, y) (a > b ? x : y), fixed_exp(x) (fixed_exp.h's
//                     operations), transpose8x2 (an 8×8 transpose a half): the
//                     attention softmax's (paged_attention_avx512_impl.h)
//   the X16 kernels' (commented in the backends): bcast32_i, dpbusd_u7_at /
//   dpwssd_at (the 4 bytes at x broadcast), zx8_32, sx8_32,
//   srli32<S>, slli32<S>, sub, mullo32, dpbusd_u7, scale_for / steps_scaled<N, kMax>,
//   steps_sum<N, kMax>, kQ8xBiased / q8x_prep / q8x_dot (Q8_0_X16), bcast128_i /
//   lut16 / zx16_32 / e8m0_half16 (the table types)
//
// The X16 weights (sections "Q4_K_X16", "Q6_K_X16", "The 32-value X16
// layouts", "IQ4_XS_X16"): a group of 16 rows a
// vector, each column's sums in its own lane, tiles of up to V::kKxRows rows
// (decode is the one-row tile; the AVX2 backend's prompt tiles take the
// group's two 8-lane halves apart, V::Half, for 6 rows a tile (4 for the
// 32-value types) in its 16 registers); the exact integers and float operations of the
// scalar kernels. K-quant weights as stored (tensors not in whole groups
// of 16, a token embedding the output projection is tied to) run the AVX2
// kernels, but Q6_K decode rows (q6k_row16: "decode" below), which give the
// same bits.
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

// isum + s * (the sum of the 4 products u8 · s8 of each int32 lane), exactly
// the integer that isum + madd(maddubs(u8, s8), s16) gives (the AVX2 kernels'
// form, which never saturates here: the 4-product sums of q6k_row16 are below
// 2^15 in magnitude, 4 · 63 · 128): vpdpbusd sums the 4 products, vpdpwssd
// multiplies the sum's low 16 bits by the scale s32 holds in the low word of
// each int32 lane (its high word 0).
template <class V>
inline typename V::I dot_scaled(typename V::I isum, typename V::I u8, typename V::I s8, typename V::I s32) {
  return V::dpwssd(isum, V::dpbusd(V::zero_i(), u8, s8), s32);
}

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

// The quantized activation rows r .. r + R - 1 of a prompt tile (ActLayout),
// block by block: row i's bytes of the current block at xq[i] + bo, its
// block scale at xq[i] + dq and its sums at xq[i] + sq. Three offsets for all
// rows instead of a pointer a row for each: with a pointer a row for the
// bytes, the scales and the sums, the 8-row tiles held 24 and kept moving
// them between registers and the stack. next() steps the offsets through an
// empty asm, which hides their progression from the compiler: otherwise it
// turns xq[i] + bo into a pointer a row again (held on the stack, advanced
// there each block). kBytes and kSumBytes: a block's activation bytes and
// sum bytes (the scale is one float a block).
template <int R, int64_t kBytes, int64_t kSumBytes>
struct ActRows {
  const int8_t* xq[R];
  int64_t bo = 0, dq, sq;
  ActRows(const MatmulArgs& a, int64_t r, int64_t sums_off) : dq(a.al.d_off), sq(sums_off) {
    PC_UNROLL for (int i = 0; i < R; ++i) xq[i] = a.xq(r + i);
  }
  const int8_t* bytes(int i) const { return xq[i] + bo; }
  float scale(int i) const { return *reinterpret_cast<const float*>(reinterpret_cast<const uint8_t*>(xq[i]) + dq); }
  const int16_t* sums(int i) const {
    return reinterpret_cast<const int16_t*>(reinterpret_cast<const uint8_t*>(xq[i]) + sq);
  }
  __attribute__((always_inline)) void next() {
    bo += kBytes, dq += 4, sq += kSumBytes;
    __asm__("" : "+r"(bo), "+r"(dq), "+r"(sq));
  }
};

// ---- Q4_K_X16 / Q5_K_X16: 16 interleaved rows a vector (weight_repack.h) ---
// Lane c of every vector is column 16g + c of y (row c of weight group g), so
// a column's sums never leave their lane. Per Q4_K_X16 block and row of x:
//   for each 16-value quarter of a sub-block (4 vectors of 4 values a lane):
//     s = the 16 products' sum, 4 vpdpbusd with the 4 activation bytes of
//         each step broadcast (|s| < 16 · 15 · 128 < 2^15: one int16 word),
//     isum += s · sc_j (vpdpwssd, the scale in the lane's low word);
//   msum = sum over the 8 activation sums of 32 values of bs_j · mn_j
//     (4 vpdpwssd on a pair of sums broadcast, ActLayout::bsum32_off);
// the exact integers of dot_q4_k (matmul_scalar.cc); then its float
// operations, per lane: acc = acc + (d·d_x)·float(isum), acc = acc −
// (dmin·d_x)·float(msum), each rounded separately. So every path (scalar,
// AVX2's tile_q45_k on stored rows, these on either backend) gives the same
// bits. Tiles of up to V::kKxRows rows × one group, each unpacked weight
// vector serving every row of the tile; decode (one row) is the one-row tile,
// prefetching the group's block stream ahead. Q5_K_X16 differs only in the
// isum (q5kx_sub), the exact integer of dot_q5_k.

// How far ahead the AVX-512 Q5_K_X16 decode tile prefetches: 12 KiB (4-5
// blocks). On a 2-core Zen 5 (BM_DecodeStep, 3 rounds alternating with 8 KiB)
// it streamed Q5_K_X16 at 29.3-31.0 GB/s on one thread against 24.6-28.1 and
// 46.3-53.4 on two against 44.1-49.2, and tinyllama Q5_K_M decoded 62.6-64.4
// tok/s against 57.7-58.4. Q4_K_X16 streamed 1.03-1.06x faster with it, but
// tinyllama Q4_K_M decoded no faster (79.1-79.6 against 79.5-80.3 tok/s), and
// Q6_K_X16, which spends longer on each byte, no faster either: they keep
// kDecodePrefetchAhead's 8 KiB, as does q5kx_pairs (the AVX-VNNI level's
// decode). The AVX2 level's Q5_K_X16 decode (V512Emu::k45x_row_block) takes
// 12 KiB too.
constexpr int64_t kQ5kxPrefetchAhead = 12288;

// Quarter h (values 16h .. 16h + 15 of the half U: low nibbles U = 0, high
// U = 1) of block b for R rows: isum[i] += its 16-product sum · its scale.
template <class V, int R, int U>
inline void q4kx_half(const BlockQ4_KX16& blk, const int8_t* const* x, typename V::I* isum, typename V::I m4, bool pf) {
  using I = typename V::I;
#pragma GCC unroll 1
  for (int h = 0; h < 8; ++h) {
    if (R == 1 || pf) prefetch_part<sizeof blk, 16>(&blk, 8 * U + h);
    I q[4];
    PC_UNROLL for (int tt = 0; tt < 4; ++tt) {
      const I p = V::loadu_i(blk.qs[4 * h + tt]);
      q[tt] = U ? V::and_i(V::srli4_16(p), m4) : V::and_i(p, m4);
    }
    const I sc = V::template scale_for<4, 15>(V::and_i(V::zx8_32(blk.scm[4 * U + h / 2]), V::set1_i(63)));
    PC_UNROLL for (int i = 0; i < R; ++i)
      isum[i] = V::template steps_scaled<4, 15>(isum[i], q, x[i] + 128 * U + 16 * h, sc);
  }
}

// Sub-block J (values 32J .. 32J + 31, 8 vectors of 4 values a lane) of a
// Q5_K_X16 block for R rows (AVX-512 decode's one row; else q5kx_pairs): the
// codes are a nibble of qs (the low one for J < 4) with bit J of qh moved to
// bit 4; s = the 32 products' sum (8 vpdpbusd, |s| < 32 · 31 · 128 < 2^17),
// isum[i] += s · sc_J (vpmulld).
template <class V, int R, int J>
inline void q5kx_sub(const BlockQ5_KX16& blk, const int8_t* const* x, typename V::I* isum, typename V::I m4) {
  using I = typename V::I;
  const I m10 = V::set1_i(0x10101010);
  I s[R];
  PC_UNROLL for (int i = 0; i < R; ++i) s[i] = V::zero_i();
  PC_UNROLL for (int u = 0; u < 8; ++u) {
    const int t = 8 * J + u;  // values 4t .. 4t + 3 of each row
    // Decode prefetches the block in 16 parts, one every 4 steps (a sub-block's
    // part at its first step streamed 48-55 GB/s against 60-66, BM_DecodeStep
    // on a 2-core Zen 5).
    if constexpr (R == 1) {
      if (u % 4 == 0) prefetch_part<sizeof blk, 16, kQ5kxPrefetchAhead>(&blk, t / 4);
    }
    const I p = V::loadu_i(blk.qs[t % 32]);
    const I lo4 = J < 4 ? V::and_i(p, m4) : V::and_i(V::srli4_16(p), m4);
    const I h = V::loadu_i(blk.qh[u]);
    I b5;
    if constexpr (J < 4) b5 = V::and_i(V::template slli16<4 - J>(h), m10);
    else if constexpr (J == 4) b5 = V::and_i(h, m10);
    else b5 = V::and_i(V::template srli16<J - 4>(h), m10);
    const I q = V::or_i(lo4, b5);
    PC_UNROLL for (int i = 0; i < R; ++i) s[i] = V::dpbusd_u7(s[i], q, V::bcast32_i(x[i] + 4 * t));
  }
  const I sc = V::and_i(V::zx8_32(blk.scm[J]), V::set1_i(63));
  PC_UNROLL for (int i = 0; i < R; ++i) isum[i] = V::add32(isum[i], V::mullo32(s[i], sc));
}

// Prompts (R > 1), and decode at the AVX-VNNI level (AVX2 alone takes
// V512Emu::k45x_row_block): sub-blocks J and J + 4 of
// a Q5_K_X16 block together, J = 0..3 in a loop. Both take their codes from
// the same qs vectors (J the low nibbles, J + 4 the high ones) and bits J and
// J + 4 of the same qh vectors, so each qs load serves two code vectors, and
// each row has two independent vpdpbusd chains (2R in flight hide the
// instruction's ~5-cycle latency at 2 a cycle). The integers are q5kx_sub's,
// summed in int32 (exact: the order changes no bit). Against the fully
// unrolled q5kx_sub (one chain a row, registers spilled) a prompt's Q5_K
// matmuls run 1.2× faster on a Zen 5 (1.3× on its AVX2 backend) and AVX2
// decode 1.2×; AVX-512 decode keeps q5kx_sub, as fast there with its tuned
// prefetches. Decode prefetches the block in 16 parts, one every 2 steps.
template <class V, int R>
inline void q5kx_pairs(const BlockQ5_KX16& blk, const int8_t* const* x, typename V::I* isum, typename V::I m4,
                       bool pf) {
  using I = typename V::I;
  const I m10 = V::set1_i(0x10101010), m63 = V::set1_i(63);
#pragma GCC unroll 1
  for (int J = 0; J < 4; ++J) {
    I s0[R], s1[R];
    PC_UNROLL for (int i = 0; i < R; ++i) s0[i] = s1[i] = V::zero_i();
    PC_UNROLL for (int u = 0; u < 8; ++u) {
      if (R == 1 || pf) {
        if (u % 2 == 0) prefetch_part<sizeof blk, 16>(&blk, 4 * J + u / 2);
      }
      // values 32J + 4u .. + 3 (q0) and 128 + 32J + 4u .. + 3 (q1) of each row
      const I p = V::loadu_i(blk.qs[8 * J + u]);
      const I h = V::loadu_i(blk.qh[u]);
      const I q0 = V::or_i(V::and_i(p, m4), V::and_i(V::sll16_2(h, 4 - J, 4 - J), m10));
      const I q1 = V::or_i(V::and_i(V::srli4_16(p), m4), V::and_i(V::srl16_2(h, J, J), m10));
      PC_UNROLL for (int i = 0; i < R; ++i) {
        s0[i] = V::dpbusd_u7_at(s0[i], q0, x[i] + 32 * J + 4 * u);
        s1[i] = V::dpbusd_u7_at(s1[i], q1, x[i] + 128 + 32 * J + 4 * u);
      }
    }
    const I sc0 = V::and_i(V::zx8_32(blk.scm[J]), m63), sc1 = V::and_i(V::zx8_32(blk.scm[J + 4]), m63);
    PC_UNROLL for (int i = 0; i < R; ++i)
      isum[i] = V::add32(isum[i], V::add32(V::mullo32(s0[i], sc0), V::mullo32(s1[i], sc1)));
  }
}

// The AVX2 backend's 8-lane tiles (V256Half, which has kQ5Quarters): Q5_K_X16
// sub-blocks J and J + 4 (J = 0..3, from the same qs and qh vectors as in
// q5kx_pairs) a 16-value quarter at a time, each quarter's 4 steps summed in
// int16 words and multiplied by the scale with one vpmaddwd (steps_scaled<4,
// 31>: 4 · 2 · 31 · 127 < 2^15) instead of a vpmaddwd a step and a vpmulld a
// sub-block (with AVX-VNNI, steps_scaled is a vpdpbusd chain and a vpmulld a
// quarter); J's codes are formed and used before J + 4's, so 4 code vectors
// and 6 rows' sums fit the 16 registers. The same integers as q5kx_pairs.
// Streamed tiles (pf) prefetch the block in 8 parts, one a half quarter: a
// decode step of 2-32 sequences at the AVX2 level 1.1-1.6x (tinyllama shape,
// 2 threads, Zen 3: 2 rows 1.54x, 4 1.58x, 8 1.25x, 16 1.13x, 32 1.11x).
// (The 16-lane AVX2 decode tile measured no faster this way: 58.5-62.7
// against 62.0-62.7 tok/s, tinyllama Q5_K_M, 3 alternating rounds.)
template <class V, int R>
inline void q5kx_quarters(const BlockQ5_KX16& blk, const int8_t* const* x, typename V::I* isum, typename V::I m4,
                          bool pf) {
  using I = typename V::I;
  const I m10 = V::set1_i(0x10101010), m63 = V::set1_i(63);
#pragma GCC unroll 1
  for (int J = 0; J < 4; ++J) {
    const I sc0 = V::template scale_for<4, 31>(V::and_i(V::zx8_32(blk.scm[J]), m63));
    const I sc1 = V::template scale_for<4, 31>(V::and_i(V::zx8_32(blk.scm[J + 4]), m63));
    PC_UNROLL for (int hh = 0; hh < 2; ++hh) {
      if (pf) prefetch_part<sizeof blk, 8>(&blk, 2 * J + hh);
      I q[4];
      PC_UNROLL for (int tt = 0; tt < 4; ++tt) {  // sub-block J: the low nibbles, bit J
        const int u = 4 * hh + tt;
        q[tt] = V::or_i(V::and_i(V::loadu_i(blk.qs[8 * J + u]), m4), V::and_i(V::sll16_2(V::loadu_i(blk.qh[u]), 4 - J, 4 - J), m10));
      }
      PC_UNROLL for (int i = 0; i < R; ++i) isum[i] = V::template steps_scaled<4, 31>(isum[i], q, x[i] + 32 * J + 16 * hh, sc0);
      PC_UNROLL for (int tt = 0; tt < 4; ++tt) {  // sub-block J + 4: the high nibbles, bit J + 4
        const int u = 4 * hh + tt;
        q[tt] = V::or_i(V::and_i(V::srli4_16(V::loadu_i(blk.qs[8 * J + u])), m4), V::and_i(V::srl16_2(V::loadu_i(blk.qh[u]), J, J), m10));
      }
      PC_UNROLL for (int i = 0; i < R; ++i)
        isum[i] = V::template steps_scaled<4, 31>(isum[i], q, x[i] + 128 + 32 * J + 16 * hh, sc1);
    }
  }
}

// y[r..r+R) × the 16 columns of weight group g, Q4_K_X16 (kQ5 false) or
// Q5_K_X16 weights (the same header; the isum of Q5_K's 5-bit codes as
// q5kx_sub forms it, the msum and the float part alike).
template <class V, int R, bool kQ5>
void k45x_tile16(const MatmulArgs& a, int64_t r, int64_t g) {
  const bool pf = a.stream;  // several rows prefetch as one row always does
  using I = typename V::I;
  using F = typename V::F;
  const int64_t nb = a.k / 256;
  using B = std::conditional_t<kQ5, BlockQ5_KX16, BlockQ4_KX16>;
  const auto* w = reinterpret_cast<const B*>(a.w + g * kX16Rows * a.row_bytes);
  ActRows<R, 256, 16> xr(a, r, a.al.bsum32_off);  // the sums of 32
  const I m4 = V::set1_i(0x0F0F0F0F);
  // AVX2 decode: the block's isum and msum in one function (simd16_emu.h,
  // V512Emu::k45x_row_block)
  constexpr bool kRowBlock = R == 1 && requires { V::kK45RowBlock; };
  F acc[R];
  PC_UNROLL for (int i = 0; i < R; ++i) acc[i] = V::zero_f();
  for (int64_t b = 0; b < nb; ++b) {
    const B& blk = w[b];
    const int8_t* x[R];
    const int16_t* xs32[R];
    PC_UNROLL for (int i = 0; i < R; ++i) {
      x[i] = xr.bytes(i);
      xs32[i] = xr.sums(i);
    }
    I isum[R], msum[R];
    PC_UNROLL for (int i = 0; i < R; ++i) isum[i] = msum[i] = V::zero_i();
    if constexpr (kRowBlock) {
      V::k45x_row_block(blk, x[0], xs32[0], isum[0], msum[0]);
    } else if constexpr (kQ5 && requires { V::kQ5Quarters; }) {
      q5kx_quarters<V, R>(blk, x, isum, m4, pf);
    } else if constexpr (kQ5 && (R > 1 || V::kFewRegs)) {
      q5kx_pairs<V, R>(blk, x, isum, m4, pf);
    } else if constexpr (kQ5) {
      q5kx_sub<V, R, 0>(blk, x, isum, m4);
      q5kx_sub<V, R, 1>(blk, x, isum, m4);
      q5kx_sub<V, R, 2>(blk, x, isum, m4);
      q5kx_sub<V, R, 3>(blk, x, isum, m4);
      q5kx_sub<V, R, 4>(blk, x, isum, m4);
      q5kx_sub<V, R, 5>(blk, x, isum, m4);
      q5kx_sub<V, R, 6>(blk, x, isum, m4);
      q5kx_sub<V, R, 7>(blk, x, isum, m4);
    } else {
      q4kx_half<V, R, 0>(blk, x, isum, m4, pf);
      q4kx_half<V, R, 1>(blk, x, isum, m4, pf);
    }
    if constexpr (!kRowBlock) {
      // mn_2q in the low int16 word of each lane and mn_2q+1 in the high one
      // (each: the top 2 bits from scm, the low 4 from a nibble of mnl), so one
      // vpdpwssd (AVX2: vpmaddwd and an add) with the pair of the row's sums of
      // 32 (ActLayout::bsum32_off) adds both sub-blocks' products: 4 a block
      // and row where the sums of 16 took 8 (AVX2 prompts 1.08x, Zen 3).
      I mn[4];
      PC_UNROLL for (int q = 0; q < 4; ++q) {
        const I nib = V::zx8_32(blk.mnl[q]);
        const I m0 = V::or_i(V::template slli32<4>(V::template srli32<6>(V::zx8_32(blk.scm[2 * q]))),
                             V::and_i(nib, V::set1_i(15)));
        const I m1 = V::or_i(V::template slli32<4>(V::template srli32<6>(V::zx8_32(blk.scm[2 * q + 1]))),
                             V::template srli32<4>(nib));
        mn[q] = V::or_i(m0, V::template slli32<16>(m1));
      }
      PC_UNROLL for (int i = 0; i < R; ++i)
        PC_UNROLL for (int q = 0; q < 4; ++q)
          msum[i] = V::dpwssd_at(msum[i], mn[q], xs32[i] + 2 * q);
    }
    const F d = V::load_h16(blk.d), dmin = V::load_h16(blk.dmin);
    PC_UNROLL for (int i = 0; i < R; ++i) {
      const F dx = V::set1_f(xr.scale(i));
      acc[i] = V::add(acc[i], V::mul(V::mul(d, dx), V::cvt(isum[i])));
      acc[i] = V::sub(acc[i], V::mul(V::mul(dmin, dx), V::cvt(msum[i])));
    }
    xr.next();
  }
  PC_UNROLL for (int i = 0; i < R; ++i) V::storeu_f(a.y + (r + i) * a.ldy + g * kX16Rows, acc[i]);
}

// ---- Q6_K_X16: 16 interleaved rows a vector (weight_repack.h) -------------
// As in Q4_K_X16, lane c of every vector is column 16g + c. Per block and
// row of x, for each sub-block j (16 values, 4 vectors of 4 values a lane):
//   s = the 16 products code · x of the 6-bit codes 0..63: 4 vpdpbusd with
//       the activation bytes broadcast (|s| < 16 · 63 · 128 < 2^17),
//   isum += s · sc_j (vpmulld, the scale sign-extended to the lane; on the
//   AVX2 backend two vpmaddwd on pairs of steps' int16 sums: V::steps_scaled);
// then isum −= 32 · (the sum over j of sc_j · bs_j) (the codes' offset of 32:
// 8 vpdpwssd on scale pairs with pairs of the activation sums of 16
// broadcast): the exact integer of dot_q6_k (matmul_scalar.cc); then its
// float operation per lane, acc = acc + (d·d_x)·float(isum).

// Sub-blocks 4S .. 4S + 3 of block blk for R rows (S selects the qh field and
// the ql nibble at compile time): isum[i] += each one's 16-product sum · its
// scale.
template <class V, int R, int S>
inline void q6kx_quarter(const BlockQ6_KX16& blk, const int8_t* const* x, typename V::I* isum, bool pf) {
  using I = typename V::I;
  const I m4 = V::set1_i(0x0F0F0F0F), m30 = V::set1_i(0x30303030);
#pragma GCC unroll 1
  for (int jj = 0; jj < 4; ++jj) {
    if (R == 1 || pf) prefetch_part<sizeof blk, 16>(&blk, 4 * S + jj);
    I q[4];
    PC_UNROLL for (int tt = 0; tt < 4; ++tt) {
      const int t = 16 * S + 4 * jj + tt;  // values 4t .. 4t + 3 of each row
      const I l = V::loadu_i(blk.ql[t % 32]);
      const I h = V::loadu_i(blk.qh[t % 16]);
      const I lo4 = S < 2 ? V::and_i(l, m4) : V::and_i(V::srli4_16(l), m4);
      I hi2;
      if constexpr (S == 0) hi2 = V::and_i(V::template slli16<4>(h), m30);
      else if constexpr (S == 1) hi2 = V::and_i(V::template slli16<2>(h), m30);
      else if constexpr (S == 2) hi2 = V::and_i(h, m30);
      else hi2 = V::and_i(V::template srli16<2>(h), m30);
      q[tt] = V::or_i(lo4, hi2);
    }
    const I sc = V::template scale_for<4, 63>(V::sx8_32(blk.sc[4 * S + jj]));
    PC_UNROLL for (int i = 0; i < R; ++i)
      isum[i] = V::template steps_scaled<4, 63>(isum[i], q, x[i] + 64 * S + 16 * jj, sc);
  }
}

// y[r..r+R) × the 16 columns of weight group g.
template <class V, int R>
void q6kx_tile16(const MatmulArgs& a, int64_t r, int64_t g) {
  const bool pf = a.stream;  // several rows prefetch as one row always does
  using I = typename V::I;
  using F = typename V::F;
  const int64_t nb = a.k / 256;
  const auto* w = reinterpret_cast<const BlockQ6_KX16*>(a.w + g * kX16Rows * a.row_bytes);
  ActRows<R, 256, 32> xr(a, r, a.al.bsum_off);  // the sums of 16
  F acc[R];
  PC_UNROLL for (int i = 0; i < R; ++i) acc[i] = V::zero_f();
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ6_KX16& blk = w[b];
    const int8_t* x[R];
    PC_UNROLL for (int i = 0; i < R; ++i) x[i] = xr.bytes(i);
    I isum[R];
    PC_UNROLL for (int i = 0; i < R; ++i) isum[i] = V::zero_i();
    q6kx_quarter<V, R, 0>(blk, x, isum, pf);
    q6kx_quarter<V, R, 1>(blk, x, isum, pf);
    q6kx_quarter<V, R, 2>(blk, x, isum, pf);
    q6kx_quarter<V, R, 3>(blk, x, isum, pf);
    // Scales 2p and 2p + 1 in the low and the high word of each lane.
    I scp[8];
    PC_UNROLL for (int p = 0; p < 8; ++p)
      scp[p] = V::or_i(V::and_i(V::sx8_32(blk.sc[2 * p]), V::set1_i(0xFFFF)),
                       V::template slli32<16>(V::sx8_32(blk.sc[2 * p + 1])));
    const F d = V::load_h16(blk.d);
    PC_UNROLL for (int i = 0; i < R; ++i) {
      I bsum = V::zero_i();
      const int16_t* xb = xr.sums(i);
      PC_UNROLL for (int p = 0; p < 8; ++p) bsum = V::dpwssd_at(bsum, scp[p], xb + 2 * p);
      const I tot = V::sub32(isum[i], V::slli32_5(bsum));
      const F dx = V::set1_f(xr.scale(i));
      acc[i] = V::add(acc[i], V::mul(V::mul(d, dx), V::cvt(tot)));
    }
    xr.next();
  }
  PC_UNROLL for (int i = 0; i < R; ++i) V::storeu_f(a.y + (r + i) * a.ldy + g * kX16Rows, acc[i]);
}

// ---- The 32-value X16 layouts: Q8_0_X16, Q4_0_X16, Q5_0_X16, Q4_1_X16,
// Q5_1_X16, IQ4_NL_X16, MXFP4_X16 (weight_repack.h) ---------------------------
// Lane c of every vector is column 16g + c. Per block (32 values) and row of
// x: s = the 32 products' sum of the codes with the activation bytes, 8
// vpdpbusd with the 4 bytes of each step broadcast, less off · (the block's
// activation sum):
//   Q8_0: codes = value + 128 (0..255), off = 128; the AVX2 backend instead
//         sums the signed products directly (V::kQ8xBiased false, off 0);
//   IQ4_NL / MXFP4: the nibbles looked up in the format's table (one byte
//         shuffle a vector) as value + 128, off = 128 (AVX2: the values
//         themselves, as Q8_0's);
//   Q4_0: codes 0..15 = value + 8, off = 8; Q5_0: codes 0..31 (the fifth bit
//         from qh) = value + 16, off = 16; Q4_1 / Q5_1: the codes are the
//         values, off = 0; AVX2 adds their vpmaddubsw pair sums in int16
//         words first (V::steps_sum);
// the exact integer of the scalar dot (matmul_scalar.cc); then its float
// operations per lane, acc = acc + (d·d_x)·float(s) (MXFP4: d the E8M0
// scale's half), and for Q4_1 / Q5_1 then acc = acc + (m·d_x)·float(the
// block's activation sum). Each weight vector serves every row of the tile;
// decode is the one-row tile.
template <GgmlType T>
struct Q32X16 {
  static constexpr bool kQ8 = T == GgmlType::Q8_0_X16;
  static constexpr bool kLut = T == GgmlType::IQ4_NL_X16 || T == GgmlType::MXFP4_X16;
  static constexpr bool kQ5 = T == GgmlType::Q5_0_X16 || T == GgmlType::Q5_1_X16;
  static constexpr bool kMin = T == GgmlType::Q4_1_X16 || T == GgmlType::Q5_1_X16;
  using Block = std::conditional_t<
      kQ8, BlockQ8_0X16,
      std::conditional_t<
          T == GgmlType::Q4_0_X16, BlockQ4_0X16,
          std::conditional_t<
              T == GgmlType::Q5_0_X16, BlockQ5_0X16,
              std::conditional_t<
                  T == GgmlType::Q4_1_X16, BlockQ4_1X16,
                  std::conditional_t<T == GgmlType::Q5_1_X16, BlockQ5_1X16,
                                     std::conditional_t<T == GgmlType::IQ4_NL_X16, BlockIQ4_NLX16, BlockMXFP4X16>>>>>>;
  // How the tiles hold a block: Q8_0_X16's d and qs where its runs put them
  // (weight_repack.h), the other types' blocks in place.
  using Ref = std::conditional_t<kQ8, Q8X16Block, const Block&>;
  // The offset taken off with the activation sum, on backend V.
  template <class V>
  static constexpr int off() {
    if constexpr (kQ8 || kLut) return V::kQ8xBiased ? 128 : 0;
    else if constexpr (T == GgmlType::Q4_0_X16) return 8;
    else if constexpr (T == GgmlType::Q5_0_X16) return 16;
    else return 0;
  }
};

// Decode's one-row tile of the 32-value layouts on the AVX2-level backends
// (V::kFewRegs: the 16-lane emulation the AVX2 and AVX-VNNI sets run the X16
// layouts on) reads this many groups side by side, each its own stream of
// weights. These tiles keep no prefetch (q32x_tile16), and one stream of
// short blocks left the hardware's prefetch short of the bandwidth: on a
// 2-core Zen 3 (AVX2), the tinyllama shape's decode matmuls on Q8_0_X16 read
// 1.10-1.16x as fast (two series of 7-9 in-process pairs, 27.1 -> 30.7 GB/s
// against a probed 28-34) and whole decode ran 1.13x as fast (tinyllama Q8_0,
// 5 alternating pairs: 72-80 % -> 83-93 % of the probed bandwidth). (The
// K-quant X16 decode tiles, which prefetch, read 0.77-0.93x as fast with two
// groups on that Zen 3.) The AVX-512 tiles keep one group a tile: with two,
// the same matmuls on a 2-core Zen 5 read Q8_0_X16 1.01x as fast, Q4_0_X16
// 0.80x and IQ4_NL_X16 0.78x (9 in-process rounds alternating, the same bits).
inline constexpr int kQ32DecodeGroups = 2;

// A 16-entry int8 table in every 128-bit lane, as V's q8x_dot reads codes:
// value + 128 where the backend's dot is biased (V::kQ8xBiased), else the value.
template <class V>
inline typename V::I code_table(const int8_t (&values)[16]) {
  alignas(16) uint8_t t[16];
  for (int i = 0; i < 16; ++i) t[i] = uint8_t(uint8_t(values[i]) ^ (V::kQ8xBiased ? 0x80 : 0));
  return V::bcast128_i(t);
}

// The codes of 4 bytes of nibbles a lane (qs[t], t = 0..3): step t's (values
// 4t .. 4t + 3 of each row) from the low nibbles, step t + 4's from the high
// ones; looked up in `table` when kLut.
template <class V, bool kLut>
inline void nibble_codes(const uint8_t (*qs)[64], typename V::I* q, typename V::I table) {
  using I = typename V::I;
  const I m4 = V::set1_i(0x0F0F0F0F);
  PC_UNROLL for (int t = 0; t < 4; ++t) {
    const I p = V::loadu_i(qs[t]);
    q[t] = V::and_i(p, m4);
    q[t + 4] = V::and_i(V::srli4_16(p), m4);
    if constexpr (kLut) {
      q[t] = V::lut16(table, q[t]);
      q[t + 4] = V::lut16(table, q[t + 4]);
    }
  }
}

// Step u's codes (values 4u .. 4u + 3 of each row) of a block, u = 0..7.
template <class V, GgmlType T>
inline void q32x_codes(typename Q32X16<T>::Ref blk, typename V::I* q, typename V::I table) {
  using I = typename V::I;
  if constexpr (Q32X16<T>::kQ8) {
    PC_UNROLL for (int u = 0; u < 8; ++u) q[u] = V::q8x_prep(V::loadu_i(blk.qs[u]));
  } else {
    nibble_codes<V, Q32X16<T>::kLut>(blk.qs, q, table);
    if constexpr (Q32X16<T>::kQ5) {  // bit u of each qh byte to bit 4 of step u's codes
      const I h = V::loadu_i(blk.qh), m10 = V::set1_i(0x10101010);
      q[0] = V::or_i(q[0], V::and_i(V::template slli16<4>(h), m10));
      q[1] = V::or_i(q[1], V::and_i(V::template slli16<3>(h), m10));
      q[2] = V::or_i(q[2], V::and_i(V::template slli16<2>(h), m10));
      q[3] = V::or_i(q[3], V::and_i(V::template slli16<1>(h), m10));
      q[4] = V::or_i(q[4], V::and_i(h, m10));
      q[5] = V::or_i(q[5], V::and_i(V::template srli16<1>(h), m10));
      q[6] = V::or_i(q[6], V::and_i(V::template srli16<2>(h), m10));
      q[7] = V::or_i(q[7], V::and_i(V::template srli16<3>(h), m10));
    }
  }
}

// The 8 steps' sum of a block's codes q with the 32 activation bytes at x.
template <class V, GgmlType T>
inline typename V::I q32x_sum(const typename V::I* q, const int8_t* x) {
  using I = typename V::I;
  if constexpr (Q32X16<T>::kQ8 || Q32X16<T>::kLut) {
    I s = V::q8x_dot(V::zero_i(), q[0], x);
    PC_UNROLL for (int u = 1; u < 8; ++u) s = V::q8x_dot(s, q[u], x + 4 * u);
    return s;
  } else {
    return V::template steps_sum<8, Q32X16<T>::kQ5 ? 31 : 15>(V::zero_i(), q, x);
  }
}

// The block sums of q32x_sum for R rows with few registers (V::kFewRegs;
// Q8_0 and the table types, whose steps are summed one by one anyway), and
// for the table types' decode rows: each step's codes formed just before use
// instead of all 8 first (which would spill), the low and high nibbles' steps
// (Q8_0: steps 0-3 and 4-7) in two chains, then added: the same integers.
// Q8_0 prompt tiles (R > 1) on AVX-512 too: two chains a row measured
// 1.03-1.04x in 3 paired runs (Zen 5). (IQ4_NL decode with two chains:
// 1.04-1.13x in 3 pairs; Q8_0 decode: no gain.)
template <class V, int R, GgmlType T>
inline void q32x_sums_few_regs(typename Q32X16<T>::Ref blk, typename V::I table, const int8_t* const* xq,
                               int64_t bo, typename V::I* sums) {
  using I = typename V::I;
  I lo_s[R], hi_s[R];
  PC_UNROLL for (int i = 0; i < R; ++i) lo_s[i] = hi_s[i] = V::zero_i();
  const I m4 = V::set1_i(0x0F0F0F0F);
  PC_UNROLL for (int t = 0; t < 4; ++t) {
    I lo, hi;
    if constexpr (Q32X16<T>::kQ8) {
      lo = V::q8x_prep(V::loadu_i(blk.qs[t]));
      hi = V::q8x_prep(V::loadu_i(blk.qs[t + 4]));
    } else {
      const I p = V::loadu_i(blk.qs[t]);
      lo = V::lut16(table, V::and_i(p, m4));
      hi = V::lut16(table, V::and_i(V::srli4_16(p), m4));
    }
    PC_UNROLL for (int i = 0; i < R; ++i) {
      lo_s[i] = V::q8x_dot(lo_s[i], lo, xq[i] + bo + 4 * t);
      hi_s[i] = V::q8x_dot(hi_s[i], hi, xq[i] + bo + 16 + 4 * t);
    }
  }
  PC_UNROLL for (int i = 0; i < R; ++i) sums[i] = V::add32(lo_s[i], hi_s[i]);
}

// y[r..r+R) × the 16 columns of each of the G weight groups g .. g + G - 1,
// block by block across the groups (each group's float operations per lane in
// its own order, so the bits are those of one group a tile). AVX2-level
// decode (one row) runs two groups side by side (kQ32DecodeGroups): two
// weight streams in flight instead of one.
template <class V, int R, GgmlType T, int G = 1>
void q32x_tile16(const MatmulArgs& a, int64_t r, int64_t g) {
  static_assert(G == 1 || R == 1, "groups side by side: decode's one-row tile");
  using I = typename V::I;
  using F = typename V::F;
  using X = Q32X16<T>;
  using B = typename X::Block;
  constexpr int kOff = X::template off<V>();
  const int64_t nb = a.k / 32, row_blocks = a.row_bytes / int64_t(sizeof(B) / kX16Rows);
  const uint8_t* w[G];
  PC_UNROLL for (int j = 0; j < G; ++j) w[j] = a.w + (g + j) * kX16Rows * a.row_bytes;
  ActRows<R, 32, 2> xr(a, r, a.al.bsum_off);  // one sum a block
  // The block's offset term, s - kOff · (activation sum), as one vpdpwssd of
  // the pair of int16 sums ending at the block's (words 0 and -kOff).
  const I neg_off = V::set1_i(int32_t(uint32_t(uint16_t(int16_t(-kOff))) << 16));
  I table = V::zero_i();
  if constexpr (T == GgmlType::IQ4_NL_X16) table = code_table<V>(kIq4nlValues);
  if constexpr (T == GgmlType::MXFP4_X16) table = code_table<V>(kMxfp4Values);
  F acc[G][R];
  PC_UNROLL for (int j = 0; j < G; ++j) PC_UNROLL for (int i = 0; i < R; ++i) acc[j][i] = V::zero_f();
  const bool pf = R > 1 && a.stream;  // (R == 1: see below)
  // The current block of each group (at[j]: Q8_0_X16's block, else a
  // pointer to it), at the activations' current block (xr).
  auto step = [&](const auto* at) __attribute__((always_inline)) {
    PC_UNROLL for (int j = 0; j < G; ++j) {
      typename X::Ref blk = [&]() -> typename X::Ref {
        if constexpr (X::kQ8) return at[j];
        else return *at[j];
      }();
      // Streamed tiles of several rows prefetch the block 8 KiB ahead (a
      // decode step of 4 sequences on Q8_0_X16 1.3-1.6x); decode's one row
      // does not: with it tinyllama Q8_0 decoded 0.93-0.98x as fast (4 series
      // of pairs, 2-core Zen 5), the hardware's prefetch keeping up with these
      // short blocks (with the two streams of kQ32DecodeGroups, AVX2 on Zen 3:
      // 0.93x).
      if (pf) {
        if constexpr (X::kQ8) prefetch_block<sizeof(B)>(blk.qs);  // the runs: about as far into the stream
        else prefetch_block<sizeof(B)>(&blk);
      }
      I sums[R];
      if constexpr (((V::kFewRegs || R > 1) && X::kQ8) || ((V::kFewRegs || R == 1) && X::kLut)) {
        q32x_sums_few_regs<V, R, T>(blk, table, xr.xq, xr.bo, sums);
      } else {
        I q[8];
        q32x_codes<V, T>(blk, q, table);
        PC_UNROLL for (int i = 0; i < R; ++i) sums[i] = q32x_sum<V, T>(q, xr.bytes(i));
      }
      F d, mn = V::zero_f();
      if constexpr (T == GgmlType::MXFP4_X16) d = V::e8m0_half16(blk.e);
      else d = V::load_h16(blk.d);
      if constexpr (X::kMin) mn = V::load_h16(blk.m);
      PC_UNROLL for (int i = 0; i < R; ++i) {
        const int16_t* xs = xr.sums(i);  // this block's sum at xs[0]
        I s = sums[i];
        if constexpr (kOff != 0) s = V::dpwssd_at(s, neg_off, xs - 1);
        const F dx = V::set1_f(xr.scale(i));
        acc[j][i] = V::add(acc[j][i], V::mul(V::mul(d, dx), V::cvt(s)));
        if constexpr (X::kMin)
          acc[j][i] = V::add(acc[j][i], V::mul(V::mul(mn, dx), V::set1_f(float(xs[0]))));
      }
    }
  };
  if constexpr (X::kQ8) {
    // Block by block with a pointer to each group's current d and qs: the
    // next block's are 32 and 512 bytes on within a run of kQ8X16Run, the
    // next run starts after the last qs, and its qs after its d arrays
    // (row_blocks may end in a shorter run). Offsets recomputed from b each
    // block, or a loop over runs around one over their blocks, held more
    // values than the registers and made a prompt's Q8_0 matmuls 0.92-0.95x
    // as fast (AVX-512, whose prompt tiles are near their load ports' rate).
    // (Runs start at multiples of kQ8X16Run; only the last is shorter.)
    static_assert((kQ8X16Run & (kQ8X16Run - 1)) == 0, "run ends found by a mask");
    const uint8_t* pd[G];
    const uint8_t* pq[G];
    PC_UNROLL for (int j = 0; j < G; ++j) {
      pd[j] = w[j];
      pq[j] = w[j] + 32 * (row_blocks < kQ8X16Run ? row_blocks : kQ8X16Run);
    }
    for (int64_t b = 0; b < nb; ++b) {
      Q8X16Block at[G];
      PC_UNROLL for (int j = 0; j < G; ++j) at[j] = {reinterpret_cast<const uint16_t*>(pd[j]), reinterpret_cast<const uint8_t (*)[64]>(pq[j])};
      step(at);
      xr.next();
      if (((b + 1) & (kQ8X16Run - 1)) != 0) {
        PC_UNROLL for (int j = 0; j < G; ++j) {
          pd[j] += 32;
          pq[j] += 512;
        }
      } else {
        const int64_t n = row_blocks - b - 1 < kQ8X16Run ? row_blocks - b - 1 : kQ8X16Run;
        PC_UNROLL for (int j = 0; j < G; ++j) {
          pd[j] = pq[j] + 512;
          pq[j] = pd[j] + 32 * n;
        }
      }
    }
  } else {
    for (int64_t b = 0; b < nb; ++b) {
      const B* at[G];
      PC_UNROLL for (int j = 0; j < G; ++j) at[j] = reinterpret_cast<const B*>(w[j]) + b;
      step(at);
      xr.next();
    }
  }
  PC_UNROLL for (int j = 0; j < G; ++j)
    PC_UNROLL for (int i = 0; i < R; ++i) V::storeu_f(a.y + (r + i) * a.ldy + (g + j) * kX16Rows, acc[j][i]);
}

// ---- IQ4_XS_X16: 256-value blocks of 8 sub-blocks, 16 interleaved rows a
// vector (weight_repack.h) ---------------------------------------------------
// Lane c of every vector is column 16g + c. Per block, sub-block s and row of
// x: s_s = the 32 products of the looked-up codes (IQ4_NL_X16's) with the
// activation bytes, less 128 · (the sub-block's activation sum, two sums of
// 16) on the biased backend; isum += s_s · (ls_s − 32) (vpmulld, ls_s the
// lane's 6-bit scale from sl and sh); the exact integer of dot_iq4_xs
// (|s_s| < 32 · 127 · 128, |isum| < 2^28), then its float operation per
// lane, acc = acc + (d·d_x)·float(isum).
// With few registers (V::kFewRegs: AVX2's 16, where a sub-block's 8 code
// vectors held at once would spill) each step's codes are formed just before
// use, the low and high nibbles' steps summed apart (two chains), then added;
// otherwise the 8 code vectors first, then one chain a row.
template <class V, int R, int S>
inline void iq4xs_sub(const BlockIQ4_XSX16& blk, const int8_t* const* x, const int16_t* const* xb,
                      typename V::I sh, typename V::I table, typename V::I* isum, bool pf) {
  using I = typename V::I;
  if (R == 1 || pf) prefetch_part<sizeof blk, 8>(&blk, S);
  I lo_s[R], hi_s[R];
  PC_UNROLL for (int i = 0; i < R; ++i) lo_s[i] = hi_s[i] = V::zero_i();
  if constexpr (V::kFewRegs) {
    const I m4 = V::set1_i(0x0F0F0F0F);
    PC_UNROLL for (int t = 0; t < 4; ++t) {
      const I p = V::loadu_i(blk.qs[4 * S + t]);
      const I lo = V::lut16(table, V::and_i(p, m4)), hi = V::lut16(table, V::and_i(V::srli4_16(p), m4));
      PC_UNROLL for (int i = 0; i < R; ++i) {
        lo_s[i] = V::q8x_dot(lo_s[i], lo, x[i] + 32 * S + 4 * t);
        hi_s[i] = V::q8x_dot(hi_s[i], hi, x[i] + 32 * S + 16 + 4 * t);
      }
    }
  } else {
    I q[8];
    nibble_codes<V, true>(blk.qs + 4 * S, q, table);
    PC_UNROLL for (int i = 0; i < R; ++i)
      PC_UNROLL for (int u = 0; u < 8; ++u) lo_s[i] = V::q8x_dot(lo_s[i], q[u], x[i] + 32 * S + 4 * u);
  }
  const I lsl = V::and_i(V::template srli32<4 * (S % 2)>(V::zx8_32(blk.sl[S / 2])), V::set1_i(15));
  const I lsh = V::template slli32<4>(V::and_i(V::template srli32<2 * S>(sh), V::set1_i(3)));
  const I sc = V::sub32(V::or_i(lsl, lsh), V::set1_i(32));
  PC_UNROLL for (int i = 0; i < R; ++i) {
    I s = V::add32(lo_s[i], hi_s[i]);
    // s - 128 · (the sub-block's two sums of 16): one vpdpwssd of that pair
    // against the words (-128, -128)
    if constexpr (V::kQ8xBiased) s = V::dpwssd_at(s, V::set1_i(int32_t(0xFF80FF80u)), xb[i] + 2 * S);
    isum[i] = V::add32(isum[i], V::mullo32(s, sc));
  }
}

template <class V, int R>
void iq4xs_tile16(const MatmulArgs& a, int64_t r, int64_t g) {
  const bool pf = a.stream;  // several rows prefetch as one row always does
  using I = typename V::I;
  using F = typename V::F;
  const int64_t nb = a.k / 256;
  const auto* w = reinterpret_cast<const BlockIQ4_XSX16*>(a.w + g * kX16Rows * a.row_bytes);
  ActRows<R, 256, 32> xr(a, r, a.al.bsum_off);  // the sums of 16
  const I table = code_table<V>(kIq4nlValues);
  F acc[R];
  PC_UNROLL for (int i = 0; i < R; ++i) acc[i] = V::zero_f();
  for (int64_t b = 0; b < nb; ++b) {
    const BlockIQ4_XSX16& blk = w[b];
    const int8_t* x[R];
    const int16_t* xb[R];
    PC_UNROLL for (int i = 0; i < R; ++i) {
      x[i] = xr.bytes(i);
      xb[i] = xr.sums(i);
    }
    const I sh = V::zx16_32(blk.sh);
    I isum[R];
    PC_UNROLL for (int i = 0; i < R; ++i) isum[i] = V::zero_i();
    iq4xs_sub<V, R, 0>(blk, x, xb, sh, table, isum, pf);
    iq4xs_sub<V, R, 1>(blk, x, xb, sh, table, isum, pf);
    iq4xs_sub<V, R, 2>(blk, x, xb, sh, table, isum, pf);
    iq4xs_sub<V, R, 3>(blk, x, xb, sh, table, isum, pf);
    iq4xs_sub<V, R, 4>(blk, x, xb, sh, table, isum, pf);
    iq4xs_sub<V, R, 5>(blk, x, xb, sh, table, isum, pf);
    iq4xs_sub<V, R, 6>(blk, x, xb, sh, table, isum, pf);
    iq4xs_sub<V, R, 7>(blk, x, xb, sh, table, isum, pf);
    const F d = V::load_h16(blk.d);
    PC_UNROLL for (int i = 0; i < R; ++i) {
      const F dx = V::set1_f(xr.scale(i));
      acc[i] = V::add(acc[i], V::mul(V::mul(d, dx), V::cvt(isum[i])));
    }
    xr.next();
  }
  PC_UNROLL for (int i = 0; i < R; ++i) V::storeu_f(a.y + (r + i) * a.ldy + g * kX16Rows, acc[i]);
}

// ---- decode: one activation row, one weight row at a time -----------------
// Decode streams every weight from DRAM once per token, and a core streams
// fastest reading one row after another in memory order (tiles reading 2-4
// rows side by side, each row a stream of its own, ran 1.5-2× slower from
// DRAM here although faster from L2). So a decode kernel reads one weight row
// front to back, prefetching each block's lines kDecodePrefetchAhead bytes
// ahead (prefetch_block), 64 bytes a vector: lanes 0-7 one 32-value chunk of a block,
// lanes 8-15 the next. Its int32 sums are the AVX2 kernel's for the same
// lanes split over the two halves (half 0 the even chunks, half 1 the odd
// ones), summed at the end of the block to its exact integer (any order);
// the float part is then the scalar kernel's. (The X16 layouts instead read
// 16 rows side by side from one stream: their decode is the one-row tile.)

// Word indices into a Q6_K block's 16 int16 scales (words 0-15) for a decode
// vector of 32-value vectors v = 2u and 2u + 1 (lanes 0-7 and 8-15): int32
// lane i gets scale 4u + i / 4 in its low word (the odd words are zeroed by
// words_zx).
struct Q6kRowScaleIdx {
  alignas(64) int16_t w[4][32];
  constexpr Q6kRowScaleIdx() : w() {
    for (int u = 0; u < 4; ++u)
      for (int i = 0; i < 16; ++i) w[u][2 * i] = int16_t(4 * u + i / 4);
  }
};
inline constexpr Q6kRowScaleIdx kQ6kRowScaleIdx{};

// y[r][c] of Q6_K weights as stored (the arithmetic of tile_q6_k and
// q6kx_tile16: the block's exact integer, then the scalar kernel's float part).
// Half h of a block: ql[64h, 64h + 64) holds vectors 4h (bytes 0-31, low
// nibbles), 4h + 1 (bytes 32-63, low), 4h + 2 and 4h + 3 (the same bytes'
// high nibbles); their top two bits are qh[32h, 32h + 32) >> 0, 2, 4, 6.
template <class V>
void q6k_row16(const MatmulArgs& a, int64_t r, int64_t c) {
  using I = typename V::I;
  const int64_t nb = a.k / 256;
  const BlockQ6_K* w = reinterpret_cast<const BlockQ6_K*>(a.w + c * a.row_bytes);
  const int8_t* xq = a.xq(r);
  const float* xd = a.xd(r);
  const int16_t* xb = a.xbs(r);
  const I m4 = V::dup256_i(_mm256_set1_epi8(0x0F));
  const I m30 = V::dup256_i(_mm256_set1_epi8(0x30));
  float sum = 0.f;
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ6_K& blk = w[b];
    prefetch_block<sizeof blk>(&blk);
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales)));
    const I sct = V::dup256_i(sc16);
    I isum = V::zero_i();
    PC_UNROLL for (int h = 0; h < 2; ++h) {
      const I ql = V::loadu_i(blk.ql + 64 * h);
      const I qh = V::bcast256_i(blk.qh + 32 * h);
      const int8_t* x = xq + 256 * b + 128 * h;
      // vectors 4h, 4h + 1: low nibbles | (qh << 4, qh << 2) & 0x30
      const I q01 = V::or_i(V::and_i(ql, m4), V::and_i(V::sll16_2(qh, 4, 2), m30));
      isum = dot_scaled<V>(isum, q01, V::loadu_i(x), V::words_zx(sct, V::load_i16x32(kQ6kRowScaleIdx.w[2 * h])));
      // vectors 4h + 2, 4h + 3: high nibbles | (qh, qh >> 2) & 0x30
      const I q23 = V::or_i(V::and_i(V::srli4_16(ql), m4), V::and_i(V::srl16_2(qh, 0, 2), m30));
      isum = dot_scaled<V>(isum, q23, V::loadu_i(x + 64), V::words_zx(sct, V::load_i16x32(kQ6kRowScaleIdx.w[2 * h + 1])));
    }
    const __m256i is8 = _mm256_add_epi32(V::lo8_i(isum), V::hi8_i(isum));
    const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + 16 * b));
    const __m256i bias = _mm256_slli_epi32(_mm256_madd_epi16(bs, sc16), 5);
    sum = sum + (h2f(blk.d) * xd[b]) * float(hsum8_i32(_mm256_sub_epi32(is8, bias)));
  }
  a.y[r * a.ldy + c] = sum;
}

// y[r][c] of Q8_0 weights for rows [r0, r1), columns [c0, c1) (decode): the
// scalar kernel's value bitwise. Per column, the integer pass reads the
// weight row front to back, two blocks a vector (lanes 0-7 block b, 8-15
// block b + 1): vpdpbusd of the weights made unsigned (w xor 0x80 = w + 128)
// with x gives 4-product sums of (w + 128) · x, pairsum folds 8 vectors
// (16 blocks) into one lane a block, and subtracting 128 · (the block's sum
// of x) leaves the exact block dot product (integers: any order). The
// weights' F16 scales are copied to dw[block][column] on the way. The float
// part is q32_rows' (matmul_avx2.cc): 8 columns' sums transposed to a lane a
// column, then per block in order sum = sum + (d_w · d_x) · float(isum),
// multiply and add rounded separately, as the scalar kernel. Against the
// AVX2 row kernel (abs, sign, maddubs, madd per 32 bytes, then vphaddd
// folds) this is under half the vector instructions per weight byte, so a
// core streams the weights faster (decode is bound by this per core).
template <class V>
void q8_0_rows16(const MatmulArgs& a, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  using I = typename V::I;
  constexpr int64_t kChunk = 512;  // blocks per pass: whole rows up to k = 16384
  const int64_t nb = a.k / 32;
  alignas(64) int32_t isum[8][kChunk];
  alignas(64) uint16_t dw[kChunk][8];
  alignas(32) static const int8_t kZero32[32] = {};
  // 128 · (sum of block b's x), for blocks padded to a multiple of 16; grow-only.
  thread_local std::vector<int32_t> xs;
  const int64_t nb16 = (nb + 15) & ~int64_t(15);
  if (xs.size() < size_t(nb16)) xs.resize(size_t(nb16));
  const I bias = V::dup256_i(_mm256_set1_epi8(static_cast<char>(0x80)));
  for (int64_t r = r0; r < r1; ++r) {
    const int8_t* xq = a.xq(r);
    const float* xd = a.xd(r);
    const int16_t* xbs = a.xbs(r);  // the quantizer's sums of 32
    for (int64_t b = 0; b < nb; ++b) xs[b] = 128 * int32_t(xbs[b]);
    for (int64_t c = c0; c < c1; c += 8) {
      const BlockQ8_0* w[8];
      PC_UNROLL for (int j = 0; j < 8; ++j)
        w[j] = reinterpret_cast<const BlockQ8_0*>(a.w + (c + j < c1 ? c + j : c1 - 1) * a.row_bytes);
      __m256 acc = _mm256_setzero_ps();
      for (int64_t b0 = 0; b0 < nb; b0 += kChunk) {
        const int64_t nbc = nb - b0 < kChunk ? nb - b0 : kChunk;
        const int8_t* x = xq + 32 * b0;
        // Integer pass: column after column, each in memory order.
        PC_UNROLL for (int j = 0; j < 8; ++j) {
          const BlockQ8_0* blk = w[j] + b0;
          for (int64_t bb = 0; bb < nbc; bb += 16) {
            I v[8];
            PC_UNROLL for (int i = 0; i < 8; ++i) {
              const int64_t b = bb + 2 * i;
              if (b >= nbc) {
                v[i] = V::zero_i();
                continue;
              }
              _mm_prefetch(reinterpret_cast<const char*>(blk + b) + kDecodePrefetchAhead, _MM_HINT_T0);
              dw[b][j] = blk[b].d;
              const bool pair = b + 1 < nbc;
              if (pair) dw[b + 1][j] = blk[b + 1].d;
              // (a lone last block: the other half's lanes are never used;
              // its x read stays inside the row, whose d part starts at
              // round_up64(k) >= k + 32)
              const I wq = V::load2x256_i(blk[b].qs, pair ? blk[b + 1].qs : kZero32);
              v[i] = V::dpbusd(V::zero_i(), V::xor_i(wq, bias), V::loadu_i(x + 32 * b));
            }
            const I s = V::pairsum(V::pairsum(V::pairsum(v[0], v[1]), V::pairsum(v[2], v[3])),
                                   V::pairsum(V::pairsum(v[4], v[5]), V::pairsum(v[6], v[7])));
            V::storeu_i(&isum[j][bb], V::sub32(s, V::loadu_i(xs.data() + b0 + bb)));
          }
        }
        // Float part, block after block in order: 8 blocks' sums transposed
        // to a lane per column.
        for (int64_t bb = 0; bb < nbc; bb += 8) {
          __m256i in[8], t[8];
          PC_UNROLL for (int j = 0; j < 8; ++j) in[j] = _mm256_load_si256(reinterpret_cast<const __m256i*>(&isum[j][bb]));
          transpose8(in, t);
          const int64_t n_here = nbc - bb < 8 ? nbc - bb : 8;
          for (int64_t i = 0; i < n_here; ++i) {
            const int64_t b = bb + i;
            const __m128i dh = _mm_load_si128(reinterpret_cast<const __m128i*>(dw[b]));
            const __m256 sc = _mm256_mul_ps(_mm256_cvtph_ps(dh), _mm256_broadcast_ss(xd + b0 + b));
            acc = _mm256_add_ps(acc, _mm256_mul_ps(sc, _mm256_cvtepi32_ps(t[i])));
          }
        }
      }
      store_cols(a.y + r * a.ldy + c, acc, c1 - c);
    }
  }
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
  // anything smaller (decode: streams the weights) is q8_0_rows16 for Q8_0,
  // the AVX2 kernel for Q4_0.
  template <bool kQ4>
  static void run_task(const MatmulArgs& a, int64_t r0, int64_t r1, int64_t c0, int64_t c1, uint8_t* scratch) {
    if (r1 - r0 < kPanelRows || !a.al.x16_off) {
      if constexpr (kQ4) avx2_kernel(GgmlType::Q4_0)(a, r0, r1, c0, c1, scratch);
      else q8_0_rows16<V>(a, r0, r1, c0, c1);
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
      case GgmlType::Q4_K_X16: return run_x16<GgmlType::Q4_K_X16>;
      case GgmlType::Q6_K_X16: return run_x16<GgmlType::Q6_K_X16>;
      case GgmlType::Q5_K_X16: return run_x16<GgmlType::Q5_K_X16>;
      case GgmlType::Q8_0_X16: return run_x16<GgmlType::Q8_0_X16>;
      case GgmlType::Q4_0_X16: return run_x16<GgmlType::Q4_0_X16>;
      case GgmlType::Q5_0_X16: return run_x16<GgmlType::Q5_0_X16>;
      case GgmlType::Q4_1_X16: return run_x16<GgmlType::Q4_1_X16>;
      case GgmlType::Q5_1_X16: return run_x16<GgmlType::Q5_1_X16>;
      case GgmlType::IQ4_NL_X16: return run_x16<GgmlType::IQ4_NL_X16>;
      case GgmlType::MXFP4_X16: return run_x16<GgmlType::MXFP4_X16>;
      case GgmlType::IQ4_XS_X16: return run_x16<GgmlType::IQ4_XS_X16>;
      case GgmlType::Q6_K: return run_q6k;
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

  // The X16 layouts: groups of 16 columns outer (a group's blocks stay in
  // cache while the task's rows pass), tiles of up to V::kKxRows rows inner;
  // c0 and c1 are whole groups (matmul.cc rounds column blocks to
  // repack_group_rows).
  // The tile of R rows for layout T on backend W (V, or one of its 8-lane
  // halves), and the one of nr <= R rows.
  using KxTileFn = void (*)(const MatmulArgs&, int64_t, int64_t);
  template <class W, GgmlType T, int R>
  static constexpr KxTileFn x16_tile_of() {
    if constexpr (T == GgmlType::Q6_K_X16) return q6kx_tile16<W, R>;
    else if constexpr (T == GgmlType::IQ4_XS_X16) return iq4xs_tile16<W, R>;
    else if constexpr (T == GgmlType::Q4_K_X16 || T == GgmlType::Q5_K_X16)
      return k45x_tile16<W, R, T == GgmlType::Q5_K_X16>;
    else return q32x_tile16<W, R, T>;
  }
  template <class W, GgmlType T, int R>
  static KxTileFn x16_tile(int nr) {
    if constexpr (R == 1) return x16_tile_of<W, T, 1>();
    else return nr == R ? x16_tile_of<W, T, R>() : x16_tile<W, T, R - 1>(nr);
  }
  // The prompt tiles of 8-lane halves (V::kHalfTiles: the AVX2 backend): the
  // group's lanes 0-7 and then 8-15 for each tile of rows, up to
  // Half::kKxRows rows (the K-quants, IQ4_XS) or Half::kQ32Rows (the 32-value
  // types) a tile.
  template <GgmlType T>
  static void run_x16(const MatmulArgs& a, int64_t r0, int64_t r1, int64_t c0, int64_t c1, uint8_t*) {
    constexpr bool kQ32 = T != GgmlType::Q4_K_X16 && T != GgmlType::Q5_K_X16 && T != GgmlType::Q6_K_X16 &&
                          T != GgmlType::IQ4_XS_X16;
    if constexpr (V::kHalfTiles) {
      if (r1 - r0 > 1) {
        using H0 = typename V::template Half<0>;
        using H1 = typename V::template Half<1>;
        constexpr int kRows = kQ32 ? H0::kQ32Rows : H0::kKxRows;
        for (int64_t g = c0 / kX16Rows; g < c1 / kX16Rows; ++g)
          for (int64_t r = r0; r < r1;) {
            const int nr = static_cast<int>(r1 - r < kRows ? r1 - r : kRows);
            x16_tile<H0, T, kRows>(nr)(a, r, g);
            x16_tile<H1, T, kRows>(nr)(a, r, g);
            r += nr;
          }
        return;
      }
    }
    if constexpr (kQ32 && V::kFewRegs) {
      if (r1 - r0 == 1) {  // decode: kQ32DecodeGroups groups a tile
        constexpr int kG = kQ32DecodeGroups;
        int64_t g = c0 / kX16Rows;
        for (; g + kG <= c1 / kX16Rows; g += kG) q32x_tile16<V, 1, T, kG>(a, r0, g);
        for (; g < c1 / kX16Rows; ++g) q32x_tile16<V, 1, T>(a, r0, g);
        return;
      }
    }
    for (int64_t g = c0 / kX16Rows; g < c1 / kX16Rows; ++g)
      for (int64_t r = r0; r < r1;) {
        const int nr = static_cast<int>(r1 - r < V::kKxRows ? r1 - r : V::kKxRows);
        x16_tile<V, T, V::kKxRows>(nr)(a, r, g);
        r += nr;
      }
  }
  // Q6_K as stored (tensors not in whole groups of 16, and the token
  // embedding when the output projection is tied to it): decode rows one
  // weight row at a time, prompts the AVX2 tiles.
  static void run_q6k(const MatmulArgs& a, int64_t r0, int64_t r1, int64_t c0, int64_t c1, uint8_t* s) {
    if (r1 - r0 >= kFR) return avx2_kernel(GgmlType::Q6_K)(a, r0, r1, c0, c1, s);
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = c0; c < c1; ++c) q6k_row16<V>(a, r, c);
  }


  // The AVX2 planning but for the X16 layouts, whose tiles read the groups
  // as they are (no int16 activation copy, no panel).
  static bool is_x16(GgmlType t) { return repack_group_rows(t) > 1; }
  static bool wants_x16(GgmlType t, int64_t m) { return !is_x16(t) && avx2_wants_x16(t, m); }
  static int64_t task_col_bytes(GgmlType t, int64_t k, int64_t m) {
    return is_x16(t) ? 0 : avx2_task_col_bytes(t, k, m);
  }
  static int64_t task_scratch_bytes(GgmlType t, int64_t k, int64_t cols) {
    return is_x16(t) ? 0 : avx2_task_scratch_bytes(t, k, cols);
  }

  static KernelSet make_set(const char* name) {
    return KernelSet{name, kernel, avx2_quantize_row_fn(), wants_x16, task_scratch_bytes, task_col_bytes,
                     task_col_multiple};
  }
};

}  // namespace
}  // namespace pc::kern
