// Tests of the fused copy + RoPE rotation of stored keys (kernels/k_relocate.h)
// against the element-wise definition it replaces: each key decoded to F32
// through k_index(), rotated by Rope::apply, encoded back (F16 rounded to nearest
// even, or the row requantized). Bitwise, at every CPU level, for random keys at
// unaligned slot ranges (partial blocks, a page's narrow last block), both RoPE
// layouts, n_rot below head_dim, and every KV type; slots outside the range keep
// their bytes.
#include "kernels/k_relocate.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "cpu_levels.h"
#include "gguf/quants.h"
#include "kernels/elementwise.h"
#include "kernels/k_layout.h"

namespace pc {
namespace {

// Random finite F16 keys, mostly of unit scale, some large (rotations that
// overflow to infinity included) and some tiny (F16 subnormals).
std::vector<uint16_t> random_keys(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.f, 1.f);
  std::uniform_int_distribution<int> kind(0, 15);
  std::vector<uint16_t> out(n);
  for (auto& h : out) {
    const int k = kind(rng);
    const float scale = k == 0 ? 60000.f : k == 1 ? 1e-6f : k < 4 ? 100.f : 1.f;
    h = fp32_to_fp16(nd(rng) * scale);
  }
  return out;
}

// The rotation by `shift` positions of a RoPE with n_rot dimensions.
struct Rotation {
  Rope rope;
  std::vector<float> cs;
  KeyRotation rot;
  Rotation(int n_rot, bool neox, int32_t shift, float base = 10000.f)
      : rope(RopeParams{n_rot, base, 1.f, neox}), cs(size_t(n_rot)) {
    rope.angles(shift, cs.data());
    rot = KeyRotation{cs.data(), int(rope.n_pairs()), neox};
  }
};

// What the store did before the fused copy: copy key by key through k_index(), then
// decode, Rope::apply, encode each copied key.
void reference_f16(uint16_t* dst, int ds, const uint16_t* src, int ss, int n, int P, int hd, const Rotation* r) {
  std::vector<float> x(static_cast<size_t>(hd));
  for (int t = 0; t < n; ++t) {
    for (int d = 0; d < hd; ++d) dst[k_index(P, hd, ds + t, d)] = src[k_index(P, hd, ss + t, d)];
    if (!r) continue;
    for (int d = 0; d < hd; ++d) x[size_t(d)] = fp16_to_fp32(dst[k_index(P, hd, ds + t, d)]);
    r->rope.apply(x.data(), r->cs.data());
    for (int d = 0; d < hd; ++d) dst[k_index(P, hd, ds + t, d)] = fp32_to_fp16(x[size_t(d)]);
  }
}

TEST(KRelocate, F16CopyRotatedMatchesElementWiseAtEveryLevel) {
  test::LevelGuard guard;
  std::mt19937 rng(37);
  KeyCopyScratch scratch;
  for (CpuLevel level : test::levels()) {
    set_cpu_level(level);
    for (int P : {16, 12, 20, 64})
      for (int hd : {8, 20, 64, 128})
        for (int variant = 0; variant < 5; ++variant) {
          // variant 0: no rotation; 1-2: every dimension rotated; 3-4: n_rot = hd / 2 (or a
          // smaller even count). Odd variants NeoX pairs.
          const int n_rot = variant == 0 ? 0 : variant <= 2 ? hd : (hd / 2) & ~1;
          const bool neox = variant % 2 == 1;
          const Rotation r(n_rot, neox, int32_t(rng() % 4000) - 2000);
          const std::vector<uint16_t> src = random_keys(size_t(P) * hd, rng);
          const std::vector<uint16_t> before = random_keys(size_t(P) * hd, rng);
          for (int rep = 0; rep < 12; ++rep) {
            const int n = 1 + int(rng() % uint32_t(P));
            const int ss = int(rng() % uint32_t(P - n + 1)), ds = int(rng() % uint32_t(P - n + 1));
            std::vector<uint16_t> got = before, want = before;
            copy_k_f16(got.data(), ds, src.data(), ss, n, P, hd, variant ? &r.rot : nullptr, scratch);
            reference_f16(want.data(), ds, src.data(), ss, n, P, hd, variant ? &r : nullptr);
            ASSERT_EQ(got, want) << cpu_level_name(level) << " P=" << P << " hd=" << hd << " variant=" << variant
                                 << " n=" << n << " src_slot=" << ss << " dst_slot=" << ds;
          }
        }
  }
}

TEST(KRelocate, F16WholePagesAndSingleSlots) {
  // The extremes: a whole page at slot 0 (every block full, aligned) and one slot
  // moved across a block boundary, at every level.
  test::LevelGuard guard;
  std::mt19937 rng(5);
  KeyCopyScratch scratch;
  const int P = 16, hd = 64;
  const Rotation r(hd, false, 777);
  const std::vector<uint16_t> src = random_keys(size_t(P) * hd, rng);
  for (CpuLevel level : test::levels()) {
    set_cpu_level(level);
    for (auto [ss, ds, n] : {std::tuple{0, 0, P}, std::tuple{7, 8, 1}, std::tuple{8, 7, 1}, std::tuple{15, 0, 1}}) {
      std::vector<uint16_t> got(src.size(), 0x3c00), want = got;
      copy_k_f16(got.data(), ds, src.data(), ss, n, P, hd, &r.rot, scratch);
      reference_f16(want.data(), ds, src.data(), ss, n, P, hd, &r);
      ASSERT_EQ(got, want) << cpu_level_name(level) << " " << ss << " -> " << ds << " n=" << n;
    }
  }
}

TEST(KRelocate, QuantizedRowsMatchDequantizeRotateRequantize) {
  std::mt19937 rng(8);
  std::normal_distribution<float> nd(0.f, 1.f);
  KeyCopyScratch scratch;
  for (KvType t : {KvType::kQ8_0, KvType::kQ4_0})
    for (int hd : {16, 64, 128})
      for (int variant = 0; variant < 5; ++variant) {
        const int n_rot = variant == 0 ? 0 : variant <= 2 ? hd : hd / 2;
        const bool neox = variant % 2 == 1;
        const Rotation r(n_rot, neox, 1234 - 97 * variant);
        const size_t rb = kv_row_bytes(t, hd);
        const int n = 13;
        std::vector<uint8_t> src(rb * n), got(rb * n), want(rb * n);
        std::vector<float> x(static_cast<size_t>(hd));
        for (int i = 0; i < n; ++i) {
          for (float& v : x) v = nd(rng);
          kv_quantize_row(t, x.data(), hd, src.data() + i * rb);
        }
        copy_k_rows(t, got.data(), src.data(), n, hd, variant ? &r.rot : nullptr, scratch);
        for (int i = 0; i < n; ++i) {  // no rotation: the rows' bytes, as a copy
          kv_dequantize_row(t, src.data() + i * rb, hd, x.data());
          r.rope.apply(x.data(), r.cs.data());
          if (variant)
            kv_quantize_row(t, x.data(), hd, want.data() + i * rb);
          else
            std::memcpy(want.data() + i * rb, src.data() + i * rb, rb);
        }
        ASSERT_EQ(got, want) << kv_type_name(t) << " hd=" << hd << " variant=" << variant;
      }
}

}  // namespace
}  // namespace pc
