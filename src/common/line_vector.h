// LineVector: a std::vector whose storage starts on a 64-byte cache line, for
// the activation buffers the SIMD kernels read and write in whole vectors.
// glibc's malloc aligns to 16 bytes, and a large block (from mmap) starts 16
// bytes past a page, so every 64-byte load or store of such a buffer straddles
// two lines: a 512-row matmul with its input and output on lines ran 1.01x
// (Q4_K weights) and 1.04x (Q8_0) as fast (a Llama-3-8B layer's matrices,
// 2 threads, both forms alternating in one process, Zen 5).
#pragma once
#include <cstddef>
#include <new>
#include <vector>

namespace pc {

template <class T>
struct LineAllocator {
  static constexpr std::size_t kLine = 64;
  using value_type = T;
  LineAllocator() = default;
  template <class U>
  LineAllocator(const LineAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(kLine))); }
  void deallocate(T* p, std::size_t) noexcept { ::operator delete(p, std::align_val_t(kLine)); }
  template <class U>
  bool operator==(const LineAllocator<U>&) const noexcept {
    return true;
  }
};

template <class T>
using LineVector = std::vector<T, LineAllocator<T>>;

}  // namespace pc
