// Model::repack_weights(): the matrices the kernels in use read faster in
// another layout (matmul_repacked_type(), kernels/weight_repack.h; with
// WeightLayout::kFastest, the types whose X16 layout was measured to run a
// reference request faster, fastest_layout(), kernels/layout_choice.h), repacked
// in place when the file is a copy in memory (Residency::kMemory, advised for
// transparent huge pages: decode streams every weight per token); from a
// mapped file into one anonymous region advised likewise, each stored
// tensor's pages given back once its copy is made. Either way a tensor is
// resident in one layout. The repacking runs on one thread a core
// (repack_jobs).
//
// A tensor is repacked only when every view of it is a matmul weight: the
// token embedding (read a row at a time by dequantize_row, and the output
// projection when tied to it) stays as stored; so does one whose rows or
// views are not whole groups of a layout that interleaves rows (the X16 layouts).
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "common/error.h"
#include "kernels/cpu_count.h"
#include "kernels/layout_choice.h"
#include "kernels/weight_repack.h"
#include "model/model.h"

namespace pc {

namespace {

// Rows a chunk of repacking work: whole groups, small enough that the test
// models' matrices split into several (so the tests cover the split), large
// enough that claiming one costs nothing against repacking it (64 rows of a
// 2048-wide Q4_K matrix: 72 KiB).
constexpr int64_t kRepackChunkRows = 64;

struct RepackJob {
  const GgufTensorInfo* t;
  GgmlType to;
  int64_t k, rows;
  size_t offset;           // in the region (when not in place)
  uint8_t* dst = nullptr;  // where the repacked rows go
};

// Repacks every job's rows to its dst, on one thread a core: the jobs' rows
// in chunks of kRepackChunkRows (claimed in order; a thread that cannot be
// started leaves its share to the others). In place (dst is the tensor's own
// bytes), each group of rows is copied aside first and repacked from the
// copy; otherwise each stored tensor's pages are given back by whichever
// thread finishes its last chunk, so the resident total stays about one
// model's size. The first error is rethrown once every thread has stopped.
void repack_jobs(GgufFile& file, bool in_place, const std::vector<RepackJob>& jobs) {
  struct Chunk {
    size_t job;
    int64_t r0, r1;
  };
  std::vector<Chunk> chunks;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const RepackJob& j = jobs[i];
    const int64_t g = repack_group_rows(j.to), step = (kRepackChunkRows + g - 1) / g * g;
    for (int64_t r = 0; r < j.rows; r += step) chunks.push_back(Chunk{i, r, std::min(j.rows, r + step)});
  }
  std::vector<std::atomic<int64_t>> left(jobs.size());
  for (const Chunk& c : chunks) left[c.job].fetch_add(1, std::memory_order_relaxed);
  std::atomic<size_t> next{0};
  std::mutex error_mu;
  std::exception_ptr error;
  auto work = [&] {
    std::vector<uint8_t> group;  // in place: one group's stored rows
    for (size_t n; (n = next.fetch_add(1)) < chunks.size();) {
      const Chunk& c = chunks[n];
      const RepackJob& j = jobs[c.job];
      const GgufTensorInfo& t = *j.t;
      try {
        const int64_t in_rb = ggml_row_bytes(t.type, j.k), out_rb = ggml_row_bytes(j.to, j.k);
        if (in_place) {
          const int64_t g = repack_group_rows(j.to);
          group.resize(size_t(g * in_rb));
          for (int64_t r = c.r0; r < c.r1; r += g) {
            std::memcpy(group.data(), t.data + r * in_rb, group.size());
            repack_rows(t.type, j.to, group.data(), j.dst + r * out_rb, j.k, g);
          }
        } else {
          repack_rows(t.type, j.to, t.data + c.r0 * in_rb, j.dst + c.r0 * out_rb, j.k, c.r1 - c.r0);
        }
      } catch (...) {
        const std::lock_guard<std::mutex> lock(error_mu);
        if (!error) error = std::current_exception();
        next.store(chunks.size());
        return;
      }
      if (left[c.job].fetch_sub(1) == 1 && !in_place) file.release_tensor_bytes(t);
    }
  };
  if (chunks.empty()) return;
  const size_t helpers = std::min<size_t>(size_t(default_thread_count()), chunks.size()) - 1;
  std::vector<std::thread> threads;
  for (size_t i = 0; i < helpers; ++i) {
    try {
      threads.emplace_back(work);
    } catch (const std::system_error&) {
      break;
    }
  }
  work();
  for (std::thread& th : threads) th.join();
  if (error) std::rethrow_exception(error);
}

// The matmul weights of one stored type: their bytes, the layout chosen for
// them, how many tensors were repacked to it and how many kept as stored.
struct LayoutCount {
  GgmlType stored, to;
  int64_t bytes = 0;
  int repacked = 0, kept = 0;
};

// "Q4_K: Q4_K_X16 (154 tensors); Q6_K: as stored (23 tensors), measured
// decode 6.4 GB/s as stored, 3.9 as Q6_K_X16 (median pair 0.62x), prompts
// 1.12x, a request of 512 + 128 tokens 0.81x", for Model::weight_layouts().
std::string describe_layouts(const std::vector<LayoutCount>& counts) {
  const std::vector<LayoutTiming> measured = measured_layouts();
  std::string out;
  for (const LayoutCount& c : counts) {
    char buf[200];
    out += out.empty() ? "" : "; ";
    out += ggml_type_name(c.stored) + ": ";
    if (c.repacked > 0) {
      std::snprintf(buf, sizeof buf, "%s (%d tensor%s)", ggml_type_name(c.to).c_str(), c.repacked,
                    c.repacked == 1 ? "" : "s");
      out += buf;
    }
    if (c.kept > 0) {
      std::snprintf(buf, sizeof buf, "%sas stored (%d tensor%s)", c.repacked > 0 ? ", " : "", c.kept,
                    c.kept == 1 ? "" : "s");
      out += buf;
    }
    for (const LayoutTiming& m : measured)
      if (m.stored == c.stored) {
        std::snprintf(buf, sizeof buf,
                      ", measured decode %.1f GB/s as stored, %.1f as %s (median pair %.2fx), prompts %.2fx, "
                      "a request of %d + %d tokens %.2fx",
                      m.stored_gb_per_s, m.x16_gb_per_s, ggml_type_name(m.x16).c_str(), m.x16_over_stored,
                      m.x16_prompt_over_stored, kRefPromptTokens, kRefDecodeTokens, m.x16_request_speedup);
        out += buf;
      }
  }
  return out;
}

}  // namespace

void Model::repack_weights(WeightLayout layout) {
  // Every matmul weight view of the model.
  std::vector<WeightView*> views;
  if (output_.data != token_embd_.data) views.push_back(&output_);
  for (LayerWeights& l : layers_) {
    for (WeightView* v : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down, &l.delta_net.qkv,
                          &l.delta_net.z, &l.delta_net.beta, &l.delta_net.alpha, &l.delta_net.out, &l.moe.router,
                          &l.moe.sh_gate, &l.moe.sh_up, &l.moe.sh_down})
      views.push_back(v);
    for (auto* list : {&l.moe.gate, &l.moe.up, &l.moe.down})
      for (WeightView& v : *list) views.push_back(&v);
  }
  // The matmul weights (tensors with a view), and each stored type's bytes
  // and layout.
  std::vector<const GgufTensorInfo*> weights;
  std::vector<LayoutCount> counts;
  const auto count_of = [&](GgmlType type) {
    return std::find_if(counts.begin(), counts.end(), [&](const LayoutCount& c) { return c.stored == type; });
  };
  for (const GgufTensorInfo& t : file_->tensors()) {
    if (t.ne.empty() || t.name == "token_embd.weight") continue;
    bool used = false;
    for (const WeightView* v : views) used = used || (v->data >= t.data && v->data < t.data + t.nbytes);
    if (!used) continue;
    weights.push_back(&t);
    auto it = count_of(t.type);
    if (it == counts.end()) it = counts.insert(counts.end(), LayoutCount{t.type, t.type});
    it->bytes += int64_t(t.nbytes);
  }
  for (LayoutCount& c : counts)
    c.to = layout == WeightLayout::kAsStored       ? c.stored
           : layout == WeightLayout::kFastest ? fastest_layout(c.stored, c.bytes)
                                                    : matmul_repacked_type(c.stored);
  std::vector<RepackJob> jobs;
  size_t total = 0;
  bool same_size = true;
  for (const GgufTensorInfo* tp : weights) {
    const GgufTensorInfo& t = *tp;
    LayoutCount& c = *count_of(t.type);
    const GgmlType to = c.to;
    const int64_t k = t.ne[0], in_rb = ggml_row_bytes(t.type, k), rows = int64_t(t.nbytes) / in_rb;
    // Layouts interleaving g rows: only tensors whose every view is whole
    // groups (others stay as stored, which computes the same bits).
    const int64_t g = repack_group_rows(to);
    bool whole = rows % g == 0, mapped = true;
    for (const WeightView* v : views) {
      if (v->data < t.data || v->data >= t.data + t.nbytes) continue;
      whole = whole && (v->data - t.data) % (g * in_rb) == 0 && v->n % g == 0;
      mapped = mapped && v->type == t.type && v->k == k && (v->data - t.data) % in_rb == 0;
    }
    const bool repack = to != t.type && whole;
    (repack ? c.repacked : c.kept) += 1;
    if (!repack) continue;
    // (Checked before any tensor is rewritten in place.)
    if (!mapped) throw Error(file_->path() + ": tensor '" + t.name + "' has a view the repacking does not map");
    jobs.push_back(RepackJob{&t, to, k, rows, total});
    total += size_t(((rows * ggml_row_bytes(to, k)) + 63) & ~int64_t(63));
    same_size = same_size && ggml_row_bytes(to, k) == in_rb;
  }
  weight_layouts_ = describe_layouts(counts);
  if (jobs.empty()) return;
  // In place when the file is a copy in memory (the layouts have the same
  // bytes a row): no second region to fault in and zero, no tensor in two
  // layouts at once. A mapped file's pages are the page cache's, so its
  // tensors are copied to a region of their own.
  uint8_t* const in_place = same_size ? file_->rewritable_bytes() : nullptr;
  if (in_place) {
    for (RepackJob& j : jobs) j.dst = in_place + (j.t->data - in_place);
  } else {
    void* region = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED) throw Error(file_->path() + ": no memory for the repacked weights");
#ifdef MADV_HUGEPAGE
    ::madvise(region, total, MADV_HUGEPAGE);  // advice only
#endif
    repacked_ = std::shared_ptr<uint8_t>(static_cast<uint8_t*>(region), [total](uint8_t* p) { ::munmap(p, total); });
    for (RepackJob& j : jobs) j.dst = repacked_.get() + j.offset;
  }
  repack_jobs(*file_, in_place != nullptr, jobs);
  for (const RepackJob& j : jobs) {
    const GgufTensorInfo& t = *j.t;
    const int64_t in_rb = ggml_row_bytes(t.type, j.k), out_rb = ggml_row_bytes(j.to, j.k);
    for (WeightView* v : views) {
      if (v->data < t.data || v->data >= t.data + t.nbytes) continue;
      v->data = j.dst + (v->data - t.data) / in_rb * out_rb;
      v->row_bytes = out_rb;
      v->type = j.to;
    }
  }
}

}  // namespace pc
