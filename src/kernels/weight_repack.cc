// Repacked weight layouts (weight_repack.h) and the kernels of the paths that
// read them by unpacking (scalar, AVX2).
#include "kernels/weight_repack.h"

#include <cstring>
#include <type_traits>
#include <vector>

#include "common/error.h"
#include "gguf/quants.h"
#include "kernels/matmul_internal.h"

namespace pc {

namespace {

// The inverse of q4k_scales(): 8 6-bit scales and mins into Q4_K's 12 bytes.
void pack_scales(const uint8_t sc[8], const uint8_t mn[8], uint8_t scales[12]) {
  for (int j = 0; j < 4; ++j) {
    scales[j] = static_cast<uint8_t>(sc[j] | (sc[j + 4] >> 4) << 6);
    scales[j + 4] = static_cast<uint8_t>(mn[j] | (mn[j + 4] >> 4) << 6);
    scales[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0xF) | (mn[j + 4] & 0xF) << 4);
  }
}

// Q4_K (kQ5 false) or Q5_K rows to / from their X16 group: the same header
// and low 4 bits, Q5_K's fifth bits in qh.
template <bool kQ5>
void repack_group_k45x16(const uint8_t* src, uint8_t* dst, int64_t k) {
  using In = std::conditional_t<kQ5, BlockQ5_K, BlockQ4_K>;
  using Out = std::conditional_t<kQ5, BlockQ5_KX16, BlockQ4_KX16>;
  const int64_t nb = k / 256, rb = nb * int64_t(sizeof(In));
  for (int64_t b = 0; b < nb; ++b) {
    Out out{};
    for (int c = 0; c < 16; ++c) {
      In in;
      std::memcpy(&in, src + c * rb + b * int64_t(sizeof in), sizeof in);
      uint8_t sc[8], mn[8];
      kern::q4k_scales(in.scales, sc, mn);
      out.d[c] = in.d;
      out.dmin[c] = in.dmin;
      for (int j = 0; j < 8; ++j) out.scm[j][c] = static_cast<uint8_t>(sc[j] | (mn[j] >> 4) << 6);
      for (int q = 0; q < 4; ++q) out.mnl[q][c] = static_cast<uint8_t>((mn[2 * q] & 0xF) | (mn[2 * q + 1] & 0xF) << 4);
      // Byte 4c + i of qs[t]: value v = 4t + i in the low nibble, v + 128 in
      // the high. Chunk ch of in.qs (32 bytes) holds values 64ch + l (low
      // nibbles) and 64ch + 32 + l (high), so values 64h + l and 64h + 32 + l
      // (h = 0, 1) pair with the same nibbles of chunk h + 2: the 128 bytes in
      // value order from whole 32-byte runs (loops the compiler vectorizes),
      // then a dword per t.
      uint8_t v[128];
      for (int h = 0; h < 2; ++h)
        for (int l = 0; l < 32; ++l) {
          const uint8_t a = in.qs[32 * h + l], b = in.qs[64 + 32 * h + l];
          v[64 * h + l] = static_cast<uint8_t>((a & 0xF) | (b & 0xF) << 4);
          v[64 * h + 32 + l] = static_cast<uint8_t>(a >> 4 | (b & 0xF0));
        }
      for (int t = 0; t < 32; ++t) std::memcpy(&out.qs[t][4 * c], v + 4 * t, 4);
      // Q5_K's fifth bit of value v is bit v / 32 of qh[v % 32]; the group
      // keeps it at bit v / 32 of byte 4c + v % 4 of qh[(v % 32) / 4]: each
      // qh byte moves whole, dword u to qh[u].
      if constexpr (kQ5)
        for (int u = 0; u < 8; ++u) std::memcpy(&out.qh[u][4 * c], in.qh + 4 * u, 4);
    }
    std::memcpy(dst + b * int64_t(sizeof out), &out, sizeof out);
  }
}

template <bool kQ5>
void unpack_group_k45x16(const uint8_t* src, uint8_t* dst, int64_t k) {
  using In = std::conditional_t<kQ5, BlockQ5_KX16, BlockQ4_KX16>;
  using Out = std::conditional_t<kQ5, BlockQ5_K, BlockQ4_K>;
  const int64_t nb = k / 256, rb = nb * int64_t(sizeof(Out));
  for (int64_t b = 0; b < nb; ++b) {
    In in;
    std::memcpy(&in, src + b * int64_t(sizeof in), sizeof in);
    for (int c = 0; c < 16; ++c) {
      Out out{};
      uint8_t sc[8], mn[8];
      for (int j = 0; j < 8; ++j) {
        sc[j] = in.scm[j][c] & 63;
        mn[j] = static_cast<uint8_t>((in.mnl[j / 2][c] >> (4 * (j % 2)) & 0xF) | (in.scm[j][c] >> 6) << 4);
      }
      pack_scales(sc, mn, out.scales);
      out.d = in.d[c];
      out.dmin = in.dmin[c];
      uint8_t q[256];
      for (int v = 0; v < 256; ++v) {
        const int t = v / 4, i = v % 4;
        q[v] = (in.qs[t % 32][4 * c + i] >> (t < 32 ? 0 : 4)) & 0xF;
        if constexpr (kQ5)
          out.qh[v % 32] |= static_cast<uint8_t>(((in.qh[t % 8][4 * c + i] >> (t / 8)) & 1) << (v / 32));
      }
      for (int ch = 0; ch < 4; ++ch)
        for (int l = 0; l < 32; ++l)
          out.qs[32 * ch + l] = static_cast<uint8_t>(q[64 * ch + l] | q[64 * ch + 32 + l] << 4);
      std::memcpy(dst + c * rb + b * int64_t(sizeof out), &out, sizeof out);
    }
  }
}

}  // namespace

void repack_group_q4_kx16(const uint8_t* src, uint8_t* dst, int64_t k) { repack_group_k45x16<false>(src, dst, k); }
void unpack_group_q4_kx16(const uint8_t* src, uint8_t* dst, int64_t k) { unpack_group_k45x16<false>(src, dst, k); }
void repack_group_q5_kx16(const uint8_t* src, uint8_t* dst, int64_t k) { repack_group_k45x16<true>(src, dst, k); }
void unpack_group_q5_kx16(const uint8_t* src, uint8_t* dst, int64_t k) { unpack_group_k45x16<true>(src, dst, k); }

namespace {

// A Q6_K block's 256 6-bit codes (the values + 32) in value order, and back:
// per half h, for l < 32, values 128h + l and 128h + 64 + l share byte
// ql[64h + l] (low and high nibble), values 128h + 32 + l and 128h + 96 + l
// byte ql[64h + 32 + l], and the four values' top 2 bits are bits 0, 2, 4, 6
// of qh[32h + l].
void q6k_codes(const BlockQ6_K& in, uint8_t q[256]) {
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 32; ++l) {
      const uint8_t a = in.ql[64 * h + l], b = in.ql[64 * h + 32 + l], hi = in.qh[32 * h + l];
      q[128 * h + l] = static_cast<uint8_t>((a & 0xF) | (hi & 3) << 4);
      q[128 * h + 32 + l] = static_cast<uint8_t>((b & 0xF) | ((hi >> 2) & 3) << 4);
      q[128 * h + 64 + l] = static_cast<uint8_t>(a >> 4 | ((hi >> 4) & 3) << 4);
      q[128 * h + 96 + l] = static_cast<uint8_t>(b >> 4 | (hi >> 6) << 4);
    }
}
void q6k_pack(const uint8_t q[256], BlockQ6_K& out) {
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 32; ++l) {
      const uint8_t* v = q + 128 * h + l;
      out.ql[64 * h + l] = static_cast<uint8_t>((v[0] & 0xF) | (v[64] & 0xF) << 4);
      out.ql[64 * h + 32 + l] = static_cast<uint8_t>((v[32] & 0xF) | (v[96] & 0xF) << 4);
      out.qh[32 * h + l] = static_cast<uint8_t>(v[0] >> 4 | (v[32] >> 4) << 2 | (v[64] >> 4) << 4 | (v[96] >> 4) << 6);
    }
}

}  // namespace

void repack_group_q6_kx16(const uint8_t* src, uint8_t* dst, int64_t k) {
  const int64_t nb = k / 256, rb = nb * int64_t(sizeof(BlockQ6_K));
  for (int64_t b = 0; b < nb; ++b) {
    BlockQ6_KX16 out{};
    for (int c = 0; c < 16; ++c) {
      BlockQ6_K in;
      std::memcpy(&in, src + c * rb + b * int64_t(sizeof in), sizeof in);
      out.d[c] = in.d;
      for (int j = 0; j < 16; ++j) out.sc[j][c] = in.scales[j];
      // Values 4(t + 16s) + i, s = 0..3, share byte 4c + i of qh[t] (bits 2s);
      // their low 4 bits go to that byte of ql[t] (s = 0 low nibble, 2 high)
      // and of ql[t + 16] (s = 1, 3): the three 64-byte runs in value order
      // (v = 4t + i), then a dword per t.
      uint8_t q[256], lo[64], hi[64], h2[64];
      q6k_codes(in, q);
      for (int v = 0; v < 64; ++v) {
        lo[v] = static_cast<uint8_t>((q[v] & 0xF) | (q[v + 128] & 0xF) << 4);
        hi[v] = static_cast<uint8_t>((q[v + 64] & 0xF) | (q[v + 192] & 0xF) << 4);
        h2[v] = static_cast<uint8_t>(q[v] >> 4 | (q[v + 64] >> 4) << 2 | (q[v + 128] >> 4) << 4 | (q[v + 192] >> 4) << 6);
      }
      for (int t = 0; t < 16; ++t) {
        std::memcpy(&out.ql[t][4 * c], lo + 4 * t, 4);
        std::memcpy(&out.ql[t + 16][4 * c], hi + 4 * t, 4);
        std::memcpy(&out.qh[t][4 * c], h2 + 4 * t, 4);
      }
    }
    std::memcpy(dst + b * int64_t(sizeof out), &out, sizeof out);
  }
}

void unpack_group_q6_kx16(const uint8_t* src, uint8_t* dst, int64_t k) {
  const int64_t nb = k / 256, rb = nb * int64_t(sizeof(BlockQ6_K));
  for (int64_t b = 0; b < nb; ++b) {
    BlockQ6_KX16 in;
    std::memcpy(&in, src + b * int64_t(sizeof in), sizeof in);
    for (int c = 0; c < 16; ++c) {
      BlockQ6_K out{};
      out.d = in.d[c];
      for (int j = 0; j < 16; ++j) out.scales[j] = in.sc[j][c];
      uint8_t q[256];
      for (int v = 0; v < 256; ++v) {
        const int t = v / 4, i = v % 4;
        const int lo4 = (in.ql[t % 32][4 * c + i] >> (t < 32 ? 0 : 4)) & 0xF;
        const int hi2 = (in.qh[t % 16][4 * c + i] >> (2 * (t / 16))) & 3;
        q[v] = static_cast<uint8_t>(lo4 | hi2 << 4);
      }
      q6k_pack(q, out);
      std::memcpy(dst + c * rb + b * int64_t(sizeof out), &out, sizeof out);
    }
  }
}

namespace {

// Row c's codes of one 32-value block, stored block <-> group block (the
// layouts of weight_repack.h): Q8_0's values move with the sign bit flipped;
// the 4-bit types' codes (Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL, MXFP4) move as they
// are (value j's nibble of qs[j % 16], the high one for j >= 16, to the same
// nibble of byte 4c + j % 4 of qs[(j % 16) / 4]), Q5_0's / Q5_1's fifth bits
// from qh (bit j) to bit j / 4 of byte 4c + j % 4 of the group's qh.
// (4 bytes at a time: values 4t .. 4t + 3 stay together.)
void to_group(const BlockQ8_0& in, BlockQ8_0X16& out, int c) {
  for (int t = 0; t < 8; ++t) {
    uint32_t w;
    std::memcpy(&w, in.qs + 4 * t, 4);
    w ^= 0x80808080u;
    std::memcpy(&out.qs[t][4 * c], &w, 4);
  }
}
void from_group(const BlockQ8_0X16& in, BlockQ8_0& out, int c) {
  for (int v = 0; v < 32; ++v) out.qs[v] = static_cast<int8_t>(in.qs[v / 4][4 * c + v % 4] ^ 0x80);
}
template <class In, class Out>
void to_group(const In& in, Out& out, int c) {
  for (int t = 0; t < 4; ++t) std::memcpy(&out.qs[t][4 * c], in.qs + 4 * t, 4);
  if constexpr (requires { in.qh; }) {
    // Byte 4c + i gathers bits i, i + 4, .., i + 28 of the 32 fifth bits
    // (bit j = q5_high_bit(qh, j), qh little-endian) into bits 0..7.
    uint32_t h;
    std::memcpy(&h, in.qh, 4);
    for (int i = 0; i < 4; ++i) {
      uint32_t x = (h >> i) & 0x11111111u;  // bits 4m
      x = (x | x >> 3) & 0x03030303u;       // bits 8m, 8m + 1
      x = (x | x >> 6) & 0x000F000Fu;       // bits 16m .. 16m + 3
      out.qh[4 * c + i] = static_cast<uint8_t>(x | x >> 12);
    }
  }
}
template <class In, class Out>
void from_group(const In& in, Out& out, int c) {
  for (int j = 0; j < 16; ++j) out.qs[j] = in.qs[j / 4][4 * c + j % 4];
  if constexpr (requires { out.qh; })
    for (int j = 0; j < 32; ++j)
      out.qh[j / 8] |= static_cast<uint8_t>(((in.qh[4 * c + j % 4] >> (j / 4)) & 1) << (j % 8));
}

// A block's scale (F16 d, or MXFP4's E8M0 byte e) and Q4_1's / Q5_1's offset m.
template <class In, class Out>
void scale_to_group(const In& in, Out& out, int c) {
  if constexpr (requires { in.e; }) out.e[c] = in.e;
  else out.d[c] = in.d;
  if constexpr (requires { in.m; }) out.m[c] = in.m;
}
template <class In, class Out>
void scale_from_group(const In& in, Out& out, int c) {
  if constexpr (requires { out.e; }) out.e = in.e[c];
  else out.d = in.d[c];
  if constexpr (requires { out.m; }) out.m = in.m[c];
}

// Block b of a group of nb blocks of type X, stored in place: Q8_0_X16's d and
// qs where its runs put them (q8x16_block), the other types' blocks in a row.
template <class X>
void put_group_block(const X& blk, uint8_t* group, int64_t nb, int64_t b) {
  if constexpr (std::is_same_v<X, BlockQ8_0X16>) {
    const Q8X16Block at = q8x16_block(group, nb, b);
    std::memcpy(const_cast<uint16_t*>(at.d), blk.d, sizeof blk.d);
    std::memcpy(const_cast<uint8_t(*)[64]>(at.qs), blk.qs, sizeof blk.qs);
  } else {
    std::memcpy(group + b * int64_t(sizeof blk), &blk, sizeof blk);
  }
}
template <class X>
void get_group_block(X& blk, const uint8_t* group, int64_t nb, int64_t b) {
  if constexpr (std::is_same_v<X, BlockQ8_0X16>) {
    const Q8X16Block at = q8x16_block(group, nb, b);
    std::memcpy(blk.d, at.d, sizeof blk.d);
    std::memcpy(blk.qs, at.qs, sizeof blk.qs);
  } else {
    std::memcpy(&blk, group + b * int64_t(sizeof blk), sizeof blk);
  }
}

// 16 rows of stored blocks In <-> one group of blocks Out (32 values each).
// Each stored block is read where it lies: copied to the stack first, its
// 2-byte scale and 32 codes were written in one set of widths and read back in
// another, which stalled each load on the stores (Q8_0 repacked at 1.5-1.9
// GB/s a thread, 2.3-4.3 read in place).
template <class In, class Out>
void repack_group_q32x16(const uint8_t* src, uint8_t* dst, int64_t k) {
  const int64_t nb = k / 32, rb = nb * int64_t(sizeof(In));
  for (int64_t b = 0; b < nb; ++b) {
    Out out{};
    for (int c = 0; c < 16; ++c) {
      const In& in = *reinterpret_cast<const In*>(src + c * rb + b * int64_t(sizeof(In)));
      scale_to_group(in, out, c);
      to_group(in, out, c);
    }
    put_group_block(out, dst, nb, b);
  }
}

template <class In, class Out>
void unpack_group_q32x16(const uint8_t* src, uint8_t* dst, int64_t k) {
  const int64_t nb = k / 32, rb = nb * int64_t(sizeof(Out));
  for (int64_t b = 0; b < nb; ++b) {
    In in;
    get_group_block(in, src, nb, b);
    for (int c = 0; c < 16; ++c) {
      Out out{};
      scale_from_group(in, out, c);
      from_group(in, out, c);
      std::memcpy(dst + c * rb + b * int64_t(sizeof out), &out, sizeof out);
    }
  }
}

}  // namespace

void repack_group_q8_0x16(const uint8_t* src, uint8_t* dst, int64_t k) {
  repack_group_q32x16<BlockQ8_0, BlockQ8_0X16>(src, dst, k);
}
void unpack_group_q8_0x16(const uint8_t* src, uint8_t* dst, int64_t k) {
  unpack_group_q32x16<BlockQ8_0X16, BlockQ8_0>(src, dst, k);
}
void repack_group_q4_0x16(const uint8_t* src, uint8_t* dst, int64_t k) {
  repack_group_q32x16<BlockQ4_0, BlockQ4_0X16>(src, dst, k);
}
void unpack_group_q4_0x16(const uint8_t* src, uint8_t* dst, int64_t k) {
  unpack_group_q32x16<BlockQ4_0X16, BlockQ4_0>(src, dst, k);
}
void repack_group_q5_0x16(const uint8_t* src, uint8_t* dst, int64_t k) {
  repack_group_q32x16<BlockQ5_0, BlockQ5_0X16>(src, dst, k);
}
void unpack_group_q5_0x16(const uint8_t* src, uint8_t* dst, int64_t k) {
  unpack_group_q32x16<BlockQ5_0X16, BlockQ5_0>(src, dst, k);
}

namespace {

// IQ4_XS rows <-> their X16 group: sub-block s's 16 index bytes (qs[16s ..
// 16s + 15] of a stored block) move as an IQ4_NL block's do, into qs[4s ..
// 4s + 3]; d, scales_h and scales_l move to row c's slots.
void repack_group_iq4_xsx16(const uint8_t* src, uint8_t* dst, int64_t k) {
  const int64_t nb = k / 256, rb = nb * int64_t(sizeof(BlockIQ4_XS));
  for (int64_t b = 0; b < nb; ++b) {
    BlockIQ4_XSX16 out{};
    for (int c = 0; c < 16; ++c) {
      const BlockIQ4_XS& in = *reinterpret_cast<const BlockIQ4_XS*>(src + c * rb + b * int64_t(sizeof(BlockIQ4_XS)));
      out.d[c] = in.d;
      out.sh[c] = in.scales_h;
      for (int q = 0; q < 4; ++q) out.sl[q][c] = in.scales_l[q];
      for (int t = 0; t < 32; ++t) std::memcpy(&out.qs[t][4 * c], in.qs + 4 * t, 4);  // (4 (j / 16) + (j % 16) / 4 = j / 4)
    }
    std::memcpy(dst + b * int64_t(sizeof out), &out, sizeof out);
  }
}

void unpack_group_iq4_xsx16(const uint8_t* src, uint8_t* dst, int64_t k) {
  const int64_t nb = k / 256, rb = nb * int64_t(sizeof(BlockIQ4_XS));
  for (int64_t b = 0; b < nb; ++b) {
    BlockIQ4_XSX16 in;
    std::memcpy(&in, src + b * int64_t(sizeof in), sizeof in);
    for (int c = 0; c < 16; ++c) {
      BlockIQ4_XS out{};
      out.d = in.d[c];
      out.scales_h = in.sh[c];
      for (int q = 0; q < 4; ++q) out.scales_l[q] = in.sl[q][c];
      for (int j = 0; j < 128; ++j) out.qs[j] = in.qs[4 * (j / 16) + (j % 16) / 4][4 * c + j % 4];
      std::memcpy(dst + c * rb + b * int64_t(sizeof out), &out, sizeof out);
    }
  }
}

constexpr X16Layout kLayouts[] = {
    {GgmlType::Q4_K_X16, GgmlType::Q4_K, repack_group_q4_kx16, unpack_group_q4_kx16},
    {GgmlType::Q5_K_X16, GgmlType::Q5_K, repack_group_q5_kx16, unpack_group_q5_kx16},
    {GgmlType::Q6_K_X16, GgmlType::Q6_K, repack_group_q6_kx16, unpack_group_q6_kx16},
    {GgmlType::Q8_0_X16, GgmlType::Q8_0, repack_group_q8_0x16, unpack_group_q8_0x16},
    {GgmlType::Q4_0_X16, GgmlType::Q4_0, repack_group_q4_0x16, unpack_group_q4_0x16},
    {GgmlType::Q5_0_X16, GgmlType::Q5_0, repack_group_q5_0x16, unpack_group_q5_0x16},
    {GgmlType::Q4_1_X16, GgmlType::Q4_1, repack_group_q32x16<BlockQ4_1, BlockQ4_1X16>,
     unpack_group_q32x16<BlockQ4_1X16, BlockQ4_1>},
    {GgmlType::Q5_1_X16, GgmlType::Q5_1, repack_group_q32x16<BlockQ5_1, BlockQ5_1X16>,
     unpack_group_q32x16<BlockQ5_1X16, BlockQ5_1>},
    {GgmlType::IQ4_NL_X16, GgmlType::IQ4_NL, repack_group_q32x16<BlockIQ4_NL, BlockIQ4_NLX16>,
     unpack_group_q32x16<BlockIQ4_NLX16, BlockIQ4_NL>},
    {GgmlType::MXFP4_X16, GgmlType::MXFP4, repack_group_q32x16<BlockMXFP4, BlockMXFP4X16>,
     unpack_group_q32x16<BlockMXFP4X16, BlockMXFP4>},
    {GgmlType::IQ4_XS_X16, GgmlType::IQ4_XS, repack_group_iq4_xsx16, unpack_group_iq4_xsx16},
};

}  // namespace

const X16Layout* x16_layout(GgmlType t, bool by_stored) {
  for (const X16Layout& l : kLayouts)
    if ((by_stored ? l.stored : l.x16) == t) return &l;
  return nullptr;
}

int64_t repack_group_rows(GgmlType t) { return x16_layout(t) ? kX16Rows : 1; }

void repack_rows(GgmlType from, GgmlType to, const uint8_t* src, uint8_t* dst, int64_t k, int64_t n) {
  const X16Layout* l = x16_layout(to);
  const int64_t g = repack_group_rows(to);
  if (!l || l->stored != from || k % ggml_block_elems(from) != 0 || n % g != 0)
    throw Error("repack_rows: no repacking of " + ggml_type_name(from) + " to " + ggml_type_name(to) +
                " for k=" + std::to_string(k) + ", " + std::to_string(n) + " rows");
  const int64_t in_rb = ggml_row_bytes(from, k), out_rb = ggml_row_bytes(to, k);
  for (int64_t r = 0; r < n; r += g) l->repack(src + r * in_rb, dst + r * out_rb, k);
}

namespace kern {

namespace {

// Repacked rows [c0, c1) unpacked to the stored type into a grow-only buffer
// of the running thread, then `inner`'s kernel of that type on them: the
// same bits as that kernel on the stored rows.
// `unpack` converts `g` rows at a time (c0 and c1 are multiples of g).
void run_unpacked(GgmlType stored, void (*unpack)(const uint8_t*, uint8_t*, int64_t), int64_t g, TaskKernel inner,
                  const MatmulArgs& a, int64_t r0, int64_t r1, int64_t c0, int64_t c1, uint8_t* scratch) {
  thread_local std::vector<uint8_t> rows;
  const int64_t rb = ggml_row_bytes(stored, a.k);
  if (rows.size() < size_t((c1 - c0) * rb)) rows.resize(size_t((c1 - c0) * rb));
  for (int64_t c = c0; c < c1; c += g) unpack(a.w + c * a.row_bytes, rows.data() + (c - c0) * rb, a.k);
  MatmulArgs b = a;
  b.w = rows.data();
  b.row_bytes = rb;
  b.y = a.y + c0;  // column c of a is column c - c0 of b
  inner(b, r0, r1, 0, c1 - c0, scratch);
}

}  // namespace

template <GgmlType X>
void task_via_scalar(const MatmulArgs& a, int64_t r0, int64_t r1, int64_t c0, int64_t c1, uint8_t* s) {
  static const X16Layout* const l = x16_layout(X);
  run_unpacked(l->stored, l->unpack, kX16Rows, scalar_kernel(l->stored), a, r0, r1, c0, c1, s);
}

TaskKernel x16_via_scalar(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_K_X16: return task_via_scalar<GgmlType::Q4_K_X16>;
    case GgmlType::Q5_K_X16: return task_via_scalar<GgmlType::Q5_K_X16>;
    case GgmlType::Q6_K_X16: return task_via_scalar<GgmlType::Q6_K_X16>;
    case GgmlType::Q8_0_X16: return task_via_scalar<GgmlType::Q8_0_X16>;
    case GgmlType::Q4_0_X16: return task_via_scalar<GgmlType::Q4_0_X16>;
    case GgmlType::Q5_0_X16: return task_via_scalar<GgmlType::Q5_0_X16>;
    case GgmlType::Q4_1_X16: return task_via_scalar<GgmlType::Q4_1_X16>;
    case GgmlType::Q5_1_X16: return task_via_scalar<GgmlType::Q5_1_X16>;
    case GgmlType::IQ4_NL_X16: return task_via_scalar<GgmlType::IQ4_NL_X16>;
    case GgmlType::MXFP4_X16: return task_via_scalar<GgmlType::MXFP4_X16>;
    case GgmlType::IQ4_XS_X16: return task_via_scalar<GgmlType::IQ4_XS_X16>;
    default: return nullptr;
  }
}

}  // namespace kern

}  // namespace pc
