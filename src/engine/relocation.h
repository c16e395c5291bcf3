// KV moved to other positions: a copy of some cached slots into fresh pages, with K
// rotated by RoPE for the position shift (model/rope_shift.h). Used for PML's compact
// layout (module segments) and for blocks reused at another position. Relocation is
// deterministic: a copy made twice is the same bit for bit.
#pragma once
#include <cstdint>
#include <span>

#include "kv/page_pool.h"
#include "kv/page_table.h"

namespace pc {

class Model;

// Appends to `out` the KV of the slices, in order, moved by `shift` positions (only the
// slots it writes are rotated): packed after the table's last token — into its last
// page where that page takes appends (PageTable::prepare_append), then fresh pages; an
// empty table is filled from slot 0 of a fresh page. False when the pool has no pages
// left (out then holds what was copied so far; the caller drops or truncates it).
bool relocated_copy(PagePool& pool, const Model& model, std::span<const PageSlice> src, int32_t shift,
                    PageTable& out);

}  // namespace pc
