#include "kv/kv_storage.h"

#include <cstring>
#include <stdexcept>

namespace pc {

KvStorage::KvStorage(KvShape shape, int32_t n_pages)
    : shape_(shape), n_pages_(n_pages),
      data_(size_t(n_pages) * shape.bytes_per_page() / sizeof(uint16_t)),
      pos_(size_t(n_pages) * shape.page_size, -1) {
  if (n_pages <= 0) throw std::invalid_argument("KvStorage: n_pages must be positive");
}

void KvStorage::copy_slots(int32_t dst, int32_t src, int n_slots) {
  const size_t row = size_t(shape_.head_dim);
  for (int l = 0; l < shape_.n_layer; ++l) {
    for (int h = 0; h < shape_.n_kv_head; ++h) {
      const size_t off = size_t(h) * shape_.page_size * row;
      std::memcpy(k(dst, l) + off, k(src, l) + off, n_slots * row * sizeof(uint16_t));
      std::memcpy(v(dst, l) + off, v(src, l) + off, n_slots * row * sizeof(uint16_t));
    }
  }
  std::memcpy(pos(dst), pos(src), n_slots * sizeof(int32_t));
}

}  // namespace pc
