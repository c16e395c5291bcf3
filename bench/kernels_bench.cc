// Google Benchmark for pc::matmul (not wired into CMake yet). Build by hand:
//   g++ -O2 -std=c++20 -Isrc bench/kernels_bench.cc build/libpc_kernels.a \
//       build/libpc_gguf.a -lbenchmark -pthread -o kernels_bench
// Args: {threads, m, k, n}; counters report GFLOP/s and weight bytes/s.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "gguf/quants.h"
#include "kernels/cpu.h"
#include "kernels/matmul.h"
#include "kernels/thread_pool.h"

namespace {

void run(benchmark::State& st, pc::GgmlType type) {
  const int threads = int(st.range(0));
  const int64_t m = st.range(1), k = st.range(2), n = st.range(3);
  pc::ThreadPool pool(threads);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  const int64_t rb = pc::ggml_row_bytes(type, k);
  std::vector<uint8_t> w(n * rb);
  std::vector<float> row(k), x(m * k), y(m * n);
  for (int64_t r = 0; r < n; ++r) {
    for (auto& v : row) v = nd(rng);
    pc::quantize_row(type, row.data(), w.data() + r * rb, k);
  }
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

void shapes(benchmark::internal::Benchmark* b) {
  for (int t : {1, 2})
    for (int64_t m : {1, 512}) {
      b->Args({t, m, 576, 1536});   // FFN up/gate of a 135M model
      b->Args({t, m, 1536, 576});   // FFN down
    }
  b->UseRealTime();
}

void BM_Q8_0(benchmark::State& s) { run(s, pc::GgmlType::Q8_0); }
void BM_Q4_0(benchmark::State& s) { run(s, pc::GgmlType::Q4_0); }
void BM_Q4_K(benchmark::State& s) { run(s, pc::GgmlType::Q4_K); }
void BM_Q6_K(benchmark::State& s) { run(s, pc::GgmlType::Q6_K); }
void BM_F16(benchmark::State& s) { run(s, pc::GgmlType::F16); }

BENCHMARK(BM_Q8_0)->Apply(shapes);
BENCHMARK(BM_Q4_0)->Apply(shapes);
BENCHMARK(BM_F16)->Apply(shapes);
// K-quants need k % 256 == 0.
BENCHMARK(BM_Q4_K)->Args({1, 1, 1536, 576})->Args({2, 1, 1536, 576})->Args({2, 512, 1536, 576})->UseRealTime();
BENCHMARK(BM_Q6_K)->Args({1, 1, 1536, 576})->Args({2, 1, 1536, 576})->Args({2, 512, 1536, 576})->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
