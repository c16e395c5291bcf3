// Weight layouts repacked at load for the matmul kernels in use.
//
// Q4_K_X16 (GgmlType::Q4_K_X16): Q4_K rows interleaved 16 at a time, so a
// 16-lane vector holds one value group of 16 rows (output columns) and every
// int32 lane accumulates one column's dot product. Group g (rows 16g to
// 16g + 15) occupies those 16 rows' bytes (16 × row_bytes, the same total as
// stored); its block b (values 256b to 256b + 255 of each row) is one
// BlockQ4_KX16 of 2304 bytes (16 × 144):
//   d[c], dmin[c]  F16, row c's
//   scm[j][c]      sc_j | (mn_j >> 4) << 6   (row c's 6-bit scale and min of
//                                              sub-block j = values 32j..32j+31)
//   mnl[q][c]      (mn_2q & 15) | (mn_2q+1 & 15) << 4
//   qs[t]          64 bytes: bytes 4c..4c+3 are row c's, byte 4c + i holding
//                  value 4t + i in its low nibble, 128 + 4t + i in its high
// A vector's low (high) nibbles are 4 consecutive values of each row, which
// vpdpbusd dots with 4 activation bytes broadcast to every lane: the sub-block
// scale is applied once per 16 values (vpdpwssd on each lane's 16-product sum)
// instead of once per 4, and no lane ever needs summing across. The kernels
// compute each block's exact integer sums and the scalar kernel's float
// operations (matmul_scalar.cc dot_q4_k), so every path and both layouts give
// the same bits. Only tensors whose rows (and every view's rows) come in whole
// groups of 16 are repacked.
//
// Q6_K_X16 (GgmlType::Q6_K_X16): Q6_K rows interleaved 16 at a time, one
// column an int32 lane as in Q4_K_X16; block b of group g is one
// BlockQ6_KX16 of 3360 bytes (16 × 210):
//   d[c]           F16, row c's
//   sc[j][c]       row c's int8 scale of sub-block j (values 16j..16j+15)
//   ql[t]          64 bytes: byte 4c + i holds the low 4 bits of row c's
//                  value 4t + i in its low nibble, of 128 + 4t + i in its high
//   qh[u]          64 bytes: bits 2s, 2s + 1 of byte 4c + i are the top 2 bits
//                  of row c's value 64s + 4u + i (s = 0..3)
// So the 4 values 4t + i of every row (t = 0..63) are one AND / shift of
// ql[t % 32] and one of qh[t % 16] apart, 6-bit codes 0..63 that vpdpbusd
// dots with 4 activation bytes broadcast.
//
// Q5_K_X16 (GgmlType::Q5_K_X16): Q5_K rows interleaved 16 at a time; block b
// of a group is one BlockQ5_KX16 of 2816 bytes (16 × 176): Q4_K_X16's d,
// dmin, scm, mnl and qs (the low 4 bits of each value), then
//   qh[u]          64 bytes (u = 0..7): bit s of byte 4c + i is the fifth bit
//                  of row c's value 32s + 4u + i (s = 0..7)
// so the 4 values 4t + i of every row are a nibble of qs[t % 32] (the low
// one for t < 32) and bit t / 8 of qh[t % 8]: 5-bit codes 0..31.
//
// Q8_0_X16 (GgmlType::Q8_0_X16): Q8_0 rows interleaved 16 at a time; block b
// of a group (values 32b .. 32b + 31 of each row) is a BlockQ8_0X16 of 544
// bytes (16 × 34):
//   d[c]           F16, row c's
//   qs[u]          64 bytes (u = 0..7): byte 4c + i is row c's value 4u + i
//                  plus 128 (its bits with the sign bit flipped), 0..255
// so vpdpbusd dots the unsigned codes with 4 activation bytes broadcast, and
// 128 · (the block's activation sum) taken off leaves the exact block dot.
// A group stores its blocks in runs of kQ8X16Run (the last run shorter when
// the blocks do not divide): the run's d arrays (32 bytes a block), then its
// qs arrays (512 bytes a block); q8x16_block finds block b's. A decode tile
// then meets a line of scales once a run instead of one before every block,
// and the codes lie on whole 64-byte lines. Against 544-byte blocks in a row,
// on a 2-core Zen 5 (tinyllama's decode matmuls from huge pages, 2 threads,
// both layouts in one process alternating, the same bits): AVX-512 read
// 0.97-1.15x as fast (11 series; 1.06-1.15x in half of them, 0.97-1.00x
// while the host's bandwidth was at its lowest), the AVX2 level 1.04-1.13x;
// a 512-token prompt's Q8_0 matmuls 0.99-1.00x.
//
// Q4_0_X16 / Q5_0_X16: Q4_0 / Q5_0 rows interleaved 16 at a time; block b of
// a group is one BlockQ4_0X16 of 288 bytes (16 × 18) / BlockQ5_0X16 of 352
// (16 × 22):
//   d[c]           F16, row c's
//   qh             (Q5_0) 64 bytes: bit u of byte 4c + i is the fifth bit of
//                  row c's value 4u + i (u = 0..7)
//   qs[t]          64 bytes (t = 0..3): byte 4c + i holds the low 4 bits of
//                  row c's value 4t + i in its low nibble, of 16 + 4t + i in
//                  its high nibble
// so the 4 values 4u + i of every row are a nibble of qs[u % 4] (with bit u
// of qh): codes 0..15 (0..31) that vpdpbusd dots with 4 activation bytes
// broadcast; 8 (16) · (the block's activation sum) taken off gives the exact
// block dot of the values code − 8 (code − 16).
//
// Q4_1_X16 / Q5_1_X16: Q4_1 / Q5_1 rows the same way, BlockQ4_1X16 of 320
// bytes (16 × 20) / BlockQ5_1X16 of 384 (16 × 24): d[c], then m[c] (F16, row
// c's offset), then Q5_1's qh and the qs of Q4_0_X16 / Q5_0_X16; the codes
// are the values (no offset), m · (the block's activation sum) is the float
// term the scalar kernel adds.
//
// IQ4_NL_X16 / MXFP4_X16: IQ4_NL / MXFP4 rows the same way, BlockIQ4_NLX16
// of 288 bytes (16 × 18: d[c] F16, qs as Q4_0_X16's) / BlockMXFP4X16 of 272
// (16 × 17: e[c] the E8M0 byte, then qs); the nibbles are indices into the
// format's 16-value table (kIq4nlValues, kMxfp4Values), which the kernels
// look up with one byte shuffle a vector.
//
// IQ4_XS_X16 (GgmlType::IQ4_XS_X16): IQ4_XS rows interleaved 16 at a time;
// block b of a group (values 256b .. 256b + 255) is one BlockIQ4_XSX16 of
// 2176 bytes (16 × 136):
//   d[c]           F16, row c's
//   sh[c]          row c's scales_h (2 high bits of each sub-block's scale)
//   sl[q][c]       row c's scales_l[q] (4 low bits of sub-blocks 2q, 2q + 1)
//   qs[4s + t]     64 bytes (s = 0..7 the 32-value sub-block, t = 0..3):
//                  byte 4c + i holds the index of row c's value 32s + 4t + i
//                  in its low nibble, of 32s + 16 + 4t + i in its high
// so each sub-block is an IQ4_NL_X16 block's qs, with a 6-bit scale per row.
#pragma once
#include <cstdint>

#include "gguf/types.h"

namespace pc {

struct BlockQ4_KX16 {
  uint16_t d[16], dmin[16];  // F16
  uint8_t scm[8][16];
  uint8_t mnl[4][16];
  uint8_t qs[32][64];
};
static_assert(sizeof(BlockQ4_KX16) == 16 * 144, "a Q4_K_X16 block is 16 Q4_K blocks long");
constexpr int64_t kX16Rows = 16;  // rows an X16 group interleaves

struct BlockQ6_KX16 {
  uint16_t d[16];  // F16
  int8_t sc[16][16];
  uint8_t ql[32][64];
  uint8_t qh[16][64];
};
static_assert(sizeof(BlockQ6_KX16) == 16 * 210, "a Q6_K_X16 block is 16 Q6_K blocks long");

struct BlockQ5_KX16 {
  uint16_t d[16], dmin[16];  // F16
  uint8_t scm[8][16];
  uint8_t mnl[4][16];
  uint8_t qs[32][64];
  uint8_t qh[8][64];
};
static_assert(sizeof(BlockQ5_KX16) == 16 * 176, "a Q5_K_X16 block is 16 Q5_K blocks long");

struct BlockQ8_0X16 {
  uint16_t d[16];  // F16
  uint8_t qs[8][64];
};
static_assert(sizeof(BlockQ8_0X16) == 16 * 34, "a Q8_0_X16 block is 16 Q8_0 blocks long");

// Block b of a Q8_0_X16 group of nb blocks at `group`, where the runs put it.
inline constexpr int64_t kQ8X16Run = 4;
struct Q8X16Block {
  const uint16_t* d;          // d[16]
  const uint8_t (*qs)[64];    // qs[8][64]
};
inline Q8X16Block q8x16_block(const uint8_t* group, int64_t nb, int64_t b) {
  const int64_t run = b / kQ8X16Run, j = b % kQ8X16Run;
  const int64_t n = nb - run * kQ8X16Run < kQ8X16Run ? nb - run * kQ8X16Run : kQ8X16Run;
  const uint8_t* base = group + run * kQ8X16Run * int64_t(sizeof(BlockQ8_0X16));
  return {reinterpret_cast<const uint16_t*>(base + 32 * j), reinterpret_cast<const uint8_t (*)[64]>(base + 32 * n + 512 * j)};
}

struct BlockQ4_0X16 {
  uint16_t d[16];  // F16
  uint8_t qs[4][64];
};
static_assert(sizeof(BlockQ4_0X16) == 16 * 18, "a Q4_0_X16 block is 16 Q4_0 blocks long");

struct BlockQ5_0X16 {
  uint16_t d[16];  // F16
  uint8_t qh[64];
  uint8_t qs[4][64];
};
static_assert(sizeof(BlockQ5_0X16) == 16 * 22, "a Q5_0_X16 block is 16 Q5_0 blocks long");

struct BlockQ4_1X16 {
  uint16_t d[16], m[16];  // F16
  uint8_t qs[4][64];
};
static_assert(sizeof(BlockQ4_1X16) == 16 * 20, "a Q4_1_X16 block is 16 Q4_1 blocks long");

struct BlockQ5_1X16 {
  uint16_t d[16], m[16];  // F16
  uint8_t qh[64];
  uint8_t qs[4][64];
};
static_assert(sizeof(BlockQ5_1X16) == 16 * 24, "a Q5_1_X16 block is 16 Q5_1 blocks long");

struct BlockIQ4_NLX16 {
  uint16_t d[16];  // F16
  uint8_t qs[4][64];
};
static_assert(sizeof(BlockIQ4_NLX16) == 16 * 18, "an IQ4_NL_X16 block is 16 IQ4_NL blocks long");

struct BlockMXFP4X16 {
  uint8_t e[16];  // E8M0
  uint8_t qs[4][64];
};
static_assert(sizeof(BlockMXFP4X16) == 16 * 17, "an MXFP4_X16 block is 16 MXFP4 blocks long");

struct BlockIQ4_XSX16 {
  uint16_t d[16];  // F16
  uint16_t sh[16];
  uint8_t sl[4][16];
  uint8_t qs[32][64];
};
static_assert(sizeof(BlockIQ4_XSX16) == 16 * 136, "an IQ4_XS_X16 block is 16 IQ4_XS blocks long");

// Repacks / unpacks 16 rows of k values (k a multiple of 256, rows of
// ggml_row_bytes(Q4_K, k) bytes) to / from one Q4_K_X16 group; unpack is the
// exact inverse of repack.
void repack_group_q4_kx16(const uint8_t* q4_k, uint8_t* q4_kx16, int64_t k);
void unpack_group_q4_kx16(const uint8_t* q4_kx16, uint8_t* q4_k, int64_t k);
// The same for 16 Q6_K / Q5_K rows and one Q6_K_X16 / Q5_K_X16 group.
void repack_group_q6_kx16(const uint8_t* q6_k, uint8_t* q6_kx16, int64_t k);
void unpack_group_q6_kx16(const uint8_t* q6_kx16, uint8_t* q6_k, int64_t k);
void repack_group_q5_kx16(const uint8_t* q5_k, uint8_t* q5_kx16, int64_t k);
void unpack_group_q5_kx16(const uint8_t* q5_kx16, uint8_t* q5_k, int64_t k);
// The same for 16 Q8_0 rows (k a multiple of 32) and one Q8_0_X16 group.
void repack_group_q8_0x16(const uint8_t* q8_0, uint8_t* q8_0x16, int64_t k);
void unpack_group_q8_0x16(const uint8_t* q8_0x16, uint8_t* q8_0, int64_t k);
// The same for 16 Q4_0 / Q5_0 rows (k a multiple of 32) and one Q4_0_X16 / Q5_0_X16 group.
void repack_group_q4_0x16(const uint8_t* q4_0, uint8_t* q4_0x16, int64_t k);
void unpack_group_q4_0x16(const uint8_t* q4_0x16, uint8_t* q4_0, int64_t k);
void repack_group_q5_0x16(const uint8_t* q5_0, uint8_t* q5_0x16, int64_t k);
void unpack_group_q5_0x16(const uint8_t* q5_0x16, uint8_t* q5_0, int64_t k);

// Every layout: `x16` (an X16 type) stored as `stored`, and its group
// repack / unpack (16 rows, k values a row; unpack the exact inverse).
struct X16Layout {
  GgmlType x16, stored;
  void (*repack)(const uint8_t* stored_rows, uint8_t* group, int64_t k);
  void (*unpack)(const uint8_t* group, uint8_t* stored_rows, int64_t k);
};
// The layout whose x16 (or, with by_stored, whose stored type) is t; nullptr if none.
const X16Layout* x16_layout(GgmlType t, bool by_stored = false);

// The layout the weights stored as `t` are repacked to for the matmul kernels
// in use (cpu_level(), or the forced kernel set), or t itself when they read
// t fastest. Every kernel path reads every layout this returns on any path
// (paths without a kernel of their own unpack each task's rows), so a model
// repacked for one path stays correct if another path runs it.
GgmlType matmul_repacked_type(GgmlType t);

// Rows a tensor of type t must come in whole groups of (and every view of it
// start at a multiple of): 16 for the X16 layouts, otherwise 1.
int64_t repack_group_rows(GgmlType t);

// Repacks n rows of k values stored as `from` into `to`
// (matmul_repacked_type(from)), ggml_row_bytes(to, k) bytes a row at dst.
// Throws pc::Error for a pair it does not convert or n not a multiple of
// repack_group_rows(to).
void repack_rows(GgmlType from, GgmlType to, const uint8_t* src, uint8_t* dst, int64_t k, int64_t n);

}  // namespace pc
