#include "engine/relocation.h"

#include <optional>

#include "kv/kv_page_store.h"
#include "model/rope_shift.h"

namespace pc {

bool relocated_copy(PagePool& pool, const Model& model, std::span<const PageSlice> src, int32_t shift,
                    PageTable& out) {
  KvPageStore& kv = *pool.store();
  std::optional<KeyShift> rot;
  if (shift != 0) rot.emplace(model, shift);
  for (const PageSlice& s : src) {
    int32_t done = 0;
    while (done < s.size()) {
      // Fill the table's last page, then fresh ones.
      if (!out.prepare_append(1)) return false;
      const SlotRef first = out.appended()[0];
      const int32_t room = pool.page_size() - first.slot;
      const int32_t n = std::min(room, s.size() - done);
      if (n > 1 && !out.prepare_append(n - 1)) return false;
      if (rot)
        rot->copy_slots(kv, first.page, first.slot, s.page, s.begin + done, n);
      else
        kv.copy_range(first.page, first.slot, s.page, s.begin + done, n);
      pool.set_fill(first.page, first.slot + n);
      done += n;
    }
  }
  return true;
}

}  // namespace pc
