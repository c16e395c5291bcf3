#include "engine/engine.h"

#include <chrono>

#include "gguf/error.h"
#include "kernels/thread_pool.h"
#include "kv/kv_storage.h"
#include "model/forward.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace pc {

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

KvShape kv_shape(const Model& m, int page_size) {
  const ModelConfig& c = m.config();
  return KvShape{int(c.n_layer), int(c.n_kv_head), int(c.head_dim), page_size};
}

}  // namespace

// One sequence's KV: its pages in order and how many slots hold tokens.
struct Engine::Seq {
  std::vector<int32_t> pages;
  int64_t n_slots = 0;
};

Engine::Engine(const Model& model, const EngineOptions& opt)
    : model_(model), opt_(opt), pool_(std::make_unique<ThreadPool>(opt.threads)) {
  const KvShape shape = kv_shape(model, opt.page_size);
  const int64_t n_pages = opt.kv_memory_bytes / int64_t(shape.bytes_per_page());
  if (n_pages < 1)
    throw Error("--kv-memory " + std::to_string(opt.kv_memory_bytes) +
                " bytes holds no KV page (one page needs " +
                std::to_string(shape.bytes_per_page()) + " bytes)");
  kv_ = std::make_unique<KvStorage>(shape, int32_t(n_pages));
  fwd_ = std::make_unique<Forward>(model, *kv_, *pool_);
  for (int32_t p = int32_t(n_pages) - 1; p >= 0; --p) free_pages_.push_back(p);
}

Engine::~Engine() = default;

void Engine::grow(Seq& s, int64_t n_slots) {
  const int P = opt_.page_size;
  while (int64_t(s.pages.size()) * P < n_slots) {
    if (free_pages_.empty())
      throw Error("out of KV memory: the sequence needs " + std::to_string(n_slots) +
                  " token slots; raise --kv-memory");
    s.pages.push_back(free_pages_.back());
    free_pages_.pop_back();
  }
}

void Engine::release(Seq& s) {
  for (int32_t p : s.pages) free_pages_.push_back(p);
  s.pages.clear();
  s.n_slots = 0;
}

// Runs tokens[begin, end) of the sequence, appended after its current slots.
const float* Engine::step(Seq& s, const std::vector<int32_t>& tokens, size_t begin, size_t end,
                          bool all_logits) {
  grow(s, s.n_slots + int64_t(end - begin));
  std::vector<BatchEntry> batch;
  batch.reserve(end - begin);
  for (size_t i = begin; i < end; ++i) {
    BatchEntry e;
    e.token = tokens[i];
    e.pos = int32_t(s.n_slots);
    e.seq = 0;
    e.slot = int32_t(s.n_slots);
    e.logits = all_logits || i + 1 == end;
    batch.push_back(e);
    ++s.n_slots;
  }
  SeqKv kv{s.pages.data(), int32_t(s.pages.size())};
  return fwd_->run(batch, std::span<const SeqKv>(&kv, 1));
}

std::vector<float> Engine::prompt_logits(const std::vector<int32_t>& prompt, int chunk) {
  const int64_t V = model_.config().n_vocab;
  std::vector<float> out(prompt.size() * V);
  Seq s;
  try {
    for (size_t b = 0; b < prompt.size(); b += chunk) {
      const size_t e = std::min(prompt.size(), b + size_t(chunk));
      const float* l = step(s, prompt, b, e, true);
      std::copy(l, l + (e - b) * V, out.begin() + b * V);
    }
  } catch (...) {
    release(s);
    throw;
  }
  release(s);
  return out;
}

GenerateResult Engine::generate(const GenerateRequest& req,
                                const std::function<bool(int32_t)>& on_token) {
  if (req.prompt.empty()) throw Error("the prompt is empty");
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t V = model_.config().n_vocab;
  GenerateResult r;
  r.n_prompt = int64_t(req.prompt.size());
  r.n_computed = r.n_prompt;
  Sampler sampler(req.sampling);
  std::vector<int32_t> history = req.prompt;
  Seq s;
  try {
    const float* logits = nullptr;
    for (size_t b = 0; b < req.prompt.size(); b += opt_.prefill_chunk) {
      const size_t e = std::min(req.prompt.size(), b + size_t(opt_.prefill_chunk));
      logits = step(s, req.prompt, b, e, false);
    }
    r.prompt_ms = ms_since(t0);
    r.finish_reason = "length";
    for (int32_t n = 0; n < req.max_tokens; ++n) {
      const int32_t tok = sampler.sample(std::span<const float>(logits, V), history);
      if (n == 0) r.ttft_ms = ms_since(t0);
      r.tokens.push_back(tok);
      history.push_back(tok);
      const bool eog = req.stop_at_eog && model_.tokenizer().is_eog(tok);
      if (on_token && !on_token(tok)) { r.finish_reason = "stop"; break; }
      if (eog) { r.finish_reason = "stop"; break; }
      if (n + 1 == req.max_tokens) break;
      logits = step(s, history, history.size() - 1, history.size(), false);
    }
  } catch (...) {
    release(s);
    throw;
  }
  release(s);
  r.decode_ms = ms_since(t0) - r.ttft_ms;
  return r;
}

}  // namespace pc
