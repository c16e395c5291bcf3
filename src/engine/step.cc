// One engine step: resume what waits, plan a batch within max_batch_tokens (decoding
// sequences first, then prompt and module-encoding chunks, oldest first), admit KV
// pages for it — preempting the youngest sequences when pages run out — and run it.
//
// KV admission. Every admitted request fits alone (Engine::check_fits), so progress
// is guaranteed by always letting the oldest sequence win: a sequence that cannot get
// pages preempts the youngest running sequence younger than itself; with none left,
// it parks itself until older ones finish. A preempted sequence publishes its KV in
// the prefix cache (a plain prompt) and releases its pages; it is reassembled — a
// prefix hit for the tokens still cached — once the pages it needs are free.
#include <algorithm>
#include <chrono>

#include "common/stopwatch.h"
#include "engine/engine.h"
#include "engine/kv_tiers.h"
#include "engine/module_cache.h"
#include "engine/prefix_cache.h"
#include "engine/relocation.h"
#include "engine/sequence.h"
#include "kv/page_pool.h"
#include "model/forward.h"
#include "model/model.h"

namespace pc {

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
  SeqKv kv;
  kv.pages = pages.data();
  kv.n_pages = int32_t(pages.size());
  kv.fills = aligned ? nullptr : fills.data();
  return kv;
}

struct Engine::Part {
  Seq* seq;
  int32_t n;  // tokens computed this step
  // The stretches computed, in prompt order: tokens [first, first + count); cached runs
  // between them are attached already.
  std::vector<std::pair<int32_t, int32_t>> segments;
};

namespace {

bool holds_pages(const Engine::Seq& s) { return s.table.n_tokens() > 0 || !s.hold.entries().empty(); }

}  // namespace

void Engine::resume_waiting() {
  const int32_t P = pages_->page_size();
  int64_t room = int64_t(pages_->n_free()) + pages_->n_cached();  // pages a step could get
  for (auto& [id, sp] : active_) {
    Seq& s = *sp;
    if (s.state == Seq::State::kWaiting) {
      assemble(s);
    } else if (s.state == Seq::State::kParked) {
      // Resume when its whole KV (and a page to grow into) could be had; a resumed
      // sequence that still runs short is preempted again, oldest first wins.
      const int64_t need = (int64_t(s.tokens.size()) + P - 1) / P + 1;
      if (need <= room) {
        room -= need;
        assemble(s);
      }
    }
  }
}

// Attaches the cached runs the sequence has reached and prepares pages for its next
// tokens to compute: up to the step's budget, across as many runs as it reaches — the
// cached runs between computed ones are attached on the way, so a prompt of many short
// computed runs (approximate reuse: the recomputed tokens between reused ones) costs one
// forward pass per budget, not one per run. Each token attends to slots [0, slot] of the
// table as laid out in prompt order, whichever step computes it (batch invariance).
// False when the pool could not supply the pages for the first tokens (the table is
// then unchanged); pages missing for later runs end the part where it got.
bool Engine::plan_part(Seq& s, int64_t& budget, std::vector<Part>& parts) {
  while (s.run < s.runs.size() && s.runs[s.run].cached) {
    Run& r = s.runs[s.run];
    if (!attach_run(s, r)) return false;
    s.n_kv = r.end;
    ++s.run;
  }
  Part part{&s, 0, {}};
  int32_t at = s.n_kv;
  size_t run = s.run;
  while (budget > 0) {
    if (run < s.runs.size() && s.runs[run].cached) {  // between two computed stretches
      Run& r = s.runs[run];
      if (!attach_run(s, r)) break;  // no pages for its copy: the part ends before it
      at = r.end;
      ++run;
      continue;
    }
    const int32_t end = run < s.runs.size() ? s.runs[run].end : int32_t(s.tokens.size());
    const int32_t n = int32_t(std::min<int64_t>(budget, end - at));
    if (n <= 0) break;
    if (run < s.runs.size()) {
      Run& r = s.runs[run];
      if (r.fresh_page && at == r.begin) {
        s.table.seal();
        if (r.first_entry < 0) r.first_entry = int32_t(s.table.entries().size());
      }
    }
    if (!s.table.prepare_append(n)) {
      if (part.n == 0) return false;
      break;
    }
    part.segments.push_back({at, n});
    part.n += n;
    budget -= n;
    at += n;
    if (at < end || run >= s.runs.size()) break;  // the budget ends inside the run, or the prompt ended
    ++run;
  }
  if (part.n > 0) parts.push_back(std::move(part));
  return true;
}

bool Engine::attach_run(Seq& s, Run& r) {
  if (r.attached) return true;
  if (r.copied.empty()) {
    s.table.attach(r.pages);
  } else {
    ScopedMs timer(s.result.timings.relocate_ms);
    const int32_t before = s.table.n_tokens();
    if (!relocated_copy(*pages_, model_, r.copied, r.shift, s.table)) {
      s.table.truncate(before);
      return false;
    }
  }
  r.attached = true;
  return true;
}

void Engine::preempt(Seq& s) {
  // A sequence planned into this step and then preempted holds slots for its dropped
  // part that no forward pass wrote: only the computed tokens are published.
  if (s.prefix_plan && !s.approximate && s.n_kv > 0) {
    if (s.table.n_tokens() > s.n_kv) s.table.truncate(s.n_kv);
    const std::vector<PrefixState> states = s.snapshots.to_publish(s.recurrent, s.n_kv);
    prefix_->insert(s.ns, std::span<const int32_t>(s.tokens.data(), s.n_kv), s.table, {}, states);
  }
  s.snapshots.clear();
  s.table.release();
  s.hold.release();
  s.lease.reset();
  s.runs.clear();
  s.run = 0;
  s.n_kv = 0;
  // s.recurrent stays, as the state after tokens [0, n_kv): reassembly resumes from it
  // while the index still holds that KV, else from the snapshot its prefix hit ends
  // at, else from the first token (PrefixCache::attach).
  s.state = Seq::State::kParked;
  ++s.result.n_preempted;
  ++stats_.preemptions;
}

// Frees pages for `s` by preempting the youngest running sequence younger than it
// (dropping its part of this step). False when there is none.
bool Engine::preempt_for(Seq& s, std::vector<Part>& parts, int64_t& budget) {
  for (auto it = active_.rbegin(); it != active_.rend() && it->first > s.id; ++it) {
    Seq& v = *it->second;
    if (v.state != Seq::State::kRunning || !holds_pages(v)) continue;
    for (auto p = parts.begin(); p != parts.end(); ++p)
      if (p->seq == &v) {
        budget += p->n;
        parts.erase(p);
        break;
      }
    preempt(v);
    return true;
  }
  return false;
}

// Tokens of module encoding this step may carry: with sequences decoding, what keeps
// the step within encode_stall_factor of a decode-only step.
int64_t Engine::encode_budget() const {
  const bool decoding = std::any_of(active_.begin(), active_.end(), [](const auto& kv) {
    const Seq& s = *kv.second;
    return s.kind == Seq::Kind::kRequest && s.state == Seq::State::kRunning && s.prompt_done();
  });
  if (!decoding || opt_.encode_stall_factor <= 0 || decode_step_ms_ <= 0) return opt_.max_batch_tokens;
  if (prompt_token_ms_ <= 0) return 16;  // a first chunk to measure the cost of
  const double tokens = decode_step_ms_ * (opt_.encode_stall_factor - 1) / prompt_token_ms_;
  return std::clamp<int64_t>(int64_t(tokens), 1, opt_.max_batch_tokens);
}

void Engine::step() {
  if (tiers_) tiers_->poll();
  if (active_.empty()) return;
  resume_waiting();
  std::vector<Part> parts;
  int64_t budget = opt_.max_batch_tokens;
  int64_t encoding = encode_budget();
  std::vector<Seq*> failed, encoded;
  for (int pass = 0; pass < 2; ++pass) {
    for (auto& [id, sp] : active_) {
      Seq& s = *sp;
      if (s.state != Seq::State::kRunning || budget == 0) continue;
      if ((pass == 0) != (s.prompt_done() && s.kind == Seq::Kind::kRequest)) continue;
      if (std::any_of(parts.begin(), parts.end(), [&](const Part& p) { return p.seq == &s; })) continue;
      const bool enc = s.kind == Seq::Kind::kEncode;
      if (enc && encoding <= 0) continue;
      // An encoding's share: at most `encoding` tokens of the step budget.
      int64_t share = enc ? std::min(budget, encoding) : budget;
      int64_t share0 = share;
      bool ok;
      while (!(ok = plan_part(s, share, parts))) {
        if (preempt_for(s, parts, budget)) {
          share0 = share = enc ? std::min(budget, encoding) : budget;  // a preempted part's tokens came back
          continue;
        }
        // Nobody younger to take pages from: wait for the older ones to finish, or,
        // when no other sequence holds pages, the request cannot run at all.
        const bool others = std::any_of(active_.begin(), active_.end(), [&](const auto& kv) {
          return kv.second.get() != &s && kv.second->state == Seq::State::kRunning && holds_pages(*kv.second);
        });
        if (others) {
          preempt(s);
        } else {
          failed.push_back(&s);
        }
        break;
      }
      if (ok) {
        budget -= share0 - share;
        if (enc) encoding -= share0 - share;
      }
      if (s.state == Seq::State::kRunning && s.kind == Seq::Kind::kEncode && s.n_kv == int32_t(s.tokens.size()))
        encoded.push_back(&s);  // nothing (left) to compute: its context was all it had
    }
  }
  for (Seq* s : encoded)
    if (s->state == Seq::State::kRunning) finish_encoding(*s);
  for (Seq* s : failed) {
    const std::string error = "out of KV memory: the sequence needs " + std::to_string(s->tokens.size()) +
                              " token slots; raise --kv-memory";
    if (s->kind == Seq::Kind::kEncode) {
      // A module that cannot be encoded even alone: the requests waiting for it fail
      // with it instead of asking for it again.
      const uint64_t digest = s->spec(s->module).digest;
      std::vector<Seq*> waiting;
      for (auto& [id, q] : active_)
        if (q->kind == Seq::Kind::kRequest && q->state == Seq::State::kWaiting && q->plan.modules)
          for (const ModuleSpec& m : *q->plan.modules)
            if (m.digest == digest) {
              waiting.push_back(q.get());
              break;
            }
      for (Seq* q : waiting) {
        q->result.error = "a module of the prompt does not fit in the KV memory: " + error;
        finish(*q, FinishReason::kError);
      }
    }
    s->result.error = error;
    finish(*s, FinishReason::kError);
  }
  if (parts.empty()) {
    // Everything left waits for a tier lookup: sleep until one answers.
    if (tiers_ && !active_.empty() && tiers_->wait(50)) tiers_->poll();
    return;
  }
  run_parts(parts);
}

void Engine::run_parts(std::vector<Part>& parts) {
  std::vector<std::vector<int32_t>> pages(parts.size()), fills(parts.size());
  std::vector<SeqKv> seqs(parts.size());
  std::vector<std::vector<StateCapture>> captures(parts.size());
  std::vector<BatchEntry> batch;
  for (size_t i = 0; i < parts.size(); ++i) {
    Seq& s = *parts[i].seq;
    seqs[i] = seq_kv(s.table, pages[i], fills[i]);
    if (!s.recurrent.empty()) {
      seqs[i].state = &s.recurrent;
      // Published prefixes only (not module encodings): snapshots at the resume points.
      if (s.prefix_plan && !s.approximate)
        for (const auto& [first, count] : parts[i].segments)
          s.snapshots.captures(model_.config(), first, count, captures[i]);
      seqs[i].captures = captures[i];
    }
    for (const auto& [first, count] : parts[i].segments)
      for (int32_t t = first; t < first + count; ++t) {
        const bool logits = s.wants_logits() && t + 1 == int32_t(s.tokens.size());
        batch.push_back(BatchEntry{s.tokens[t], s.positions[t], int32_t(i), t, logits});
      }
  }
  const auto t0 = std::chrono::steady_clock::now();
  const float* logits = fwd_->run(batch, seqs);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  int64_t prompt_tokens = 0;
  for (const Part& p : parts) {
    if (!(p.seq->kind == Seq::Kind::kRequest && p.seq->prompt_done() && p.n == 1)) prompt_tokens += p.n;
    if (!p.seq->prompt_done()) {
      p.seq->result.timings.forward_ms += ms;
      ++p.seq->result.timings.forward_passes;
    }
  }
  auto average = [](double& avg, double x) { avg = avg <= 0 ? x : 0.8 * avg + 0.2 * x; };
  if (prompt_tokens == 0) {
    average(decode_step_ms_, ms);
  } else if (decode_step_ms_ > 0) {
    average(prompt_token_ms_, std::max(0.0, ms - decode_step_ms_) / double(prompt_tokens));
  }
  const int64_t V = model_.config().n_vocab;
  int64_t row = 0;
  for (Part& p : parts) {
    Seq& s = *p.seq;
    s.snapshots.trim();
    s.n_kv = p.segments.back().first + p.segments.back().second;
    while (s.run < s.runs.size() && s.n_kv >= s.runs[s.run].end) ++s.run;
    if (s.n_kv != int32_t(s.tokens.size())) continue;
    if (s.kind == Seq::Kind::kEncode) {
      finish_encoding(s);
    } else {
      sample(s, logits + (row++) * V);
    }
  }
}

}  // namespace pc
