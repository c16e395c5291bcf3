// The layout of a reference request measured per type (layout_choice.h).
#include "kernels/layout_choice.h"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>

#include "common/error.h"
#include "gguf/quants.h"
#include "kernels/cpu.h"
#include "kernels/matmul.h"
#include "kernels/thread_pool.h"
#include "kernels/weight_repack.h"

namespace pc {

namespace {

// The measured buffers' row length: a 4096-wide model's (Llama-3-8B) and a
// multiple of every block size.
constexpr int64_t kCalibrationK = 4096;

struct Buffer {
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> p;
  explicit Buffer(size_t bytes) {
    const size_t huge = size_t(2) << 20, rounded = (bytes + huge - 1) / huge * huge;
    p.reset(static_cast<uint8_t*>(std::aligned_alloc(huge, rounded)));
    if (!p) throw Error("layout timing: cannot allocate " + std::to_string(rounded) + " bytes");
#ifdef MADV_HUGEPAGE
    madvise(p.get(), rounded, MADV_HUGEPAGE);  // as the model's weights (Residency::kMemory)
#endif
  }
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::mutex g_mu;
std::vector<LayoutTiming> g_measured;                    // guarded by g_mu
GgmlType g_choice[256];                                  // by stored type; guarded by g_mu
bool g_chosen[256] = {};                                 // guarded by g_mu

// Both layouts' rates over `work` units a pass (bytes or multiply-adds) of
// the matmul of x (m rows) by views[0] (stored) and views[1] (X16): a warm-up
// pair, then `pairs` pairs alternating which goes first (so drift cancels).
struct PairRates {
  double best[2] = {0, 0};  // units a second
  double median_ratio = 0;  // of X16's rate over the stored one's, pair by pair
};
PairRates time_pairs(const WeightView (&views)[2], const float* x, int64_t m, float* y, ThreadPool& pool,
                     int pairs, double work) {
  PairRates out;
  std::vector<double> ratios;
  for (int pass = -1; pass < pairs; ++pass) {  // pass -1 warms both up
    double rate[2];
    for (int o = 0; o < 2; ++o) {  // stored first in even pairs, X16 first in odd ones
      const int i = (pass & 1) ? 1 - o : o;
      const auto t0 = std::chrono::steady_clock::now();
      matmul(views[i], x, m, y, pool);
      rate[i] = work / seconds_since(t0);
      if (pass >= 0) out.best[i] = std::max(out.best[i], rate[i]);
    }
    if (pass >= 0) ratios.push_back(rate[1] / rate[0]);
  }
  std::sort(ratios.begin(), ratios.end());
  const size_t h = ratios.size() / 2;
  out.median_ratio = ratios.empty() ? 0 : ratios.size() % 2 ? ratios[h] : (ratios[h - 1] + ratios[h]) / 2;
  return out;
}

}  // namespace

LayoutTiming time_layouts(GgmlType stored, int64_t bytes, int pairs, int threads, int64_t prompt_bytes) {
  const auto t_start = std::chrono::steady_clock::now();
  const X16Layout* l = x16_layout(stored, /*by_stored=*/true);
  if (!l) throw Error("layout timing: " + ggml_type_name(stored) + " has no X16 layout");
  const int64_t k = kCalibrationK, rb = ggml_row_bytes(stored, k);
  const int64_t g = repack_group_rows(l->x16);
  const int64_t n = std::max<int64_t>(bytes / rb / g, 1) * g;
  const int64_t n_prompt = std::min(n, std::max<int64_t>(prompt_bytes / rb / g, 1) * g);
  const size_t total = size_t(n * rb);

  // One group of 16 rows quantized from random values and repacked, then
  // repeated: the kernels' time does not depend on the values.
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  std::vector<float> src(size_t(g * k));
  for (float& v : src) v = nd(rng);
  std::vector<uint8_t> group(size_t(g * rb)), group_x16(size_t(g * rb));
  for (int64_t r = 0; r < g; ++r) quantize_row(stored, src.data() + r * k, group.data() + r * rb, k);
  repack_rows(stored, l->x16, group.data(), group_x16.data(), k, g);
  Buffer a(total), b(total);
  for (int64_t r = 0; r < n; r += g) {
    std::memcpy(a.p.get() + r * rb, group.data(), group.size());
    std::memcpy(b.p.get() + r * rb, group_x16.data(), group_x16.size());
  }
  const WeightView decode_views[2] = {{stored, k, n, a.p.get(), rb}, {l->x16, k, n, b.p.get(), rb}};
  const WeightView prompt_views[2] = {{stored, k, n_prompt, a.p.get(), rb}, {l->x16, k, n_prompt, b.p.get(), rb}};

  const int64_t m = kRefPromptTokens;
  std::vector<float> x(size_t(m * k)), y(size_t(m * n_prompt > n ? m * n_prompt : n));
  for (float& v : x) v = nd(rng);
  ThreadPool pool(threads);
  const PairRates dec = time_pairs(decode_views, x.data(), 1, y.data(), pool, pairs, double(total) * 1e-9);
  const double macs = double(m) * double(n_prompt) * double(k);
  const PairRates pro = time_pairs(prompt_views, x.data(), m, y.data(), pool, pairs, macs * 1e-9);

  LayoutTiming t;
  t.stored = stored;
  t.x16 = l->x16;
  t.stored_gb_per_s = dec.best[0];
  t.x16_gb_per_s = dec.best[1];
  t.x16_over_stored = dec.median_ratio;
  t.stored_prompt_gmacs = pro.best[0];
  t.x16_prompt_gmacs = pro.best[1];
  t.x16_prompt_over_stored = pro.median_ratio;
  // The reference request over the decode buffer's weights, in seconds as
  // stored: its prompt's multiply-adds at the stored prompt rate, and one
  // pass over the weights a generated token at the stored decode rate.
  const double prompt_s = double(kRefPromptTokens) * double(n) * double(k) * 1e-9 / pro.best[0];
  const double decode_s = double(kRefDecodeTokens) * double(total) * 1e-9 / dec.best[0];
  t.x16_request_speedup = (prompt_s + decode_s) / (prompt_s / pro.median_ratio + decode_s / dec.median_ratio);
  t.bytes = int64_t(total);
  t.prompt_bytes = n_prompt * rb;
  t.seconds = seconds_since(t_start);
  return t;
}

GgmlType fastest_layout(GgmlType t, int64_t bytes) {
  const GgmlType kernels = matmul_repacked_type(t);
  if (kernels == t || (cpu_level() != CpuLevel::Avx2 && cpu_level() != CpuLevel::AvxVnni)) return kernels;
  const size_t i = size_t(t) & 255;
  std::lock_guard<std::mutex> lock(g_mu);  // one measurement at a time: they share the memory bus
  if (!g_chosen[i]) {
    if (bytes < kDecodeTimingBytes) return kernels;
    const LayoutTiming m = time_layouts(t);
    g_measured.push_back(m);
    g_choice[i] = m.x16_request_speedup < kX16MinSpeedup ? t : kernels;
    g_chosen[i] = true;
  }
  return g_choice[i];
}

std::vector<LayoutTiming> measured_layouts() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_measured;
}

}  // namespace pc
