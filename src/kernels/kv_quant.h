// KV types: how a KV page stores the keys and values of a token. The attention
// kernels read pages of each type directly, so the kernels own the formats; the
// KV page stores (kv/) keep and serialize pages laid out this way.
//
//   type  one head's K (or V) row of one token, head_dim values    bytes per value
//   f16   head_dim F16 values (K dimension-major, kernels/k_layout.h) 2
//   q8_0  head_dim / B blocks:  f16 d | i8 q[B]          x = d * q      (2 + B) / B
//   q4_0  head_dim / B blocks:  f16 d | u8 qs[B / 2]     x = d * (nibble - 8)
//                               value j < B/2 the low nibble of qs[j],
//                               value j >= B/2 the high nibble of qs[j - B/2]  (2 + B/2) / B
//
// B (kv_quant_block) is 32 when head_dim is a multiple of 32: then a row is exactly
// GGUF's block_q8_0 / block_q4_0 array (34 / 18 bytes per 32 values, gguf/quants.h).
// Heads of 8 or 16 dimensions (the small test models) take one block per row, B =
// head_dim, with the same block format; other head sizes cannot be quantized.
//
// A row is quantized from its own values only (the scale is its block's largest
// magnitude): the stored bytes never depend on the batch, the chunking or the threads.
// Dequantizing is exact in float (an F16 scale times an integer of at most 8 bits),
// so every path that reads a quantized page sees the same values.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace pc {

enum class KvType : uint8_t {
  kF16 = 0,
  kQ8_0 = 1,
  kQ4_0 = 2,
};

// "f16", "q8_0", "q4_0": the names flags, namespaces and tier entries use.
const char* kv_type_name(KvType t);
// The type a name names; nullopt for any other string.
std::optional<KvType> parse_kv_type(std::string_view name);
inline constexpr const char* kKvTypeNames = "f16, q8_0, q4_0";

// Values per quantization block of a head_dim row (see above); 0 when the type
// cannot store rows of that size. F16: head_dim.
int kv_quant_block(KvType t, int head_dim);
// Bytes of one head's K (or V) row of one token; 0 when the type cannot store it.
size_t kv_row_bytes(KvType t, int head_dim);

// One row of head_dim values into the type's row bytes (F16: head_dim F16 values in
// order, round to nearest even), and back. Reference definitions: the kernels'
// SIMD dequantization gives bitwise these values.
void kv_quantize_row(KvType t, const float* x, int head_dim, uint8_t* out);
void kv_dequantize_row(KvType t, const uint8_t* in, int head_dim, float* out);
// A quantized row (q8_0 or q4_0) as its integer levels and block scales: levels[j]
// (q8_0: q; q4_0: nibble - 8) for j < head_dim, scales[b] (F16 d as F32) for each
// block of kv_quant_block() values; value j = scales[j / B] * levels[j]. The form
// the attention kernels' integer dot products read (paged_attention.cc).
void kv_row_levels(KvType t, const uint8_t* in, int head_dim, int8_t* levels, float* scales);

}  // namespace pc
