#include "engine/engine.h"
#include "engine/engine_internal.h"
#include "engine/kv_tiers.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "gguf/error.h"
#include "kernels/thread_pool.h"
#include "kv/kv_storage.h"
#include "kv/page_pool.h"
#include "kv/page_table.h"
#include "model/forward.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace pc {

namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

KvShape kv_shape(const Model& m, int page_size) {
  const ModelConfig& c = m.config();
  return KvShape{int(c.n_layer), int(c.n_kv_head), int(c.head_dim), page_size};
}

}  // namespace

SeqKv seq_kv(const PageTable& t, std::vector<int32_t>& pages, std::vector<int32_t>& fills) {
  pages.clear();
  fills.clear();
  bool aligned = true;
  const auto entries = t.entries();
  for (size_t i = 0; i < entries.size(); ++i) {
    pages.push_back(entries[i].page);
    fills.push_back(entries[i].filled);
    if (i + 1 < entries.size() && entries[i].filled != t.pool().page_size()) aligned = false;
  }
  return SeqKv{pages.data(), int32_t(pages.size()), aligned ? nullptr : fills.data()};
}

namespace {

}  // namespace

// When the pool runs out of pages: least recently used prefix entries first,
// then least recently used modules.
struct Engine::Reclaimer : PageReclaimer {
  Reclaimer(RadixIndex& i, ModuleStore& m) : index(i), modules(m) {}
  size_t reclaim(size_t bytes) override {
    size_t freed = index.evict(bytes);
    if (freed < bytes) freed += modules.evict(bytes - freed);
    return freed;
  }
  RadixIndex& index;
  ModuleStore& modules;
};


Engine::Engine(const Model& model, const EngineOptions& opt)
    : model_(model), opt_(opt), pool_(std::make_unique<ThreadPool>(opt.threads)) {
  if (opt.max_batch_tokens < 1) throw Error("max_batch_tokens must be at least 1");
  const KvShape shape = kv_shape(model, opt.page_size);
  const int32_t n_pages = PagePool::pages_for_bytes(shape, uint64_t(std::max<int64_t>(0, opt.kv_memory_bytes)));
  if (n_pages < 1)
    throw Error("--kv-memory " + std::to_string(opt.kv_memory_bytes) +
                " bytes holds no KV page (one page of " + std::to_string(opt.page_size) +
                " tokens needs " + std::to_string(shape.bytes_per_page()) + " bytes)");
  kv_ = std::make_unique<KvStorage>(shape, n_pages);
  pages_ = std::make_unique<PagePool>(*kv_);
  index_ = std::make_unique<RadixIndex>(*pages_);
  modules_ = std::make_unique<ModuleStore>(*pages_);
  reclaimer_ = std::make_unique<Reclaimer>(*index_, *modules_);
  pages_->set_reclaimer(reclaimer_.get());
  fwd_ = std::make_unique<Forward>(model, *kv_, *pool_);
  if (opt.tiers.enabled() && opt.prefix_cache) tiers_ = std::make_unique<KvTiers>(opt.tiers, *pages_, *index_);
}

void Engine::flush_tiers() {
  if (tiers_) tiers_->flush();
}

Engine::~Engine() {
  // Sequences hold page references; drop them before the pool goes away.
  active_.clear();
}

KvNamespace Engine::ns(const std::string& tenant) const {
  return KvNamespace{model_.fingerprint(), "f16", tenant};
}

Engine::Seq& Engine::start(const GenerateRequest& req, TokenCallback on_token) {
  if (req.prompt.empty()) throw Error("the prompt is empty");
  const int64_t V = model_.config().n_vocab;
  for (size_t i = 0; i < req.prompt.size(); ++i)
    if (req.prompt[i] < 0 || req.prompt[i] >= V)
      throw Error("prompt token " + std::to_string(i) + " has id " + std::to_string(req.prompt[i]) +
                  ", outside the vocabulary of " + std::to_string(V));
  Seq& sq = new_seq(req, std::move(on_token));
  Seq* s = &sq;
  s->tokens = req.prompt;
  s->n_prompt = int32_t(req.prompt.size());
  for (int32_t i = 0; i < s->n_prompt; ++i) s->positions.push_back(i);
  s->result.n_prompt = int64_t(req.prompt.size());
  ++stats_.requests;
  stats_.prompt_tokens += s->result.n_prompt;
  if (tiers_) {
    // A lower tier may hold more of the prompt than memory does: ask it (off this
    // thread) and start once it answered. Only whole pages can come from a tier.
    const int32_t have = index_->match_prefix(s->ns, req.prompt, RadixIndex::MatchUse::kPeek).length;
    const int32_t P = opt_.page_size;
    if ((s->n_prompt - 1) / P * P > have) {
      s->promoting = true;
      const int64_t id = s->id;
      tiers_->promote_prefix(s->ns, std::span<const int32_t>(req.prompt).first(s->n_prompt - 1), have,
                             [this, id](int32_t restored) {
                               auto it = active_.find(id);
                               if (it == active_.end()) return;  // cancelled meanwhile
                               Seq& q = *it->second;
                               q.promoting = false;
                               attach_prefix(q);
                               q.result.n_promoted = std::min<int64_t>(restored, q.result.n_cached);
                             });
      return *s;
    }
  }
  attach_prefix(*s);
  return *s;
}

void Engine::attach_prefix(Seq& s) {
  if (opt_.prefix_cache) {
    PrefixMatch m = index_->match_prefix(s.ns, s.tokens);
    index_->lock(m.node);
    s.lock_node = m.node;
    s.table = PageTable::from_slices(*pages_, m.slices);
    s.n_kv = m.length;
  }
  s.result.n_cached = s.n_kv;
  s.result.n_computed = s.result.n_prompt - s.n_kv;
  stats_.cached_tokens += s.result.n_cached;
  stats_.computed_tokens += s.result.n_computed;
}

Engine::Seq& Engine::new_seq(const GenerateRequest& req, TokenCallback on_token) {
  if (req.max_tokens < 0) throw Error("max_tokens must be >= 0");
  auto s = std::make_unique<Seq>(*pages_, req.sampling);
  s->id = next_id_++;
  s->req = req;
  s->on_token = std::move(on_token);
  s->ns = ns(req.tenant);
  s->t_start = Clock::now();
  Seq& ref = *s;
  active_.emplace(s->id, std::move(s));
  return ref;
}

int64_t Engine::add(const GenerateRequest& req, TokenCallback on_token) {
  return start(req, std::move(on_token)).id;
}

void Engine::finish(Seq& s, const std::string& reason) {
  s.result.finish_reason = reason;
  const Clock::time_point now = Clock::now();
  if (s.result.tokens.empty()) {
    s.result.prompt_ms = ms_between(s.t_start, now);
  } else {
    s.result.decode_ms = ms_between(s.t_first, now);
  }
  if (opt_.prefix_cache && !s.plan && s.n_kv > 0 && reason != "error") {
    const std::span<const int32_t> kv_tokens(s.tokens.data(), s.n_kv);
    index_->insert(s.ns, kv_tokens, s.table);
    if (tiers_) {
      // Tiers find entries by exact page-aligned length (tier/entry_key.h): write what
      // the next turn probes (everything with KV) and what a repeat of this prompt
      // probes (its tokens before the last); the second is skipped when it is the same.
      tiers_->save_prefix(s.ns, kv_tokens);
      tiers_->save_prefix(s.ns, kv_tokens.first(std::min(s.n_kv, s.n_prompt - 1)));
    }
  }
  s.table.release();
  index_->unlock(s.lock_node);
  s.lock_node = -1;
  finished_.emplace_back(s.id, std::move(s.result));
  active_.erase(s.id);
}

void Engine::cancel(int64_t id) {
  auto it = active_.find(id);
  if (it != active_.end()) finish(*it->second, "stop");
}

std::vector<std::pair<int64_t, GenerateResult>> Engine::take_finished() {
  return std::exchange(finished_, {});
}

std::span<const TokenLogprobs> Engine::logprobs(int64_t id) const {
  auto it = active_.find(id);
  if (it == active_.end()) return {};
  return it->second->result.logprobs;
}

void Engine::sample(Seq& s, const float* logits) {
  const int64_t V = model_.config().n_vocab;
  if (s.result.tokens.empty()) s.result.prompt_ms = ms_between(s.t_start, Clock::now());
  if (int32_t(s.result.tokens.size()) >= s.req.max_tokens) return finish(s, "length");
  const int32_t tok = s.sampler.sample(std::span<const float>(logits, V), s.tokens);
  if (s.req.logprobs >= 0)
    s.result.logprobs.push_back(token_logprobs(std::span<const float>(logits, V), tok, s.req.logprobs));
  if (s.result.tokens.empty()) {
    s.t_first = Clock::now();
    s.result.ttft_ms = ms_between(s.t_start, s.t_first);
  }
  s.result.tokens.push_back(tok);
  s.tokens.push_back(tok);
  s.positions.push_back(s.positions.back() + 1);
  ++stats_.generated_tokens;
  const bool keep_going = !s.on_token || s.on_token(tok);
  if (!keep_going || (s.req.stop_at_eog && model_.tokenizer().is_eog(tok))) return finish(s, "stop");
  if (int32_t(s.result.tokens.size()) >= s.req.max_tokens) return finish(s, "length");
}

void Engine::step() {
  if (tiers_) tiers_->poll();
  if (active_.empty()) return;
  // Plan the batch: decoding sequences first (one token each), then prompt
  // chunks, within max_batch_tokens.
  struct Part { Seq* seq; int32_t n; };
  std::vector<Part> parts;
  int64_t budget = opt_.max_batch_tokens;
  std::vector<Seq*> out_of_memory;
  for (int pass = 0; pass < 2; ++pass) {
    for (auto& [id, sp] : active_) {
      Seq& s = *sp;
      if (s.promoting) continue;
      const bool decoding = s.prompt_done();
      if ((pass == 0) != decoding || budget == 0) continue;
      const int32_t n = int32_t(std::min<int64_t>(budget, int64_t(s.tokens.size()) - s.n_kv));
      if (n <= 0) continue;
      if (!s.table.prepare_append(n)) {
        out_of_memory.push_back(&s);
        continue;
      }
      parts.push_back({&s, n});
      budget -= n;
    }
  }
  for (Seq* s : out_of_memory) {
    s->result.error = "out of KV memory: the sequence needs " +
                      std::to_string(s->tokens.size()) + " token slots; raise --kv-memory";
    finish(*s, "error");
  }
  if (parts.empty()) {
    // Everything left waits for a tier lookup: sleep until one answers.
    if (tiers_ && !active_.empty() && tiers_->wait(50)) tiers_->poll();
    return;
  }

  std::vector<std::vector<int32_t>> pages(parts.size()), fills(parts.size());
  std::vector<SeqKv> seqs(parts.size());
  std::vector<BatchEntry> batch;
  for (size_t i = 0; i < parts.size(); ++i) {
    Seq& s = *parts[i].seq;
    seqs[i] = seq_kv(s.table, pages[i], fills[i]);
    for (int32_t j = 0; j < parts[i].n; ++j) {
      const int32_t t = s.n_kv + j;
      batch.push_back(BatchEntry{s.tokens[t], s.positions[t], int32_t(i), t, t + 1 == int32_t(s.tokens.size())});
    }
  }
  const float* logits = fwd_->run(batch, seqs);
  const int64_t V = model_.config().n_vocab;
  int64_t row = 0;
  for (Part& p : parts) {
    Seq& s = *p.seq;
    s.n_kv += p.n;
    if (s.n_kv == int32_t(s.tokens.size())) sample(s, logits + (row++) * V);
  }
}

GenerateResult Engine::generate(const GenerateRequest& req, const TokenCallback& on_token) {
  return wait(start(req, on_token).id);
}

GenerateResult Engine::wait(int64_t id) {
  for (;;) {
    for (auto& [fid, r] : finished_) {
      if (fid != id) continue;
      GenerateResult out = std::move(r);
      finished_.erase(std::find_if(finished_.begin(), finished_.end(),
                                   [&](const auto& f) { return f.first == id; }));
      if (out.finish_reason == "error") throw Error(out.error);
      return out;
    }
    step();
  }
}

std::vector<float> Engine::prompt_logits(const std::vector<int32_t>& prompt, int chunk,
                                         bool use_cache, int64_t* n_cached,
                                         const std::string& tenant) {
  if (prompt.empty()) throw Error("the prompt is empty");
  const int64_t V = model_.config().n_vocab;
  const KvNamespace space = ns(tenant);
  PageTable table(*pages_);
  int32_t node = -1, done = 0;
  if (use_cache) {
    if (tiers_) {  // promote synchronously: this call runs to completion anyway
      const int32_t have = index_->match_prefix(space, prompt, RadixIndex::MatchUse::kPeek).length;
      const int32_t P = opt_.page_size;
      if ((int32_t(prompt.size()) - 1) / P * P > have) {
        tiers_->promote_prefix(space, std::span<const int32_t>(prompt).first(prompt.size() - 1), have, nullptr);
        tiers_->flush();
      }
    }
    PrefixMatch m = index_->match_prefix(space, prompt);
    index_->lock(m.node);
    node = m.node;
    table = PageTable::from_slices(*pages_, m.slices);
    done = m.length;
  }
  if (n_cached) *n_cached = done;
  std::vector<float> out;
  out.reserve((prompt.size() - done) * V);
  std::vector<int32_t> ids, fills;
  try {
    while (done < int32_t(prompt.size())) {
      const int32_t n = std::min<int32_t>(chunk, int32_t(prompt.size()) - done);
      if (!table.prepare_append(n)) throw Error("out of KV memory");
      SeqKv kv = seq_kv(table, ids, fills);
      std::vector<BatchEntry> batch;
      for (int32_t t = done; t < done + n; ++t) batch.push_back(BatchEntry{prompt[t], t, 0, t, true});
      const float* l = fwd_->run(batch, std::span<const SeqKv>(&kv, 1));
      out.insert(out.end(), l, l + int64_t(n) * V);
      done += n;
    }
  } catch (...) {
    table.release();
    index_->unlock(node);
    throw;
  }
  if (use_cache) {
    index_->insert(space, prompt, table);
    if (tiers_) tiers_->save_prefix(space, prompt);
  }
  table.release();
  index_->unlock(node);
  return out;
}

}  // namespace pc
