// Repacked weight layouts (weight_repack.h) and the kernels of the paths that
// read them by unpacking (scalar, AVX2).
#include "kernels/weight_repack.h"

#include <cstring>
#include <vector>

#include "common/error.h"
#include "gguf/quants.h"
#include "kernels/matmul_internal.h"

namespace pc {

namespace {

// The parts of a Q4_K / Q5_K block the two layouts share: header (d, dmin and
// the 6-bit scales and mins) and quants.
void repack_header(const uint8_t scales[12], uint8_t scm[12]) {
  uint8_t sc[8], mn[8];
  kern::q4k_scales(scales, sc, mn);
  for (int j = 0; j < 8; ++j) scm[j] = static_cast<uint8_t>(sc[j] | (mn[j] >> 4) << 6);
  for (int j = 0; j < 4; ++j) scm[8 + j] = static_cast<uint8_t>((mn[j] & 0xF) | (mn[j + 4] & 0xF) << 4);
}

void unpack_header(const uint8_t scm[12], uint8_t scales[12]) {
  uint8_t sc[8], mn[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = scm[j] & 63;
    mn[j] = static_cast<uint8_t>((scm[8 + j % 4] >> (j < 4 ? 0 : 4) & 0xF) | (scm[j] >> 6) << 4);
  }
  for (int j = 0; j < 4; ++j) {  // the inverse of q4k_scales()
    scales[j] = static_cast<uint8_t>(sc[j] | (sc[j + 4] >> 4) << 6);
    scales[j + 4] = static_cast<uint8_t>(mn[j] | (mn[j + 4] >> 4) << 6);
    scales[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0xF) | (mn[j + 4] & 0xF) << 4);
  }
}

void repack_quants(const uint8_t in[128], uint8_t out[128]) {
  uint8_t q[256];  // value v of the block: chunk v / 64, low nibbles first
  for (int v = 0; v < 256; ++v) {
    const uint8_t byte = in[32 * (v / 64) + v % 32];
    q[v] = (v % 64) < 32 ? byte & 0xF : byte >> 4;
  }
  for (int p = 0; p < 2; ++p)
    for (int j = 0; j < 64; ++j) out[64 * p + j] = static_cast<uint8_t>(q[128 * p + j] | q[128 * p + 64 + j] << 4);
}

void unpack_quants(const uint8_t in[128], uint8_t out[128]) {
  uint8_t q[256];
  for (int p = 0; p < 2; ++p)
    for (int j = 0; j < 64; ++j) {
      q[128 * p + j] = in[64 * p + j] & 0xF;
      q[128 * p + 64 + j] = in[64 * p + j] >> 4;
    }
  for (int ch = 0; ch < 4; ++ch)
    for (int l = 0; l < 32; ++l) out[32 * ch + l] = static_cast<uint8_t>(q[64 * ch + l] | q[64 * ch + 32 + l] << 4);
}

}  // namespace

void repack_row_q4_kr(const uint8_t* src, uint8_t* dst, int64_t k) {
  for (int64_t b = 0; b < k / 256; ++b) {
    BlockQ4_K in;
    std::memcpy(&in, src + b * sizeof(BlockQ4_K), sizeof in);
    BlockQ4_KR out;
    repack_header(in.scales, out.scm);
    out.d = in.d;
    out.dmin = in.dmin;
    repack_quants(in.qs, out.qs);
    std::memcpy(dst + b * sizeof(BlockQ4_KR), &out, sizeof out);
  }
}

void unpack_row_q4_kr(const uint8_t* src, uint8_t* dst, int64_t k) {
  for (int64_t b = 0; b < k / 256; ++b) {
    BlockQ4_KR in;
    std::memcpy(&in, src + b * sizeof(BlockQ4_KR), sizeof in);
    BlockQ4_K out;
    unpack_header(in.scm, out.scales);
    out.d = in.d;
    out.dmin = in.dmin;
    unpack_quants(in.qs, out.qs);
    std::memcpy(dst + b * sizeof(BlockQ4_K), &out, sizeof out);
  }
}

void repack_row_q5_kr(const uint8_t* src, uint8_t* dst, int64_t k) {
  for (int64_t b = 0; b < k / 256; ++b) {
    BlockQ5_K in;
    std::memcpy(&in, src + b * sizeof(BlockQ5_K), sizeof in);
    BlockQ5_KR out;
    repack_header(in.scales, out.scm);
    out.d = in.d;
    out.dmin = in.dmin;
    std::memcpy(out.qh, in.qh, sizeof out.qh);
    repack_quants(in.qs, out.qs);
    std::memcpy(dst + b * sizeof(BlockQ5_KR), &out, sizeof out);
  }
}

void unpack_row_q5_kr(const uint8_t* src, uint8_t* dst, int64_t k) {
  for (int64_t b = 0; b < k / 256; ++b) {
    BlockQ5_KR in;
    std::memcpy(&in, src + b * sizeof(BlockQ5_KR), sizeof in);
    BlockQ5_K out;
    unpack_header(in.scm, out.scales);
    out.d = in.d;
    out.dmin = in.dmin;
    std::memcpy(out.qh, in.qh, sizeof out.qh);
    unpack_quants(in.qs, out.qs);
    std::memcpy(dst + b * sizeof(BlockQ5_K), &out, sizeof out);
  }
}

void repack_rows(GgmlType from, GgmlType to, const uint8_t* src, uint8_t* dst, int64_t k, int64_t n) {
  void (*row)(const uint8_t*, uint8_t*, int64_t) = nullptr;
  if (from == GgmlType::Q4_K && to == GgmlType::Q4_K_R) row = repack_row_q4_kr;
  if (from == GgmlType::Q5_K && to == GgmlType::Q5_K_R) row = repack_row_q5_kr;
  if (!row || k % 256 != 0)
    throw Error("repack_rows: no repacking of " + ggml_type_name(from) + " to " + ggml_type_name(to) +
                " for k=" + std::to_string(k));
  const int64_t in_rb = ggml_row_bytes(from, k), out_rb = ggml_row_bytes(to, k);
  for (int64_t r = 0; r < n; ++r) row(src + r * in_rb, dst + r * out_rb, k);
}

namespace kern {

namespace {

// Repacked rows [c0, c1) unpacked to the stored type into a grow-only buffer
// of the running thread, then `inner`'s kernel of that type on them: the
// same bits as that kernel on the stored rows.
void run_unpacked(GgmlType stored, void (*unpack)(const uint8_t*, uint8_t*, int64_t), TaskKernel inner,
                  const MatmulArgs& a, int64_t r0, int64_t r1, int64_t c0, int64_t c1, uint8_t* scratch) {
  thread_local std::vector<uint8_t> rows;
  const int64_t rb = ggml_row_bytes(stored, a.k);
  if (rows.size() < size_t((c1 - c0) * rb)) rows.resize(size_t((c1 - c0) * rb));
  for (int64_t c = c0; c < c1; ++c) unpack(a.w + c * a.row_bytes, rows.data() + (c - c0) * rb, a.k);
  MatmulArgs b = a;
  b.w = rows.data();
  b.row_bytes = rb;
  b.y = a.y + c0;  // column c of a is column c - c0 of b
  inner(b, r0, r1, 0, c1 - c0, scratch);
}

}  // namespace

void task_q4_kr_via_scalar(const MatmulArgs& a, int64_t r0, int64_t r1, int64_t c0, int64_t c1, uint8_t* s) {
  run_unpacked(GgmlType::Q4_K, unpack_row_q4_kr, scalar_kernel(GgmlType::Q4_K), a, r0, r1, c0, c1, s);
}
void task_q4_kr_via_avx2(const MatmulArgs& a, int64_t r0, int64_t r1, int64_t c0, int64_t c1, uint8_t* s) {
  run_unpacked(GgmlType::Q4_K, unpack_row_q4_kr, avx2_kernel(GgmlType::Q4_K), a, r0, r1, c0, c1, s);
}
void task_q5_kr_via_scalar(const MatmulArgs& a, int64_t r0, int64_t r1, int64_t c0, int64_t c1, uint8_t* s) {
  run_unpacked(GgmlType::Q5_K, unpack_row_q5_kr, scalar_kernel(GgmlType::Q5_K), a, r0, r1, c0, c1, s);
}
void task_q5_kr_via_avx2(const MatmulArgs& a, int64_t r0, int64_t r1, int64_t c0, int64_t c1, uint8_t* s) {
  run_unpacked(GgmlType::Q5_K, unpack_row_q5_kr, avx2_kernel(GgmlType::Q5_K), a, r0, r1, c0, c1, s);
}

}  // namespace kern

}  // namespace pc
