#include "kv/kv_page_store.h"

#include <algorithm>
#include <stdexcept>

namespace pc {

KvPageStore::KvPageStore(KvShape shape, int32_t n_pages)
    : shape_(shape), n_pages_(n_pages), pos_(size_t(std::max(n_pages, 0)) * shape.page_size, -1) {
  if (n_pages <= 0) throw std::invalid_argument("KV page store: n_pages must be positive");
}

}  // namespace pc
