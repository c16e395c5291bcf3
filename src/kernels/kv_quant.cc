#include "kernels/kv_quant.h"

#include <cmath>
#include <cstring>

#include "gguf/quants.h"

namespace pc {

const char* kv_type_name(KvType t) {
  switch (t) {
    case KvType::kF16: return "f16";
    case KvType::kQ8_0: return "q8_0";
    case KvType::kQ4_0: return "q4_0";
  }
  return "?";
}

std::optional<KvType> parse_kv_type(std::string_view name) {
  for (KvType t : {KvType::kF16, KvType::kQ8_0, KvType::kQ4_0})
    if (name == kv_type_name(t)) return t;
  return std::nullopt;
}

int kv_quant_block(KvType t, int head_dim) {
  if (head_dim <= 0) return 0;
  if (t == KvType::kF16) return head_dim;
  if (head_dim % 32 == 0) return 32;
  return (head_dim == 8 || head_dim == 16) ? head_dim : 0;
}

size_t kv_row_bytes(KvType t, int head_dim) {
  const int B = kv_quant_block(t, head_dim);
  if (B == 0) return 0;
  switch (t) {
    case KvType::kF16: return size_t(head_dim) * 2;
    case KvType::kQ8_0: return size_t(head_dim / B) * (2 + B);
    case KvType::kQ4_0: return size_t(head_dim / B) * (2 + B / 2);
  }
  return 0;
}

namespace {

// One q8_0 block of B values: d = max|x| / 127, q = round(x / d).
void quantize_q8(const float* x, int B, uint8_t* out) {
  float amax = 0.f;
  for (int j = 0; j < B; ++j) amax = std::fmax(amax, std::fabs(x[j]));
  const float d = amax / 127.f;
  const float id = d != 0.f ? 1.f / d : 0.f;
  const uint16_t dh = fp32_to_fp16(d);
  std::memcpy(out, &dh, 2);
  auto* q = reinterpret_cast<int8_t*>(out + 2);
  for (int j = 0; j < B; ++j) q[j] = int8_t(std::lround(x[j] * id));
}

// One q4_0 block of B values: d = -m / 8 with m the value of largest magnitude
// (sign kept), level = min(15, trunc(x / d + 8.5)).
void quantize_q4(const float* x, int B, uint8_t* out) {
  float amax = 0.f, m = 0.f;
  for (int j = 0; j < B; ++j)
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      m = x[j];
    }
  const float d = m / -8.f;
  const float id = d != 0.f ? 1.f / d : 0.f;
  const uint16_t dh = fp32_to_fp16(d);
  std::memcpy(out, &dh, 2);
  auto level = [&](float v) {
    const int l = int(v * id + 8.5f);
    return uint8_t(l < 0 ? 0 : l > 15 ? 15 : l);
  };
  uint8_t* qs = out + 2;
  for (int j = 0; j < B / 2; ++j) qs[j] = uint8_t(level(x[j]) | level(x[B / 2 + j]) << 4);
}

}  // namespace

void kv_quantize_row(KvType t, const float* x, int head_dim, uint8_t* out) {
  const int B = kv_quant_block(t, head_dim);
  switch (t) {
    case KvType::kF16:
      for (int d = 0; d < head_dim; ++d) {
        const uint16_t h = fp32_to_fp16(x[d]);
        std::memcpy(out + 2 * d, &h, 2);
      }
      return;
    case KvType::kQ8_0:
      for (int b = 0; b < head_dim / B; ++b) quantize_q8(x + b * B, B, out + size_t(b) * (2 + B));
      return;
    case KvType::kQ4_0:
      for (int b = 0; b < head_dim / B; ++b) quantize_q4(x + b * B, B, out + size_t(b) * (2 + B / 2));
      return;
  }
}

void kv_dequantize_row(KvType t, const uint8_t* in, int head_dim, float* out) {
  const int B = kv_quant_block(t, head_dim);
  uint16_t h;
  switch (t) {
    case KvType::kF16:
      for (int d = 0; d < head_dim; ++d) {
        std::memcpy(&h, in + 2 * d, 2);
        out[d] = fp16_to_fp32(h);
      }
      return;
    case KvType::kQ8_0:
      for (int b = 0; b < head_dim / B; ++b) {
        const uint8_t* blk = in + size_t(b) * (2 + B);
        std::memcpy(&h, blk, 2);
        const float d = fp16_to_fp32(h);
        const auto* q = reinterpret_cast<const int8_t*>(blk + 2);
        for (int j = 0; j < B; ++j) out[b * B + j] = d * float(q[j]);
      }
      return;
    case KvType::kQ4_0:
      for (int b = 0; b < head_dim / B; ++b) {
        const uint8_t* blk = in + size_t(b) * (2 + B / 2);
        std::memcpy(&h, blk, 2);
        const float d = fp16_to_fp32(h);
        const uint8_t* qs = blk + 2;
        for (int j = 0; j < B / 2; ++j) {
          out[b * B + j] = d * float(int(qs[j] & 15) - 8);
          out[b * B + B / 2 + j] = d * float(int(qs[j] >> 4) - 8);
        }
      }
      return;
  }
}

void kv_row_levels(KvType t, const uint8_t* in, int head_dim, int8_t* levels, float* scales) {
  const int B = kv_quant_block(t, head_dim);
  const size_t bb = t == KvType::kQ8_0 ? size_t(2 + B) : size_t(2 + B / 2);
  for (int b = 0; b < head_dim / B; ++b) {
    const uint8_t* blk = in + size_t(b) * bb;
    uint16_t h;
    std::memcpy(&h, blk, 2);
    scales[b] = fp16_to_fp32(h);
    int8_t* l = levels + b * B;
    if (t == KvType::kQ8_0) {
      std::memcpy(l, blk + 2, size_t(B));
    } else {
      for (int j = 0; j < B / 2; ++j) {
        l[j] = int8_t(int(blk[2 + j] & 15) - 8);
        l[B / 2 + j] = int8_t(int(blk[2 + j] >> 4) - 8);
      }
    }
  }
}

}  // namespace pc
