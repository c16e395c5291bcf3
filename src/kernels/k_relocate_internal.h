// The AVX2 form of copy_k_f16 (k_relocate.h); k_relocate.cc calls it when
// cpu_level() runs AVX2. Bitwise equal to the scalar form.
#pragma once
#include <cstdint>

#include "kernels/k_relocate.h"

namespace pc {

void copy_k_f16_avx2(uint16_t* dst, int dst_slot, const uint16_t* src, int src_slot, int n, int page_size,
                     int head_dim, const KeyRotation* rot, KeyCopyScratch& scratch);

}  // namespace pc
