// Moving cached keys to other positions. K is stored after RoPE, and RoPE
// rotates each pair of dimensions by an angle proportional to the position, so
// K computed at position p and rotated by `shift` equals K computed at
// p + shift — exactly in real arithmetic; here up to the rounding of the
// stored values (F16, or the KV type's quantization: the rotated row is stored
// as a write would store it). Relocating the same keys by the same shift gives
// the same bytes, which is what keeps PML hits equal to misses within a KV type
// (docs/architecture.md "KV types"). V does not depend on the position.
#pragma once
#include <cstdint>

namespace pc {

class KvPageStore;
class Model;

// Rotates the K of slots [0, n_slots) of `page` (every layer and KV head) by
// `shift` positions and adds `shift` to their position ids.
void shift_positions(const Model& model, KvPageStore& kv, int32_t page, int32_t n_slots, int32_t shift);

}  // namespace pc
