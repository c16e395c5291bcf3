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

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "common/error.h"
#include "kernels/cpu.h"
#include "kernels/matmul_internal.h"
#include "kernels/thread_pool.h"
#include "kernels/weight_repack.h"

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

std::atomic<const kern::KernelSet*> g_forced_set{nullptr};

// The kernels for the CPU level in use (nullptr: scalar).
const kern::KernelSet* kernel_set() {
  if (const kern::KernelSet* f = g_forced_set.load(std::memory_order_relaxed)) return f;
  switch (cpu_level()) {
    case CpuLevel::Avx512:
      if (const kern::KernelSet* s = kern::avx512_kernel_set()) return s;
      return kern::avx2_kernel_set();
    case CpuLevel::AvxVnni:  // the AVX2 set, its X16 layouts on AVX-VNNI (x16_kernel_set)
    case CpuLevel::Avx2: return kern::avx2_kernel_set();
    default: return nullptr;
  }
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// One weight matrix of a matmul_many() call, planned.
struct Plan {
  kern::TaskKernel kernel = nullptr;
  kern::MatmulArgs a;
  int64_t rb = 0, n_rb = 0, cb = 0, n_cb = 0;  // n_cb: column blocks
  int64_t task_bytes = 0;
  int64_t first_task = 0;  // index of its first task in the call
  bool whole_columns = false;  // a task = a column block × all row blocks
};

bool same_layout(const kern::ActLayout& p, const kern::ActLayout& q) {
  return p.qk == q.qk && p.d_off == q.d_off && p.bsum_off == q.bsum_off && p.x16_off == q.x16_off &&
         p.bsum32_off == q.bsum32_off && p.stride == q.stride;
}

void check_weight(const WeightView& w) {
  const int64_t be = ggml_block_elems(w.type);
  if (w.k <= 0 || w.n < 0 || be <= 0 || w.k % be != 0)
    throw Error("matmul: bad shape for " + ggml_type_name(w.type) + ": k=" + std::to_string(w.k));
  if (w.row_bytes < ggml_row_bytes(w.type, w.k))
    throw Error("matmul: row_bytes too small for " + ggml_type_name(w.type));
  // Interleaved rows: whole groups, packed (a group spans its rows' bytes).
  const int64_t g = repack_group_rows(w.type);
  if (g > 1 && (w.n % g != 0 || w.row_bytes != ggml_row_bytes(w.type, w.k)))
    throw Error("matmul: " + ggml_type_name(w.type) + " weights come in packed groups of " + std::to_string(g) +
                " rows; got n=" + std::to_string(w.n));
}

}  // namespace

GgmlType matmul_repacked_type(GgmlType t) {
  const kern::KernelSet* s = kernel_set();
  // The X16 layouts wherever a SIMD set runs (AVX2 through the 16-lane
  // kernels' emulation); the scalar path reads the stored types, with the
  // same bits.
  if (!s) return t;
  const X16Layout* l = x16_layout(t, /*by_stored=*/true);
  return l ? l->x16 : t;
}

void kern::force_kernel_set(const KernelSet* set) { g_forced_set.store(set, std::memory_order_relaxed); }

void matmul(const WeightView& w, const float* x, int64_t m, float* y, ThreadPool& pool) {
  const MatmulOut out{w, y};
  matmul_many(std::span<const MatmulOut>(&out, 1), x, m, pool);
}

namespace {

constexpr size_t kMaxOuts = 16;
// Streamed calls (see run_outs): batches of up to kStreamRows rows (a decode
// step of that many sequences, a short prompt) cut into column blocks of
// about equal bytes, kStreamBlocks a thread.
constexpr int64_t kStreamBlocks = 16;
constexpr int64_t kStreamRows = 64;

// Up to kMaxOuts weights in one pool dispatch; out i reads xs[i] (m × its k).
// Activations are quantized once per distinct (x, layout).
void run_outs(std::span<const MatmulOut> outs, const float* const* xs, int64_t m, ThreadPool& pool) {
  const kern::KernelSet* simd = kernel_set();
  Plan plans[kMaxOuts];
  const size_t n_out = outs.size();
  for (size_t i = 0; i < n_out; ++i) {
    const WeightView& w = outs[i].w;
    if (simd) plans[i].kernel = simd->kernel(w.type);
    if (!plans[i].kernel) plans[i].kernel = kern::scalar_kernel(w.type);
    if (!plans[i].kernel) throw Error("matmul: unsupported weight type " + ggml_type_name(w.type));
    check_weight(w);
  }
  if (m <= 0 || n_out == 0) return;
  const int threads = pool.size();

  // Activations: quantized once per distinct layout (rows are independent).
  static std::atomic<uint64_t> calls{0};
  int64_t act_off[kMaxOuts] = {};
  bool quantize[kMaxOuts] = {};  // first output with its layout: quantizes x for the others
  int64_t act_bytes = 0;
  for (size_t i = 0; i < n_out; ++i) {
    const WeightView& w = outs[i].w;
    const int64_t k = w.k;
    kern::MatmulArgs& a = plans[i].a;
    a.call_id = ++calls;
    a.w = w.data;
    a.row_bytes = w.row_bytes;
    a.k = k;
    a.x = xs[i];
    a.y = outs[i].y;
    a.ldy = w.n;
    act_off[i] = -1;
    if (const int64_t qk = kern::act_block(w.type)) {
      a.al = kern::act_layout(k, qk, simd && simd->wants_x16(w.type, m));
      for (size_t j = 0; j < i; ++j)
        if (act_off[j] >= 0 && xs[j] == xs[i] && plans[j].a.k == k && same_layout(plans[j].a.al, a.al))
          act_off[i] = act_off[j];
      if (act_off[i] < 0) {
        act_off[i] = act_bytes;
        act_bytes += a.al.stride * m;
        quantize[i] = true;
      }
    }
  }
  if (act_bytes > 0) {
    uint8_t* buf = t_scratch.get(static_cast<size_t>(act_bytes));
    kern::QuantizeRowFn q = kern::scalar_quantize_row;
    if (simd && simd->quantize_row) q = simd->quantize_row;
    for (size_t i = 0; i < n_out; ++i) {
      if (act_off[i] < 0) continue;
      plans[i].a.act = buf + act_off[i];
      if (!quantize[i]) continue;
      const kern::ActLayout al = plans[i].a.al;
      const float* x = xs[i];
      const int64_t k = plans[i].a.k;
      uint8_t* dst = buf + act_off[i];
      const auto quantize_row = [&](int64_t r) {
        q(x + r * k, k, al, dst + r * al.stride);
        if (al.bsum32_off) kern::fill_sums_of_32(al, k, dst + r * al.stride);
      };
      if (threads > 1 && m * k >= (int64_t(1) << 15)) {
        const int64_t rows_per = ceil_div(m, int64_t(threads) * 4);
        pool.parallel_for(ceil_div(m, rows_per), [&](int64_t t, int) {
          const int64_t r1 = (t + 1) * rows_per < m ? (t + 1) * rows_per : m;
          for (int64_t r = t * rows_per; r < r1; ++r) quantize_row(r);
        });
      } else {
        for (int64_t r = 0; r < m; ++r) quantize_row(r);
      }
    }
  }

  // Task grid of each weight. Row blocks of up to 64 rows; column blocks
  // sized so one block of weights (as the kernel holds them: a repacked panel
  // for Q8_0 / Q4_0 prompt batches) stays cache resident (~96 KiB) while the
  // row blocks reuse it, and small enough for >= ~8 tasks per thread so the
  // dynamic scheduling can balance. A streamed call instead reads every
  // weight from DRAM once, in one long run a thread (below): one row, or up
  // to kStreamRows rows (one row block) where every weight is an X16 layout
  // read without a panel, whose kernels run all row tiles of a 16-column
  // group before the next group, so a weight comes from memory once whatever
  // the block's size, and prefetch ahead (MatmulArgs::stream). The stored
  // layouts' kernels run row tiles outer over a block sized for the cache,
  // and panel kernels pack their block: those keep cache-sized blocks.
  bool stream = m <= kStreamRows;
  for (size_t i = 0; i < n_out && stream && m > 1; ++i) {
    const WeightView& w = outs[i].w;
    if (repack_group_rows(w.type) <= 1 || !simd || simd->task_col_bytes(w.type, w.k, m) > 0) stream = false;
  }
  const bool stream_split = stream && threads > 1;
  int64_t n_tasks = 0, task_bytes = 0, block_bytes = 1;
  if (stream_split) {
    int64_t bytes = 0;
    for (size_t i = 0; i < n_out; ++i) bytes += outs[i].w.n * outs[i].w.row_bytes;
    block_bytes = std::max<int64_t>(1, bytes / (int64_t(threads) * kStreamBlocks));
  }
  for (size_t i = 0; i < n_out; ++i) {
    const WeightView& w = outs[i].w;
    Plan& p = plans[i];
    const int64_t n = w.n;
    const int64_t k = w.k;
    p.rb = m <= 64 ? m : 64;
    p.n_rb = ceil_div(m, p.rb);
    const int64_t col_bytes = simd ? simd->task_col_bytes(w.type, k, m) : 0;
    // Kernels that repack their column block (col_bytes > 0) get it for all
    // row blocks in one task: repacked once, by one thread.
    p.whole_columns = col_bytes > 0;
    const int64_t rb_tasks = p.whole_columns ? 1 : p.n_rb;
    int64_t cb = (96 * 1024) / (col_bytes > 0 ? col_bytes : w.row_bytes > 0 ? w.row_bytes : 1);
    if (cb < 1) cb = 1;  // rows longer than the cache budget
    const int64_t want_tasks = int64_t(threads) * 8;
    if (threads > 1 && rb_tasks * ceil_div(n, cb) < want_tasks) cb = ceil_div(n, ceil_div(want_tasks, rb_tasks));
    // Streamed: nothing is reused from cache and every weight comes from
    // DRAM once, fastest in long front-to-back runs: column blocks of about
    // equal bytes across the call's weights, kStreamBlocks a thread, run as
    // the pool's shares (ThreadPool::parallel_shares): each thread streams
    // its share of the call's blocks as one run, and a thread slowed by
    // other processes is evened out from the back of its share.
    if (stream_split) cb = ceil_div(n, std::max<int64_t>(1, (n * w.row_bytes + block_bytes / 2) / block_bytes));
    // Whole 8-column groups / tiles, and whole groups of interleaved rows.
    const int64_t mult = std::max(simd ? simd->task_col_multiple(w.type, m) : 8, repack_group_rows(w.type));
    cb = ceil_div(cb, mult) * mult;
    if (cb > n) cb = n;
    p.cb = cb;
    p.n_cb = n > 0 ? ceil_div(n, cb) : 0;
    p.task_bytes = p.whole_columns ? simd->task_scratch_bytes(w.type, k, cb) : 0;  // the panel
    p.a.stream = stream;
    p.first_task = n_tasks;
    n_tasks += rb_tasks * p.n_cb;
    task_bytes = std::max(task_bytes, p.task_bytes);
  }
  if (n_tasks == 0) return;
  if (task_bytes) t_task_scratch.get(size_t(task_bytes));  // the caller's, outside the pool
  auto task = [&](int64_t t, int) {
    size_t i = 0;
    while (i + 1 < n_out && t >= plans[i + 1].first_task) ++i;
    const Plan& p = plans[i];
    t -= p.first_task;
    // Consecutive tasks share a column block (its weights stay in cache).
    const int64_t ci = p.whole_columns ? t : t / p.n_rb;
    const int64_t n = outs[i].w.n;
    const int64_t c0 = ci * p.cb, c1 = c0 + p.cb < n ? c0 + p.cb : n;
    uint8_t* scratch = p.task_bytes ? t_task_scratch.get_or_abort(size_t(task_bytes)) : nullptr;
    const int64_t ri0 = p.whole_columns ? 0 : t % p.n_rb, ri1 = p.whole_columns ? p.n_rb : ri0 + 1;
    for (int64_t ri = ri0; ri < ri1; ++ri) {
      const int64_t r0 = ri * p.rb, r1 = r0 + p.rb < m ? r0 + p.rb : m;
      p.kernel(p.a, r0, r1, c0, c1, scratch);
    }
  };
  if (stream_split) pool.parallel_shares(n_tasks, task);
  else pool.parallel_for(n_tasks, task);
}

}  // namespace

void matmul_many(std::span<const MatmulOut> outs, const float* x, int64_t m, ThreadPool& pool) {
  for (const MatmulOut& o : outs)
    if (o.w.k != outs[0].w.k) throw Error("matmul_many: weights of different row lengths share one x");
  const float* xs[kMaxOuts];
  for (size_t i = 0; i < outs.size(); i += kMaxOuts) {
    const std::span<const MatmulOut> part = outs.subspan(i, std::min(kMaxOuts, outs.size() - i));
    std::fill(xs, xs + part.size(), x);
    run_outs(part, xs, m, pool);
  }
}

void matmul_each(std::span<const MatmulIn> ins, int64_t m, ThreadPool& pool) {
  MatmulOut outs[kMaxOuts];
  const float* xs[kMaxOuts];
  for (size_t i = 0; i < ins.size(); i += kMaxOuts) {
    const size_t n = std::min(kMaxOuts, ins.size() - i);
    for (size_t j = 0; j < n; ++j) {
      outs[j] = MatmulOut{ins[i + j].w, ins[i + j].y};
      xs[j] = ins[i + j].x;
    }
    run_outs(std::span<const MatmulOut>(outs, n), xs, m, pool);
  }
}

}  // namespace pc
