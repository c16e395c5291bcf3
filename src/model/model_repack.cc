// Model::repack_weights(): the matrices the kernels in use read faster in
// another layout (matmul_repacked_type(), kernels/weight_repack.h), repacked
// into one anonymous region advised for transparent huge pages (decode streams
// every weight per token; see Residency::kMemory), each stored tensor's pages
// given back once its copy is made, so a tensor is resident in one layout.
//
// A tensor is repacked only when every view of it is a matmul weight: the
// token embedding (read a row at a time by dequantize_row, and the output
// projection when tied to it) stays as stored; so does one whose rows or
// views are not whole groups of a layout that interleaves rows (the X16 layouts).
#include <sys/mman.h>

#include <cstdint>
#include <vector>

#include "common/error.h"
#include "kernels/weight_repack.h"
#include "model/model.h"

namespace pc {

void Model::repack_weights() {
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
  struct Job {
    const GgufTensorInfo* t;
    GgmlType to;
    int64_t k, rows;
    size_t offset;  // in the region
  };
  std::vector<Job> jobs;
  size_t total = 0;
  for (const GgufTensorInfo& t : file_->tensors()) {
    const GgmlType to = matmul_repacked_type(t.type);
    if (to == t.type || t.ne.empty() || t.name == "token_embd.weight") continue;
    const int64_t k = t.ne[0], in_rb = ggml_row_bytes(t.type, k), rows = int64_t(t.nbytes) / in_rb;
    // Layouts interleaving g rows: only tensors whose every view is whole
    // groups (others stay as stored, which computes the same bits).
    const int64_t g = repack_group_rows(to);
    bool used = false, whole = rows % g == 0;
    for (const WeightView* v : views) {
      if (v->data < t.data || v->data >= t.data + t.nbytes) continue;
      used = true;
      whole = whole && (v->data - t.data) % (g * in_rb) == 0 && v->n % g == 0;
    }
    if (!used || !whole) continue;
    jobs.push_back(Job{&t, to, k, rows, total});
    total += size_t(((rows * ggml_row_bytes(to, k)) + 63) & ~int64_t(63));
  }
  if (jobs.empty()) return;
  void* region = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (region == MAP_FAILED) throw Error(file_->path() + ": no memory for the repacked weights");
#ifdef MADV_HUGEPAGE
  ::madvise(region, total, MADV_HUGEPAGE);  // advice only
#endif
  repacked_ = std::shared_ptr<uint8_t>(static_cast<uint8_t*>(region), [total](uint8_t* p) { ::munmap(p, total); });
  for (const Job& j : jobs) {
    const GgufTensorInfo& t = *j.t;
    uint8_t* dst = repacked_.get() + j.offset;
    repack_rows(t.type, j.to, t.data, dst, j.k, j.rows);
    const int64_t in_rb = ggml_row_bytes(t.type, j.k), out_rb = ggml_row_bytes(j.to, j.k);
    for (WeightView* v : views) {
      if (v->data < t.data || v->data >= t.data + t.nbytes) continue;
      if (v->type != t.type || v->k != j.k || (v->data - t.data) % in_rb != 0)
        throw Error(file_->path() + ": tensor '" + t.name + "' has a view the repacking does not map");
      v->data = dst + (v->data - t.data) / in_rb * out_rb;
      v->row_bytes = out_rb;
      v->type = j.to;
    }
    file_->release_tensor_bytes(t);
  }
}

}  // namespace pc
