#include "engine/relocation.h"

#include "kv/kv_page_store.h"
#include "model/rope_shift.h"

namespace pc {

bool relocated_copy(PagePool& pool, const Model& model, std::span<const PageSlice> src, int32_t shift,
                    PageTable& out) {
  KvPageStore& kv = *pool.store();
  for (const PageSlice& s : src) {
    int32_t done = 0;
    while (done < s.size()) {
      // Fill the table's last page, then fresh ones.
      if (!out.prepare_append(1)) return false;
      const SlotRef first = out.appended()[0];
      const int32_t room = pool.page_size() - first.slot;
      const int32_t n = std::min(room, s.size() - done);
      if (n > 1 && !out.prepare_append(n - 1)) return false;
      kv.copy_range(first.page, first.slot, s.page, s.begin + done, n);
      pool.set_fill(first.page, first.slot + n);
      done += n;
    }
  }
  if (shift != 0)
    for (const PageEntry& e : out.entries()) shift_positions(model, kv, e.page, e.filled, shift);
  return true;
}

}  // namespace pc
