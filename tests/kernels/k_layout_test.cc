// Tests of the K page layout (kernels/k_layout.h): k_index() places every (slot,
// dimension) of a head's slab at its own index inside the slab, with each
// block of 8 slots dimension-major, and copy_k_slots() copies exactly the
// keys of the first n slots.
#include "kernels/k_layout.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace pc {
namespace {

TEST(KLayout, IndexIsABijectionOntoTheSlab) {
  for (int P : {1, 4, 8, 12, 16, 20, 32})
    for (int hd : {1, 2, 20, 64}) {
      std::vector<int> seen(size_t(P) * hd, 0);
      for (int s = 0; s < P; ++s)
        for (int d = 0; d < hd; ++d) {
          const size_t i = k_index(P, hd, s, d);
          ASSERT_LT(i, seen.size()) << "P=" << P << " hd=" << hd << " s=" << s << " d=" << d;
          ++seen[i];
        }
      for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], 1) << "P=" << P << " hd=" << hd << " i=" << i;
    }
}

TEST(KLayout, BlocksOfEightAreDimensionMajor) {
  // One dimension of a full block's 8 keys is 8 consecutive elements (what
  // the attention kernel loads as one vector); a narrow last block (P % 8)
  // packs its keys just as tightly.
  const int hd = 64;
  for (int P : {16, 12}) {
    for (int s = 0; s < P; ++s)
      for (int d = 0; d < hd; ++d) {
        const int w = k_block_width(P, s);
        EXPECT_EQ(w, s < 8 ? 8 : P - 8);
        EXPECT_EQ(k_index(P, hd, s, d), size_t(s / 8 * 8) * hd + size_t(d) * w + s % 8);
      }
  }
}

TEST(KLayout, CopyKSlotsCopiesExactlyTheFirstSlots) {
  for (int P : {12, 16})
    for (int n = 0; n <= P; ++n) {
      const int hd = 20;
      std::vector<uint16_t> src(size_t(P) * hd), dst(src.size(), 0xFFFF);
      for (size_t i = 0; i < src.size(); ++i) src[i] = uint16_t(i + 1);
      copy_k_slots(dst.data(), src.data(), P, hd, n);
      for (int s = 0; s < P; ++s)
        for (int d = 0; d < hd; ++d) {
          const size_t i = k_index(P, hd, s, d);
          EXPECT_EQ(dst[i], s < n ? src[i] : uint16_t(0xFFFF)) << "P=" << P << " n=" << n << " s=" << s << " d=" << d;
        }
    }
}

}  // namespace
}  // namespace pc
