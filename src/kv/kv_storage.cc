#include "kv/kv_storage.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <stdexcept>

namespace pc {

KvStorage::KvStorage(KvShape shape, int32_t n_pages)
    : shape_(shape), n_pages_(n_pages), bytes_(size_t(n_pages) * shape.bytes_per_page()),
      pos_(size_t(std::max(n_pages, 0)) * shape.page_size, -1) {
  if (n_pages <= 0) throw std::invalid_argument("KvStorage: n_pages must be positive");
  void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
  // A decode step reads a few KiB of every page of the context per layer and
  // head, pages far apart: with 2 MiB pages far fewer TLB misses (advice only).
  madvise(p, bytes_, MADV_HUGEPAGE);
#endif
  data_ = static_cast<uint16_t*>(p);
}

KvStorage::~KvStorage() { munmap(data_, bytes_); }

void KvStorage::copy_slots(int32_t dst, int32_t src, int n_slots) {
  const size_t row = size_t(shape_.head_dim);
  for (int l = 0; l < shape_.n_layer; ++l) {
    for (int h = 0; h < shape_.n_kv_head; ++h) {
      const size_t off = size_t(h) * shape_.page_size * row;
      copy_k_slots(k(dst, l) + off, k(src, l) + off, shape_.page_size, shape_.head_dim, n_slots);
      std::memcpy(v(dst, l) + off, v(src, l) + off, n_slots * row * sizeof(uint16_t));
    }
  }
  std::memcpy(pos(dst), pos(src), n_slots * sizeof(int32_t));
}

}  // namespace pc
