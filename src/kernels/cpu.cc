// CPU feature detection for kernel dispatch.
//
// A SIMD level is usable only if the processor reports the instructions (CPUID)
// AND the operating system saves/restores the matching register state on context
// switches (OSXSAVE set, and the right bits of XCR0 read with XGETBV). Without
// the OS part, the first AVX instruction faults even though CPUID lists it.
//
//   Avx2:   CPUID.1:ECX  OSXSAVE(27) AVX(28) FMA(12) F16C(29), CPUID.7.0:EBX AVX2(5),
//           XCR0 bits 1,2 (SSE + AVX/YMM state).
//   AvxVnni: Avx2 plus CPUID.7.1:EAX AVX-VNNI(4) (the same YMM state).
//   Avx512: Avx2 plus CPUID.7.0:EBX AVX512F(16) DQ(17) BW(30) VL(31) and
//           CPUID.7.0:ECX AVX512_VNNI(11) (Ice Lake / Zen 4 and later; without
//           VNNI the machine runs Avx2), XCR0 bits 5,6,7 (opmask, ZMM0-15
//           upper halves, ZMM16-31).
//
// Avx512 has its own prompt-batch matmul tiles (Q8_0 / Q4_0 / Q4_K / Q5_K /
// F32 / F16 / BF16) and attention tiles (kernels_avx512.cc); everything else runs the
// Avx2 code on it.
#include "kernels/cpu.h"

#include <atomic>
#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define PC_X86 1
#endif

namespace pc {

namespace {

#if defined(PC_X86)
uint64_t read_xcr0() {
  uint32_t eax = 0, edx = 0;
  // xgetbv with ECX = 0; encoded as bytes so no -mxsave is needed.
  __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

bool avx_vnni_uncached() {
  if (__get_cpuid_max(0, nullptr) < 7) return false;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  __cpuid_count(7, 1, eax, ebx, ecx, edx);
  return eax & (1u << 4);
}

CpuLevel detect_uncached() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return CpuLevel::Scalar;
  const bool osxsave = ecx & (1u << 27);
  const bool avx = ecx & (1u << 28);
  const bool fma = ecx & (1u << 12);
  const bool f16c = ecx & (1u << 29);
  if (!osxsave || !avx || !fma || !f16c) return CpuLevel::Scalar;

  const uint64_t xcr0 = read_xcr0();
  if ((xcr0 & 0x6) != 0x6) return CpuLevel::Scalar;  // XMM + YMM state enabled by the OS

  unsigned max_leaf = __get_cpuid_max(0, nullptr);
  if (max_leaf < 7) return CpuLevel::Scalar;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  const bool avx2 = ebx & (1u << 5);
  if (!avx2) return CpuLevel::Scalar;

  const bool avx512 = (ebx & (1u << 16)) && (ebx & (1u << 17)) && (ebx & (1u << 30)) &&
                      (ebx & (1u << 31)) && (ecx & (1u << 11));
  if (avx512 && (xcr0 & 0xE6) == 0xE6) return CpuLevel::Avx512;
  return avx_vnni_uncached() ? CpuLevel::AvxVnni : CpuLevel::Avx2;
}
#else
bool avx_vnni_uncached() { return false; }
CpuLevel detect_uncached() { return CpuLevel::Scalar; }
#endif

// `want`, lowered to what this machine runs: at most the detected level, and
// Avx2 for AvxVnni without AVX-VNNI (an AVX-512 machine may lack it).
int runnable(int want) {
  const int best = static_cast<int>(detect_cpu_level());
  if (want > best) want = best;
  if (want < 0) want = 0;
  if (want == static_cast<int>(CpuLevel::AvxVnni) && !cpu_has_avx_vnni()) want = static_cast<int>(CpuLevel::Avx2);
  return want;
}

std::atomic<int>& cap_slot() {
  static std::atomic<int> slot{static_cast<int>(CpuLevel::Avx512)};
  return slot;
}

std::atomic<int>& level_slot() {
  static std::atomic<int> slot{static_cast<int>(default_cpu_level())};
  return slot;
}

}  // namespace

CpuLevel detect_cpu_level() {
  static const CpuLevel detected = detect_uncached();
  return detected;
}

bool cpu_has_avx_vnni() {
  static const bool has = detect_cpu_level() >= CpuLevel::Avx2 && avx_vnni_uncached();
  return has;
}

CpuLevel default_cpu_level() { return static_cast<CpuLevel>(runnable(static_cast<int>(kernel_cap()))); }

CpuLevel kernel_cap() { return static_cast<CpuLevel>(cap_slot().load(std::memory_order_relaxed)); }

void set_kernel_cap(CpuLevel cap) {
  cap_slot().store(static_cast<int>(cap), std::memory_order_relaxed);
  set_cpu_level(default_cpu_level());
}

CpuLevel cpu_level() { return static_cast<CpuLevel>(level_slot().load(std::memory_order_relaxed)); }

void set_cpu_level(CpuLevel level) { level_slot().store(runnable(static_cast<int>(level)), std::memory_order_relaxed); }

std::string cpu_level_name(CpuLevel level) {
  switch (level) {
    case CpuLevel::Scalar: return "scalar";
    case CpuLevel::Avx2: return "avx2";
    case CpuLevel::AvxVnni: return "avxvnni";
    case CpuLevel::Avx512: return "avx512";
  }
  return "unknown";
}

bool cpu_level_from_name(const std::string& name, CpuLevel* level) {
  for (CpuLevel l : {CpuLevel::Scalar, CpuLevel::Avx2, CpuLevel::AvxVnni, CpuLevel::Avx512}) {
    if (name == cpu_level_name(l)) {
      *level = l;
      return true;
    }
  }
  return false;
}

}  // namespace pc
