// matmul dispatcher: validates the weight view, picks the code path for
// cpu_level(), quantizes activations (quantized weight types), splits y into
// tasks and runs them on the pool.
//
// Work split: tasks are rectangles of y, rows [r0,r1) × columns [c0,c1); K is
// never split, and each element is computed by the kernel's fixed per-element
// instruction sequence (see matmul_avx2.cc / matmul_scalar.cc), so the task
// grid may freely depend on m, n and the thread count without changing any bit
// of the result.
//
// Scratch: quantized activations live in a grow-only buffer owned by the
// calling thread (thread_local), and kernels that repack weights per task
// (AVX2 Q8_0 / Q4_0 prompt batches) get a grow-only buffer of the thread running the
// task, so steady-state calls allocate nothing and matmul calls from
// different threads do not interfere. A ThreadPool itself is
// not reentrant, so one pool must not run two matmuls at once.
#include "kernels/matmul.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "gguf/error.h"
#include "kernels/cpu.h"
#include "kernels/matmul_internal.h"
#include "kernels/thread_pool.h"

namespace pc {

namespace {

struct Scratch {
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> buf;
  size_t cap = 0;

  uint8_t* get(size_t bytes) {
    if (bytes > cap && !grow(bytes)) throw Error("matmul: out of memory for scratch");
    return buf.get();
  }
  // For pool workers, where an exception cannot propagate.
  uint8_t* get_or_abort(size_t bytes) {
    if (bytes > cap && !grow(bytes)) {
      std::fputs("matmul: out of memory for kernel scratch\n", stderr);
      std::abort();
    }
    return buf.get();
  }
  bool grow(size_t bytes) {
    size_t want = bytes + bytes / 4;
    want = (want + 63) & ~size_t(63);
    void* p = std::aligned_alloc(64, want);
    if (!p) return false;
    buf.reset(static_cast<uint8_t*>(p));
    cap = want;
    return true;
  }
};

thread_local Scratch t_scratch;       // quantized activations (calling thread)
thread_local Scratch t_task_scratch;  // kernel scratch of whichever thread runs a task

// The level whose code actually exists: no AVX-512 path yet, so Avx512 runs
// the Avx2 kernels.
CpuLevel effective_level() {
  CpuLevel l = cpu_level();
  if (l == CpuLevel::Avx512) l = CpuLevel::Avx2;
  return l;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

void matmul(const WeightView& w, const float* x, int64_t m, float* y, ThreadPool& pool) {
  const CpuLevel level = effective_level();
  kern::TaskKernel kernel = nullptr;
  if (level == CpuLevel::Avx2) kernel = kern::avx2_kernel(w.type);
  if (!kernel) kernel = kern::scalar_kernel(w.type);
  if (!kernel) throw Error("matmul: unsupported weight type " + ggml_type_name(w.type));
  const int64_t be = ggml_block_elems(w.type);
  if (w.k <= 0 || w.n < 0 || be <= 0 || w.k % be != 0)
    throw Error("matmul: bad shape for " + ggml_type_name(w.type) + ": k=" + std::to_string(w.k));
  if (w.row_bytes < ggml_row_bytes(w.type, w.k))
    throw Error("matmul: row_bytes too small for " + ggml_type_name(w.type));
  if (m <= 0 || w.n == 0) return;

  static std::atomic<uint64_t> calls{0};
  kern::MatmulArgs a;
  a.call_id = ++calls;
  a.w = w.data;
  a.row_bytes = w.row_bytes;
  a.k = w.k;
  a.x = x;
  a.y = y;
  a.ldy = w.n;

  const int threads = pool.size();

  // Quantize activations once per call (rows are independent).
  if (const int64_t qk = kern::act_block(w.type)) {
    a.al = kern::act_layout(w.k, qk, level == CpuLevel::Avx2 && kern::avx2_wants_x16(w.type, m));
    uint8_t* buf = t_scratch.get(static_cast<size_t>(a.al.stride * m));
    a.act = buf;
    kern::QuantizeRowFn q = kern::scalar_quantize_row;
    if (level == CpuLevel::Avx2 && kern::avx2_quantize_row_fn()) q = kern::avx2_quantize_row_fn();
    const int64_t k = w.k;
    const kern::ActLayout al = a.al;
    if (threads > 1 && m * k >= (int64_t(1) << 15)) {
      const int64_t rows_per = ceil_div(m, int64_t(threads) * 4);
      pool.parallel_for(ceil_div(m, rows_per), [&](int64_t t, int) {
        const int64_t r1 = (t + 1) * rows_per < m ? (t + 1) * rows_per : m;
        for (int64_t r = t * rows_per; r < r1; ++r) q(x + r * k, k, al, buf + r * al.stride);
      });
    } else {
      for (int64_t r = 0; r < m; ++r) q(x + r * k, k, al, buf + r * al.stride);
    }
  }

  // Task grid. Row blocks of up to 64 rows;
  // column blocks sized so one block of weights (as the kernel holds them: a
  // repacked panel for Q8_0 / Q4_0 prompt batches) stays cache resident (~96 KiB)
  // while the row blocks reuse it, and small enough for >= ~8 tasks per thread
  // in decode so the dynamic scheduling can balance.
  const int64_t n = w.n;
  const int64_t rb = m <= 64 ? m : 64;
  const int64_t n_rb = ceil_div(m, rb);
  const int64_t col_bytes = level == CpuLevel::Avx2 ? kern::avx2_task_col_bytes(w.type, w.k, m) : 0;
  int64_t cb = (96 * 1024) / (col_bytes > 0 ? col_bytes : w.row_bytes > 0 ? w.row_bytes : 1);
  const int64_t want_tasks = int64_t(threads) * 8;
  if (threads > 1 && n_rb * ceil_div(n, cb) < want_tasks) cb = ceil_div(n, ceil_div(want_tasks, n_rb));
  cb = (cb + 7) & ~int64_t(7);  // whole 4-column decode tiles and 8-column groups
  if (cb < 8) cb = 8;
  if (cb > n) cb = n;
  const int64_t n_cb = ceil_div(n, cb);

  const int64_t task_bytes = level == CpuLevel::Avx2 ? kern::avx2_task_scratch_bytes(w.type, w.k, cb) : 0;
  if (task_bytes) t_task_scratch.get(size_t(task_bytes));  // the caller's, outside the pool
  pool.parallel_for(n_rb * n_cb, [&](int64_t t, int) {
    // Consecutive tasks share a column block (its weights stay in cache).
    const int64_t ci = t / n_rb, ri = t % n_rb;
    const int64_t r0 = ri * rb, r1 = r0 + rb < m ? r0 + rb : m;
    const int64_t c0 = ci * cb, c1 = c0 + cb < n ? c0 + cb : n;
    uint8_t* scratch = task_bytes ? t_task_scratch.get_or_abort(size_t(task_bytes)) : nullptr;
    kernel(a, r0, r1, c0, c1, scratch);
  });
}

}  // namespace pc
