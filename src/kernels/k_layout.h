// Layout of the keys in a KV page: the attention kernels read keys in this
// form straight from the pages, so the kernels own it; the KV page stores
// keep and serialize K blocks laid out this way.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace pc {

// Index of key element (slot s, dimension d) in one KV head's K slab of a page:
// the slots in blocks of 8 ([8j, 8j+8); a page's last block is narrower when
// page_size is not a multiple of 8), each block [head_dim][width].
inline constexpr int k_block_width(int page_size, int s) {
  return page_size - (s & ~7) < 8 ? page_size - (s & ~7) : 8;
}
inline constexpr size_t k_index(int page_size, int head_dim, int s, int d) {
  return size_t(s & ~7) * head_dim + size_t(d) * k_block_width(page_size, s) + (s & 7);
}

// Copies the keys of slots [0, n) of one head's K slab; the rest of dst is
// left as it was.
inline void copy_k_slots(uint16_t* dst, const uint16_t* src, int page_size, int head_dim, int n) {
  const int whole = n & ~7;  // whole blocks are contiguous
  std::memcpy(dst, src, size_t(whole) * head_dim * sizeof(uint16_t));
  for (int s = whole; s < n; ++s)
    for (int d = 0; d < head_dim; ++d) {
      const size_t i = k_index(page_size, head_dim, s, d);
      dst[i] = src[i];
    }
}

}  // namespace pc
