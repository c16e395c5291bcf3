// Google Benchmark for the CPU kernels (target kernels_bench, bench/CMakeLists.txt).
// Matmul args: {threads, m, k, n}; counters report GFLOP/s and weight bytes/s.
// On a shared machine compare the "CPU" column of 1-thread runs, or use
// test_kernels --gtest_filter='Matmul.Speed*:Matmul.DecodeStream*', which
// interleaves the current kernels with the frozen pre-#7 ones.
// DecodeStep args: {type, threads, level}: (level 2 AVX-512, 1 AVX2) one decode token's matmuls over the
// tinyllama-1.1b shape's 22 layers (Q/K/V and gate/up through matmul_many, as
// the forward pass calls them; 0.5-1 GB of weights in huge pages, so every
// weight streams from DRAM); counter: weight bytes per second, to set against
// the read bandwidth `bench prefill` measures.
// Attention args: {threads, tokens}: a prompt of `tokens` queries of one
// sequence attending causally (smollm-135m head shape: 9 query / 3 KV heads of
// 64), tasks split like the forward pass; counter: query-key pairs per second.
#include <benchmark/benchmark.h>

#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "gguf/quants.h"
#include "kernels/cpu.h"
#include "kernels/elementwise.h"
#include "kernels/matmul.h"
#include "kernels/paged_attention.h"
#include "kernels/thread_pool.h"
#include "kernels/weight_repack.h"

namespace {

// quantize_row for the stored types, one row of k values at out + r · row
// bytes for each of the n rows of x; Q4_K / Q6_K / Q5_K / Q8_0 repacked for the internal
// Q4_K_X16 / Q6_K_X16 / Q5_K_X16 / Q8_0_X16 (n a multiple of 16).
void quantize_bench_rows(pc::GgmlType type, const float* x, uint8_t* out, int64_t k, int64_t n) {
  const pc::GgmlType stored = type == pc::GgmlType::Q4_K_X16 ? pc::GgmlType::Q4_K
                              : type == pc::GgmlType::Q6_K_X16 ? pc::GgmlType::Q6_K
                              : type == pc::GgmlType::Q5_K_X16 ? pc::GgmlType::Q5_K
                              : type == pc::GgmlType::Q8_0_X16 ? pc::GgmlType::Q8_0
                                                             : type;
  const int64_t rb = pc::ggml_row_bytes(stored, k);
  std::vector<uint8_t> q(stored == type ? 0 : size_t(n * rb));
  uint8_t* dst = stored == type ? out : q.data();
  for (int64_t r = 0; r < n; ++r) pc::quantize_row(stored, x + r * k, dst + r * rb, k);
  if (stored != type) pc::repack_rows(stored, type, q.data(), out, k, n);
}

void run(benchmark::State& st, pc::GgmlType type) {
  const int threads = int(st.range(0));
  const int64_t m = st.range(1), k = st.range(2), n = st.range(3);
  pc::ThreadPool pool(threads);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  const int64_t rb = pc::ggml_row_bytes(type, k);
  std::vector<uint8_t> w(n * rb);
  std::vector<float> rows(n * k), x(m * k), y(m * n);
  for (auto& v : rows) v = nd(rng);
  quantize_bench_rows(type, rows.data(), w.data(), k, n);
  for (auto& v : x) v = nd(rng);
  const pc::WeightView view{type, k, n, w.data(), rb};
  for (auto _ : st) {
    pc::matmul(view, x.data(), m, y.data(), pool);
    benchmark::DoNotOptimize(y.data());
  }
  st.counters["GFLOP/s"] = benchmark::Counter(2.0 * m * k * n * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  st.counters["weightGB/s"] = benchmark::Counter(double(w.size()) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  st.SetLabel(pc::cpu_level_name(pc::cpu_level()));
}

// m = 1: decode (AVX2: 1×4 tiles straight from the file); m = 8: a small
// batch (Q8_0: the int16 panel kernel from 4 rows on); m = 512: a prompt chunk.
void shapes(benchmark::internal::Benchmark* b) {
  for (int t : {1, 2})
    for (int64_t m : {1, 8, 512}) {
      b->Args({t, m, 576, 1536});   // FFN up/gate of a 135M model
      b->Args({t, m, 1536, 576});   // FFN down
    }
  b->Args({2, 1, 576, 32000});      // output projection, one decode step
  b->UseRealTime();
}

// One weight matrix of the decode-step benchmark, its 16 distinct quantized
// rows repeated (quantizing a gigabyte would take minutes), in huge pages.
struct StreamWeight {
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> data;
  pc::WeightView view;
  StreamWeight(pc::GgmlType type, int64_t n, int64_t k, std::mt19937& rng) {
    const int64_t rb = pc::ggml_row_bytes(type, k);
    const size_t huge = size_t(2) << 20, bytes = (size_t(n * rb) + huge - 1) / huge * huge;
    data.reset(static_cast<uint8_t*>(std::aligned_alloc(huge, bytes)));
#ifdef MADV_HUGEPAGE
    madvise(data.get(), bytes, MADV_HUGEPAGE);
#endif
    std::normal_distribution<float> nd;
    std::vector<float> x(16 * k);
    std::vector<uint8_t> rows(16 * rb);
    for (auto& v : x) v = nd(rng);
    quantize_bench_rows(type, x.data(), rows.data(), k, 16);
    for (int64_t r = 0; r < n; ++r) std::memcpy(data.get() + r * rb, rows.data() + (r % 16) * rb, rb);
    view = pc::WeightView{type, k, n, data.get(), rb};
  }
};

void BM_DecodeStep(benchmark::State& st) {
  const pc::GgmlType types[] = {pc::GgmlType::Q4_K, pc::GgmlType::Q5_K, pc::GgmlType::Q6_K, pc::GgmlType::Q8_0,
                                pc::GgmlType::Q4_K_X16, pc::GgmlType::Q5_K_X16, pc::GgmlType::Q6_K_X16,
                                pc::GgmlType::Q8_0_X16};
  const pc::GgmlType type = types[st.range(0)];
  pc::ThreadPool pool(int(st.range(1)));
  pc::set_cpu_level(st.range(2) == 2 ? pc::CpuLevel::Avx512 : pc::CpuLevel::Avx2);
  const int64_t layers = 22, e = 2048, kv = 256, f = 5632;  // tinyllama-1.1b
  std::mt19937 rng(1);
  std::vector<StreamWeight> w;
  for (int64_t l = 0; l < layers; ++l)
    for (auto [n, k] : {std::pair{e, e}, {kv, e}, {kv, e}, {e, e}, {f, e}, {f, e}, {e, f}}) w.emplace_back(type, n, k, rng);
  double bytes = 0;
  for (const StreamWeight& sw : w) bytes += double(sw.view.n * sw.view.row_bytes);
  std::vector<float> x(f), yq(e), yk(kv), yv(kv), yo(e), yg(f), yu(f), yd(e);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(float(i));
  for (auto _ : st) {
    for (int64_t l = 0; l < layers; ++l) {
      const StreamWeight* lw = &w[size_t(l) * 7];
      const pc::MatmulOut qkv[] = {{lw[0].view, yq.data()}, {lw[1].view, yk.data()}, {lw[2].view, yv.data()}};
      pc::matmul_many(qkv, x.data(), 1, pool);
      pc::matmul(lw[3].view, x.data(), 1, yo.data(), pool);
      const pc::MatmulOut gu[] = {{lw[4].view, yg.data()}, {lw[5].view, yu.data()}};
      pc::matmul_many(gu, x.data(), 1, pool);
      pc::matmul(lw[6].view, x.data(), 1, yd.data(), pool);
    }
    benchmark::DoNotOptimize(yd.data());
  }
  st.counters["weightGB/s"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  st.SetLabel(pc::ggml_type_name(type) + " " + pc::cpu_level_name(pc::cpu_level()));
  pc::set_cpu_level(pc::default_cpu_level());
}
BENCHMARK(BM_DecodeStep)->ArgsProduct({{0, 1, 2, 3, 4, 5, 6, 7}, {1, 2}, {2, 1}})->UseRealTime()->Unit(benchmark::kMillisecond);

// A decode-like stream under the pool's two ways of handing out blocks, 2
// threads: range(0) 0 = parallel_for (blocks claimed in order by whichever
// thread is free, so the two threads' reads interleave), 1 = parallel_shares
// (each thread its own contiguous run, the way decode's matmuls run). Each
// dispatch reads one "weight" of range(1) KiB in 16 blocks a thread (smollm's
// attention weights are ~190 KiB, tinyllama's 2.3 and 6.5 MiB), 512 MiB a pass.
void BM_PoolSplitStream(benchmark::State& st) {
  const bool shares = st.range(0) == 1;
  const int threads = 2, blocks = 16 * threads;
  const int64_t weight = st.range(1) * 1024, block = weight / blocks / 64 * 64;
  const int64_t total = int64_t(512) << 20, n_weights = total / weight;
  auto* buf = static_cast<uint64_t*>(std::aligned_alloc(size_t(2) << 20, size_t(total)));
  madvise(buf, size_t(total), MADV_HUGEPAGE);
  for (int64_t i = 0; i < total / 8; ++i) buf[i] = uint64_t(i);
  pc::ThreadPool pool(threads);
  std::vector<uint64_t> sums(size_t(threads) * 8);
  for (auto _ : st) {
    for (int64_t w = 0; w < n_weights; ++w) {
      const uint64_t* base = buf + w * weight / 8;
      auto read = [&](int64_t b, int t) {
        const uint64_t* p = base + b * block / 8;
        uint64_t a[4] = {};
        for (int64_t i = 0; i < block / 8; i += 4)
          for (int j = 0; j < 4; ++j) a[j] += p[i + j];
        sums[size_t(t) * 8] += a[0] + a[1] + a[2] + a[3];
      };
      if (shares) pool.parallel_shares(blocks, read);
      else pool.parallel_for(blocks, read);
    }
    benchmark::DoNotOptimize(sums.data());
  }
  st.counters["GB/s"] = benchmark::Counter(double(n_weights * blocks * block) * 1e-9,
                                           benchmark::Counter::kIsIterationInvariantRate);
  st.SetLabel(shares ? "parallel_shares" : "parallel_for");
  std::free(buf);
}
BENCHMARK(BM_PoolSplitStream)->ArgsProduct({{0, 1}, {192, 2304, 6656}})->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_Q8_0(benchmark::State& s) { run(s, pc::GgmlType::Q8_0); }
void BM_Q8_0_X16(benchmark::State& s) { run(s, pc::GgmlType::Q8_0_X16); }
void BM_Q4_0(benchmark::State& s) { run(s, pc::GgmlType::Q4_0); }
void BM_Q4_K(benchmark::State& s) { run(s, pc::GgmlType::Q4_K); }
void BM_Q4_K_X16(benchmark::State& s) { run(s, pc::GgmlType::Q4_K_X16); }
void BM_Q6_K_X16(benchmark::State& s) { run(s, pc::GgmlType::Q6_K_X16); }
void BM_Q5_K(benchmark::State& s) { run(s, pc::GgmlType::Q5_K); }
void BM_Q5_K_X16(benchmark::State& s) { run(s, pc::GgmlType::Q5_K_X16); }
void BM_Q6_K(benchmark::State& s) { run(s, pc::GgmlType::Q6_K); }
void BM_F16(benchmark::State& s) { run(s, pc::GgmlType::F16); }
void BM_BF16(benchmark::State& s) { run(s, pc::GgmlType::BF16); }
void BM_F32(benchmark::State& s) { run(s, pc::GgmlType::F32); }

BENCHMARK(BM_Q8_0)->Apply(shapes);
BENCHMARK(BM_Q8_0_X16)->Apply(shapes);
BENCHMARK(BM_Q4_0)->Apply(shapes);
BENCHMARK(BM_F16)->Apply(shapes);
BENCHMARK(BM_BF16)->Apply(shapes);
BENCHMARK(BM_F32)->Apply(shapes);
// K-quants need k % 256 == 0.
void k_shapes(benchmark::internal::Benchmark* b) {
  for (int t : {1, 2})
    for (int64_t m : {1, 8, 512}) b->Args({t, m, 1536, 576});
  // tinyllama-1.1b's FFN gate/up and down in a 512-token prompt: activations
  // of 1-3 MB and weight groups of 18-50 KB, past L1 and (down) L2.
  for (int t : {1, 2}) {
    b->Args({t, 512, 2048, 5632});
    b->Args({t, 512, 5632, 2048});
  }
  b->UseRealTime();
}
BENCHMARK(BM_Q4_K)->Apply(k_shapes);
BENCHMARK(BM_Q4_K_X16)->Apply(k_shapes);
BENCHMARK(BM_Q6_K_X16)->Apply(k_shapes);
BENCHMARK(BM_Q5_K)->Apply(k_shapes);
BENCHMARK(BM_Q5_K_X16)->Apply(k_shapes);
BENCHMARK(BM_Q6_K)->Apply(k_shapes);

// The attention shapes of the benchmarks: smollm-135m's (shape 0: 3 KV heads
// of 64, groups of 3), tinyllama-1.1b's (1: 4 of 64, groups of 8) or
// Llama-3-8B's (2: 8 of 128, groups of 4); pages of kAttnP slots.
constexpr int kAttnP = 16;
struct AttnShape {
  int hd, n_kv, group;
  explicit AttnShape(int shape)
      : hd(shape == 2 ? 128 : 64), n_kv(shape == 0 ? 3 : shape == 1 ? 4 : 8), group(shape == 0 ? 3 : shape == 1 ? 8 : 4) {}
};

// A sequence of n random F16 K/V slots in pages of kAttnP, of an AttnShape.
struct AttnSeq {
  AttnShape sh;
  std::vector<uint16_t> kv;
  std::vector<const uint16_t*> kp, vp;
  AttnSeq(int n, AttnShape shape, std::mt19937& rng) : sh(shape) {
    std::normal_distribution<float> nd;
    const int n_pages = (n + kAttnP - 1) / kAttnP;
    const size_t slab = size_t(sh.n_kv) * kAttnP * sh.hd;
    kv.resize(size_t(n_pages) * 2 * slab);
    for (auto& h : kv) h = pc::fp32_to_fp16(nd(rng));
    for (int p = 0; p < n_pages; ++p) {
      kp.push_back(kv.data() + size_t(p) * 2 * slab);
      vp.push_back(kp.back() + slab);
    }
  }
  pc::PagedAttentionArgs args(int g) const {
    pc::PagedAttentionArgs a;
    a.k_pages = kp.data();
    a.v_pages = vp.data();
    a.page_size = kAttnP;
    a.head_dim = sh.hd;
    a.kv_head = g;
    a.n_kv_head = sh.n_kv;
    a.scale = 0.125f;
    return a;
  }
};

// Attention of the last n_q tokens of an n-token context (all of them: a
// prompt; one: a decode step), all query heads (n_kv × group), in the forward
// pass's tasks: blocks of up to kAttnMaxTokens tokens × KV heads, the later
// blocks (more keys) first. Counters: query-key pairs a second and GMAC/s
// (the multiply-adds of the scores and of the values' sums).
void attention_bench(benchmark::State& st, int n_q, AttnShape shape) {
  const int threads = int(st.range(0));
  const int n = int(st.range(1));
  if (n_q <= 0 || n_q > n) n_q = n;
  const int hd = shape.hd, n_kv = shape.n_kv, group = shape.group;
  pc::ThreadPool pool(threads);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  const AttnSeq seq(n, shape, rng);
  const int64_t qd = int64_t(n_kv) * group * hd;
  std::vector<float> q(size_t(n_q) * qd), out(size_t(n_q) * qd);
  for (auto& v : q) v = nd(rng);
  std::vector<int> n_ctx(n_q);
  double pairs = 0;
  for (int i = 0; i < n_q; ++i) {
    n_ctx[i] = n - n_q + i + 1;
    pairs += double(n_ctx[i]) * n_kv * group;
  }
  const int64_t per = pc::paged_attention_tokens_scratch(kAttnP, hd, group, pc::kAttnMaxTokens);
  std::vector<float> scratch(size_t(per) * threads);
  const int n_blocks = (n_q + pc::kAttnMaxTokens - 1) / pc::kAttnMaxTokens;
  for (auto _ : st) {
    pool.parallel_for(int64_t(n_blocks) * n_kv, [&](int64_t task, int thread) {
      const int b = n_blocks - 1 - int(task / n_kv), g = int(task % n_kv);
      const int i0 = b * pc::kAttnMaxTokens;
      const int i1 = std::min(n_q, i0 + pc::kAttnMaxTokens);
      pc::PagedAttentionTokens t;
      t.n_tok = i1 - i0;
      t.q = q.data() + i0 * qd + g * group * hd;
      t.q_stride = qd;
      t.n_ctx = n_ctx.data() + i0;
      t.out = out.data() + i0 * qd + g * group * hd;
      t.out_stride = qd;
      pc::paged_attention_tokens(seq.args(g), group, t, scratch.data() + thread * per);
    });
    benchmark::DoNotOptimize(out.data());
  }
  st.counters["qk_pairs/s"] = benchmark::Counter(pairs, benchmark::Counter::kIsIterationInvariantRate);
  st.counters["GMAC/s"] = benchmark::Counter(pairs * 2 * hd * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  st.SetLabel(pc::cpu_level_name(pc::cpu_level()));
}
void BM_Attention(benchmark::State& st) { attention_bench(st, 0, AttnShape(0)); }
void BM_AttentionDecode(benchmark::State& st) { attention_bench(st, 1, AttnShape(0)); }
// The last n_q tokens of an n-token context: a turn's new tokens after a
// cached prefix (prompt tiles against a long context). Args {threads, n, n_q, shape}.
void BM_AttentionTail(benchmark::State& st) { attention_bench(st, int(st.range(2)), AttnShape(int(st.range(3)))); }
BENCHMARK(BM_Attention)->Args({1, 512})->Args({1, 2048})->Args({2, 2048})->UseRealTime();
BENCHMARK(BM_AttentionDecode)->Args({1, 2048})->Args({2, 2048})->UseRealTime();
BENCHMARK(BM_AttentionTail)->Args({1, 4096, 512, 1})->Args({2, 4096, 512, 1})->Args({2, 16384, 512, 1})->UseRealTime();

// One decode token through `layers` layers of an n-token context, the KV laid
// out as KvStorage lays it out (page p holds every layer's K and V of its
// slots, so one layer's pages are layers × 12 KiB apart for smollm's heads) in
// memory advised for huge pages, and far past the L3 at 30 layers of 4096
// slots (94 MB), as in the model; BM_AttentionDecode keeps its one layer in
// cache. Per layer a task per KV head (split 0), one per KV head and softmax
// segment then the merge (split 1), or one per segment for every KV head in
// head order (split 2; the forward pass decoding one sequence uses 1 or 2,
// whichever gives the threads tasks enough). Shape: an AttnShape.
// Args {threads, n, layers, split, shape}.
void BM_AttentionDecodeLayers(benchmark::State& st) {
  const int threads = int(st.range(0)), n = int(st.range(1)), layers = int(st.range(2));
  const int split = int(st.range(3)), shape = int(st.range(4));
  const AttnShape sh(shape);
  const int hd = sh.hd, n_kv = sh.n_kv, group = sh.group;
  pc::ThreadPool pool(threads);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  const int n_pages = (n + kAttnP - 1) / kAttnP;
  const size_t slab = size_t(n_kv) * kAttnP * hd;  // one layer's K (or V) of a page
  const size_t kv_bytes = size_t(n_pages) * layers * 2 * slab * sizeof(uint16_t);
  const size_t huge = size_t(2) << 20;
  std::unique_ptr<void, decltype(&std::free)> kv_mem(std::aligned_alloc(huge, (kv_bytes + huge - 1) / huge * huge), &std::free);
#ifdef MADV_HUGEPAGE
  madvise(kv_mem.get(), (kv_bytes + huge - 1) / huge * huge, MADV_HUGEPAGE);  // as KvStorage
#endif
  const std::span<uint16_t> kv(static_cast<uint16_t*>(kv_mem.get()), kv_bytes / sizeof(uint16_t));
  for (auto& h : kv) h = pc::fp32_to_fp16(nd(rng));
  std::vector<std::vector<const uint16_t*>> kp(layers), vp(layers);
  for (int l = 0; l < layers; ++l)
    for (int p = 0; p < n_pages; ++p) {
      kp[l].push_back(kv.data() + (size_t(p) * layers + l) * 2 * slab);
      vp[l].push_back(kp[l].back() + slab);
    }
  const int64_t qd = int64_t(n_kv) * group * hd;
  std::vector<float> q(qd), out(qd);
  for (auto& v : q) v = nd(rng);
  const int n_ctx = n;
  const int64_t per = pc::paged_attention_tokens_scratch(kAttnP, hd, group, 1);
  std::vector<float> scratch(size_t(per) * threads);
  const int n_seg = (n_ctx - 1) / pc::kAttnSegmentSlots + 1;
  const int64_t state_floats = pc::attention_state_floats(hd, group);
  std::vector<float> states(size_t(n_kv) * n_seg * state_floats);
  std::vector<pc::AttentionState> parts;
  for (int i = 0; i < n_kv * n_seg; ++i)
    parts.push_back(pc::attention_state_at(states.data() + i * state_floats, hd, group));
  // KV head g of layer l over segment seg (-1: the whole context, to out).
  auto attend = [&](int l, int g, int seg, int thread) {
    pc::PagedAttentionArgs a;
    a.k_pages = kp[l].data();
    a.v_pages = vp[l].data();
    a.page_size = kAttnP;
    a.head_dim = hd;
    a.kv_head = g;
    a.n_kv_head = n_kv;
    a.scale = 0.125f;
    pc::PagedAttentionTokens t;
    t.n_tok = 1;
    t.q = q.data() + g * group * hd;
    t.q_stride = qd;
    t.n_ctx = &n_ctx;
    t.out = out.data() + g * group * hd;
    t.out_stride = qd;
    if (seg >= 0) {
      t.seg = seg;
      t.state = parts[g * n_seg + seg];
    }
    pc::paged_attention_tokens(a, group, t, scratch.data() + thread * per);
  };
  for (auto _ : st) {
    for (int l = 0; l < layers; ++l) {
      if (split == 2)
        pool.parallel_for(n_seg, [&](int64_t k, int thread) {
          for (int g = 0; g < n_kv; ++g) attend(l, g, int(k), thread);
        });
      else if (split == 1)
        pool.parallel_for(n_kv * n_seg, [&](int64_t task, int thread) {
          attend(l, int(task / n_seg), int(task % n_seg), thread);
        });
      else
        pool.parallel_for(n_kv, [&](int64_t g, int thread) { attend(l, int(g), -1, thread); });
      if (split)
        pool.parallel_for(n_kv, [&](int64_t g, int) {
          for (int j = 0; j < group; ++j)
            pc::attention_merge(hd, parts.data() + g * n_seg, n_seg, j, out.data() + (g * group + j) * hd);
        });
    }
    benchmark::DoNotOptimize(out.data());
  }
  st.counters["qk_pairs/s"] = benchmark::Counter(double(n) * n_kv * group * layers, benchmark::Counter::kIsIterationInvariantRate);
  st.counters["kvGB/s"] = benchmark::Counter(double(n) * n_kv * hd * 4 * layers * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  st.SetLabel(pc::cpu_level_name(pc::cpu_level()));
}
BENCHMARK(BM_AttentionDecodeLayers)
    ->Args({1, 4096, 1, 0, 0})
    ->Args({1, 4096, 30, 0, 0})
    ->Args({2, 4096, 30, 0, 0})
    ->Args({2, 4096, 30, 1, 0})
    ->Args({2, 4096, 30, 2, 0})
    ->Args({1, 4096, 30, 1, 0})
    ->Args({1, 4096, 30, 2, 0})
    ->Args({2, 1024, 30, 0, 0})
    ->Args({2, 1024, 30, 1, 0})
    ->Args({2, 512, 22, 0, 1})   // tinyllama, 512 slots (11.5 MB of KV)
    ->Args({2, 8192, 22, 2, 1})  // tinyllama, 8192 slots (185 MB)
    ->Args({2, 512, 32, 0, 2})   // Llama-3-8B, 512 slots (67 MB)
    ->Args({2, 8192, 8, 2, 2})   // Llama-3-8B, 8192 slots, a quarter of the layers (268 MB)
    ->UseRealTime();

// Row-wise kernels of the forward pass, one row of n values (one thread):
// RMS norm and the residual add over the embedding, SwiGLU over the
// feed-forward width, RoPE over one head. Counter: values per second.
void elementwise_bench(benchmark::State& st, int which) {
  const int64_t n = st.range(0);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  std::vector<float> a(n), b(n), y(n);
  for (auto& v : a) v = nd(rng);
  for (auto& v : b) v = nd(rng);
  pc::RopeParams rp;
  rp.n_rot = n;
  const pc::Rope rope(rp);
  std::vector<float> cs(n);
  rope.angles(1000, cs.data());
  for (auto _ : st) {
    switch (which) {
      case 0: pc::rms_norm(a.data(), b.data(), y.data(), n, 1e-5f); break;
      case 1: pc::swiglu(a.data(), b.data(), y.data(), n); break;
      case 2: pc::add_inplace(y.data(), a.data(), n); break;
      default: rope.apply(y.data(), cs.data()); break;
    }
    benchmark::DoNotOptimize(y.data());
  }
  st.counters["values/s"] = benchmark::Counter(double(n), benchmark::Counter::kIsIterationInvariantRate);
  st.SetLabel(pc::cpu_level_name(pc::cpu_level()));
}
void BM_RmsNorm(benchmark::State& st) { elementwise_bench(st, 0); }
void BM_SwiGLU(benchmark::State& st) { elementwise_bench(st, 1); }
void BM_AddInplace(benchmark::State& st) { elementwise_bench(st, 2); }
void BM_Rope(benchmark::State& st) { elementwise_bench(st, 3); }
BENCHMARK(BM_RmsNorm)->Arg(576)->Arg(2048);
BENCHMARK(BM_SwiGLU)->Arg(1536)->Arg(5632);
BENCHMARK(BM_AddInplace)->Arg(576)->Arg(2048);
BENCHMARK(BM_Rope)->Arg(64)->Arg(128);

// Repacking at load: arg {type}: 2048 rows x 4096 of random stored blocks
// (a byte shuffle: any bytes do) into the type's X16 layout on one thread, as
// a chunk of Model::repack_weights' work; counter: stored bytes per second.
void BM_Repack(benchmark::State& st) {
  const pc::GgmlType types[] = {pc::GgmlType::Q4_K, pc::GgmlType::Q5_K,   pc::GgmlType::Q6_K,  pc::GgmlType::Q8_0,
                                pc::GgmlType::Q4_0, pc::GgmlType::Q5_0,   pc::GgmlType::Q4_1,  pc::GgmlType::Q5_1,
                                pc::GgmlType::IQ4_NL, pc::GgmlType::IQ4_XS, pc::GgmlType::MXFP4};
  const pc::GgmlType type = types[st.range(0)];
  const pc::GgmlType to = pc::matmul_repacked_type(type);
  if (to == type) return st.SkipWithError("the kernels in use read this type as stored");
  const int64_t k = 4096, rows = 2048, rb = pc::ggml_row_bytes(type, k);
  std::vector<uint8_t> src(size_t(rows * rb)), dst(src.size());
  std::mt19937 rng(1);
  for (uint8_t& b : src) b = uint8_t(rng());
  for (auto _ : st) {
    pc::repack_rows(type, to, src.data(), dst.data(), k, rows);
    benchmark::DoNotOptimize(dst.data());
  }
  st.counters["GB/s"] = benchmark::Counter(double(src.size()) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  st.SetLabel(pc::ggml_type_name(type));
}
BENCHMARK(BM_Repack)->DenseRange(0, 10)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
