// The machine's peak rate of int8 multiply-adds, measured with the instruction
// the quantized matmul kernels of a CPU level are built on: AVX-512 VNNI's
// vpdpbusd (64 u8 × s8 products summed into 16 int32 lanes), or AVX2's
// vpmaddubsw + vpmaddwd + vpaddd (32 products per three instructions). Every
// thread of a pool runs independent chains of them with operands in registers,
// so only the core's issue rate for that instruction bounds it. A prompt's
// quantized matmuls do one such product per weight and token, which makes
// weights × prompt tokens/s over this peak the share of it a prefill reaches.
#pragma once
#include <cstdint>

#include "kernels/cpu.h"

namespace pc {

class ThreadPool;

struct Int8Peak {
  double gmacs = 0;                // best pass: int8 multiply-adds / s / 1e9, all threads
  const char* instruction = "";    // what was measured ("vpdpbusd", "vpmaddubsw+vpmaddwd")
  int threads = 0;
  int passes = 0;
};

// Runs `passes` passes on all of the pool's threads at `level` and returns the
// fastest. CpuLevel::Scalar has no int8 vector instruction: gmacs 0.
Int8Peak measure_int8_peak(ThreadPool& pool, CpuLevel level, int passes = 5);

}  // namespace pc
