// `promptcache bench quality`: how far approximate reuse of moved blocks is from full
// recomputation, per kind of change, recompute policy and budget.
//
// Each prompt is built from blocks of text the model itself generated (sampled, one seed
// per block, so the text is in its training distribution and the run deterministic):
//
//   first request   [BOS][sys][b1][b2][b3][b4][tail]       caches every block
//   second request  the changed arrangement:
//     reordered     [BOS][sys][b2][b3][b1][b4][tail]       (the body blocks rotated)
//     replaced      [BOS][sys][b1'][b2][b3][b4][tail]      (b1 replaced by a new block)
//     inserted      [BOS][sys][b1][bX][b2][b3][b4][tail]   (a new block after b1)
//     dropped       [BOS][sys][b1][r][b2][b3][tail] first, [BOS][sys][b1][b2][b3][tail]
//                   second (earlier reasoning r dropped from the history)
//     paragraph     [BOS][sys][p1¶p2¶p3¶p4¶p5][tail] first, [BOS][sys][p2¶p3¶p1¶p4¶p5][tail]
//                   second: one long part of paragraphs joined by blank lines (¶), its
//                   first paragraph moved inside it. The part is one request block, split
//                   into content chunks by the server's own rule (server/chat/
//                   content_chunks.h), so a moved paragraph is found chunk by chunk.
//
// The second request runs approximately (each policy and budget, on the engine that ran
// the first one; approximate KV is never published, so each run sees the same cache) and
// is compared with a cold exact run of the same tokens: top-1 agreement and KL(full ||
// approximate) of the next-token distribution, and whether the greedy continuation of
// `--continuation` tokens is identical. Each prompt has its own cache namespace.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>

#include "cli/commands.h"
#include "cli/kv_type_flag.h"
#include "server/chat/content_chunks.h"
#include "cli/progress.h"
#include "engine/engine.h"
#include "engine/approximate/recompute_policy.h"
#include "common/error.h"
#include "kernels/cpu_count.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "probe/engine_logits.h"

namespace pc::cli {

namespace {

struct QualityArgs {
  KvType kv_type = KvType::kF16;  // --kv-type
  std::vector<std::string> models;
  int prompts = 100;  // per kind of change (5 kinds: 500 prompts per model)
  std::vector<double> budgets{0, 0.05, 0.10, 0.15, 0.25};
  std::vector<std::string> policies{"prefix", "deviation", "impact"};
  int continuation = 16;
  int threads = 1;
  uint32_t seed = 1;
  int pool = 96;  // generated blocks to draw from
  std::string json_out;
};

enum Change { kReordered, kReplaced, kInserted, kDropped, kParagraph, kChanges };
const char* change_name(int c) {
  static const char* names[] = {"reordered", "replaced", "inserted", "dropped", "paragraph"};
  return names[c];
}

// A policy to measure: "prefix", "deviation", "impact", or a scoring one with ":N"
// (windows of N tokens, e.g. "impact:4").
struct PolicyArg {
  std::string name;
  RecomputePolicy policy;
  int32_t run = 1;
};

PolicyArg parse_policy(const std::string& s) {
  const size_t colon = s.find(':');
  PolicyArg p{s, RecomputePolicy::kPrefix, 1};
  const auto pol = parse_recompute_policy(s.substr(0, colon));
  if (!pol) throw Error("--policies: unknown policy '" + s + "' (prefix, deviation, impact; deviation:N, impact:N)");
  p.policy = *pol;
  if (colon != std::string::npos) p.run = std::max(1, std::atoi(s.c_str() + colon + 1));
  return p;
}

double kl_divergence(const std::vector<float>& p_logits, const std::vector<float>& q_logits) {
  auto log_softmax = [](const std::vector<float>& l) {
    const double m = *std::max_element(l.begin(), l.end());
    double s = 0;
    for (float x : l) s += std::exp(double(x) - m);
    const double lz = m + std::log(s);
    std::vector<double> out(l.size());
    for (size_t i = 0; i < l.size(); ++i) out[i] = double(l[i]) - lz;
    return out;
  };
  const auto lp = log_softmax(p_logits), lq = log_softmax(q_logits);
  double d = 0;
  for (size_t i = 0; i < lp.size(); ++i) d += std::exp(lp[i]) * (lp[i] - lq[i]);
  return std::max(0.0, d);
}

size_t argmax(const std::vector<float>& v) { return size_t(std::max_element(v.begin(), v.end()) - v.begin()); }

struct Cell {  // one (change, policy, budget)
  int64_t n = 0, top1 = 0, same_text = 0;
  double kl_sum = 0, kl_max = 0;
  int64_t reused = 0, recomputed = 0, checked = 0, prompt_tokens = 0;
  double ms = 0;
};

using Blocks = std::vector<std::vector<int32_t>>;

// Sampled stories of the model, one seed each; end-of-generation tokens dropped.
Blocks generate_pool(Engine& e, const Model& model, int n, uint32_t seed) {
  const Tokenizer& tok = model.tokenizer();
  Blocks pool;
  for (int i = 0; i < n; ++i) {
    GenerateRequest r;
    r.prompt = {tok.bos()};
    r.max_tokens = 64;
    r.stop_at_eog = false;
    r.sampling.temperature = 1.0f;
    r.sampling.seed = seed * 1000003u + uint32_t(i);
    r.scope = CacheScope("pool");
    std::vector<int32_t> b;
    for (int32_t t : e.generate(r).tokens)
      if (!tok.is_eog(t) && t != tok.bos()) b.push_back(t);
    pool.push_back(std::move(b));
  }
  return pool;
}

int run_quality(const QualityArgs& a) {
  std::vector<PolicyArg> policies;
  for (const std::string& s : a.policies) policies.push_back(parse_policy(s));
  nlohmann::json out_models = nlohmann::json::array();
  const auto t_all = std::chrono::steady_clock::now();
  for (const std::string& path : a.models) {
    const auto t_model = std::chrono::steady_clock::now();
    auto model = Model::load(path);
    const Tokenizer& tok = model->tokenizer();
    std::printf("model: %s (%lld layers, trained context %lld)\n", path.c_str(), (long long)model->config().n_layer,
                (long long)model->config().n_ctx_train);
    EngineOptions eo;
    eo.threads = a.threads;
    eo.kv_type = a.kv_type;
    eo.kv_memory_bytes = 64 << 20;
    Engine warm(*model, eo);
    eo.prefix_cache = false;
    Engine cold(*model, eo);
    const Blocks pool = generate_pool(warm, *model, a.pool, a.seed);
    std::mt19937 rng(a.seed);
    // Settings: budget 0 is the same for every policy (nothing recomputed): measured once.
    struct Setting {
      size_t policy;
      double budget;
    };
    std::vector<Setting> settings;
    for (double b : a.budgets)
      for (size_t p = 0; p < policies.size(); ++p)
        if (b > 0 || p == 0) settings.push_back({p, b});
    std::vector<std::vector<Cell>> cells(kChanges, std::vector<Cell>(settings.size()));
    int64_t max_len = 0;
    auto block = [&](int lo, int hi) {
      const std::vector<int32_t>& b = pool[rng() % pool.size()];
      const int n = std::min<int>(int(b.size()), lo + int(rng() % uint32_t(hi - lo + 1)));
      const int start = int(rng() % uint32_t(b.size() - n + 1));
      return std::vector<int32_t>(b.begin() + start, b.begin() + start + n);
    };
    // A blank line between paragraphs; its last token ends a paragraph (what
    // server::paragraph_breaks marks in a rendered prompt).
    const std::vector<int32_t> blank_line = tok.encode_continuation("\n\n", false);
    if (blank_line.empty()) throw Error(path + ": the tokenizer gives no tokens for a blank line");
    const server::ChunkOptions chunking;
    // Paragraphs of a long part: at least chunking.min_part tokens with the blank lines,
    // so the server's rule chunks it.
    auto paragraphs = [&] {
      Blocks ps;
      size_t n = 0;
      while (ps.size() < 5 || n < size_t(chunking.min_part)) {
        ps.push_back(block(32, 64));
        n += ps.back().size() + blank_line.size();
      }
      return ps;
    };
    // parts[i] is one request block; with `breaks`, parts whose tokens carry paragraph
    // ends are split into content chunks.
    auto request = [&](const Blocks& parts, const std::string& tenant, const std::vector<uint8_t>* part_breaks = nullptr) {
      GenerateRequest r;
      r.prompt = {tok.bos()};
      std::vector<uint8_t> breaks(1, 0);
      for (size_t i = 0; i < parts.size(); ++i) {
        const auto& p = parts[i];
        r.blocks.push_back({int32_t(r.prompt.size()), int32_t(r.prompt.size() + p.size())});
        r.prompt.insert(r.prompt.end(), p.begin(), p.end());
        if (part_breaks && i == 1) breaks.insert(breaks.end(), part_breaks->begin(), part_breaks->end());
        else breaks.resize(r.prompt.size(), 0);
      }
      if (part_breaks) r.blocks = server::chunk_blocks(r.blocks, r.prompt, breaks, chunking);
      r.scope = CacheScope(tenant);
      r.max_tokens = a.continuation;
      r.stop_at_eog = false;
      r.sampling.temperature = 0;
      return r;
    };
    const int total = a.prompts * kChanges;
    Progress progress(path, total);
    double cold_ms = 0;  // the exact cold runs (prompt and continuation)
    for (int i = 0; i < a.prompts; ++i) {
      for (int c = 0; c < kChanges; ++c) {
        const std::vector<int32_t> sys = block(24, 48), b1 = block(24, 64), b2 = block(24, 64), b3 = block(24, 64),
                                   b4 = block(24, 64), tail = block(12, 20), extra = block(24, 64);
        Blocks first, second;
        std::vector<uint8_t> first_breaks, second_breaks;  // kParagraph: of the long part
        // The paragraphs joined with blank lines, in the order given.
        auto joined = [&](const Blocks& ps, std::vector<uint8_t>& breaks) {
          std::vector<int32_t> part;
          for (size_t k = 0; k < ps.size(); ++k) {
            if (k > 0) {
              part.insert(part.end(), blank_line.begin(), blank_line.end());
              breaks.resize(part.size(), 0);
              breaks.back() = server::kParagraphEnd;
            }
            part.insert(part.end(), ps[k].begin(), ps[k].end());
          }
          breaks.resize(part.size(), 0);
          return part;
        };
        switch (c) {
          case kReordered: first = {sys, b1, b2, b3, b4, tail}, second = {sys, b2, b3, b1, b4, tail}; break;
          case kReplaced: first = {sys, b1, b2, b3, b4, tail}, second = {sys, extra, b2, b3, b4, tail}; break;
          case kInserted: first = {sys, b1, b2, b3, b4, tail}, second = {sys, b1, extra, b2, b3, b4, tail}; break;
          case kDropped: first = {sys, b1, extra, b2, b3, tail}, second = {sys, b1, b2, b3, tail}; break;
          case kParagraph: {
            Blocks ps = paragraphs();
            first = {sys, joined(ps, first_breaks), tail};
            std::rotate(ps.begin(), ps.begin() + 1, ps.begin() + 3);  // p1 after p3
            second = {sys, joined(ps, second_breaks), tail};
            break;
          }
        }
        const bool chunked = c == kParagraph;
        const std::string tenant = "q" + std::to_string(i) + "." + std::to_string(c);
        GenerateRequest req1 = request(first, tenant, chunked ? &first_breaks : nullptr);
        req1.max_tokens = 0;
        request_logits(warm, req1);
        GenerateRequest req2 = request(second, tenant, chunked ? &second_breaks : nullptr);
        max_len = std::max<int64_t>(max_len, int64_t(req2.prompt.size()) + a.continuation);
        GenerateResult full_r;
        const auto t_cold = std::chrono::steady_clock::now();
        const std::vector<float> full = request_logits(cold, req2, &full_r, /*generate=*/true);
        cold_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_cold).count();
        for (size_t k = 0; k < settings.size(); ++k) {
          GenerateRequest r = req2;
          r.reuse.mode = CacheReuse::kApproximate;
          r.reuse.policy = policies[settings[k].policy].policy;
          r.reuse.run = policies[settings[k].policy].run;
          r.reuse.budget = settings[k].budget;
          r.reuse.continue_approximate = false;  // one step from exact KV, not the previous setting's
          GenerateResult got;
          const auto t0 = std::chrono::steady_clock::now();
          const std::vector<float> l = request_logits(warm, r, &got, /*generate=*/true);
          Cell& cell = cells[size_t(c)][k];
          cell.ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
          const double kl = kl_divergence(full, l);
          ++cell.n;
          cell.top1 += argmax(full) == argmax(l);
          cell.same_text += got.tokens == full_r.tokens;
          cell.kl_sum += kl;
          cell.kl_max = std::max(cell.kl_max, kl);
          cell.reused += got.n_approximate;
          cell.recomputed += got.n_recomputed;
          cell.checked += got.n_checked;
          cell.prompt_tokens += got.n_prompt;
        }
        progress.step("prompts");
      }
    }
    progress.done();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_model).count();
    std::printf("%d prompts per change (%d in all), longest prompt + continuation %lld tokens, %.1f s\n\n",
                a.prompts, total, (long long)max_len, secs);
    std::printf("%-10s %-12s %6s %7s %10s %10s %8s %8s %8s %8s\n", "change", "policy", "budget", "top-1",
                "mean KL", "max KL", "same-16", "reused", "recomp", "checked");
    nlohmann::json rows = nlohmann::json::array();
    for (int c = 0; c < kChanges; ++c) {
      for (size_t k = 0; k < settings.size(); ++k) {
        const Cell& x = cells[size_t(c)][k];
        const std::string pname = settings[k].budget == 0 ? "(any)" : policies[settings[k].policy].name;
        const double n = double(std::max<int64_t>(x.n, 1));
        std::printf("%-10s %-12s %6.2f %6.1f%% %10.5f %10.4f %7.1f%% %8.1f %8.1f %8.1f\n", change_name(c), pname.c_str(),
                    settings[k].budget, 100.0 * x.top1 / n, x.kl_sum / n, x.kl_max, 100.0 * x.same_text / n,
                    x.reused / n, x.recomputed / n, x.checked / n);
        rows.push_back({{"change", change_name(c)}, {"policy", pname}, {"budget", settings[k].budget},
                        {"prompts", x.n}, {"top1_agreement", x.top1 / n}, {"mean_kl", x.kl_sum / n},
                        {"max_kl", x.kl_max}, {"same_continuation", x.same_text / n},
                        {"mean_reused_tokens", x.reused / n}, {"mean_recomputed_tokens", x.recomputed / n},
                        {"mean_checked_tokens", x.checked / n}, {"mean_prompt_tokens", x.prompt_tokens / n},
                        {"mean_ms", x.ms / n}});
      }
      std::printf("\n");
    }
    // Over all changes, per setting.
    std::printf("%-10s %-12s %6s %7s %10s %10s %8s %8s\n", "all", "policy", "budget", "top-1", "mean KL", "max KL",
                "same-16", "ms/req");
    for (size_t k = 0; k < settings.size(); ++k) {
      Cell t;
      for (int c = 0; c < kChanges; ++c) {
        const Cell& x = cells[size_t(c)][k];
        t.n += x.n, t.top1 += x.top1, t.same_text += x.same_text, t.kl_sum += x.kl_sum, t.ms += x.ms;
        t.kl_max = std::max(t.kl_max, x.kl_max);
      }
      const double n = double(std::max<int64_t>(t.n, 1));
      const std::string pname = settings[k].budget == 0 ? "(any)" : policies[settings[k].policy].name;
      std::printf("%-10s %-12s %6.2f %6.1f%% %10.5f %10.4f %7.1f%% %8.2f\n", "all", pname.c_str(), settings[k].budget,
                  100.0 * t.top1 / n, t.kl_sum / n, t.kl_max, 100.0 * t.same_text / n, t.ms / n);
      rows.push_back({{"change", "all"}, {"policy", pname}, {"budget", settings[k].budget}, {"prompts", t.n},
                      {"top1_agreement", t.top1 / n}, {"mean_kl", t.kl_sum / n}, {"max_kl", t.kl_max},
                      {"same_continuation", t.same_text / n}, {"mean_ms", t.ms / n}});
    }
    std::printf("full recomputation (the exact cold run): %.2f ms/req\n\n", cold_ms / total);
    std::fflush(stdout);
    out_models.push_back({{"model", path}, {"n_layer", model->config().n_layer}, {"prompts_per_change", a.prompts},
                          {"full_recomputation_ms", cold_ms / total},
                          {"seconds", secs}, {"max_tokens_with_continuation", max_len}, {"results", rows}});
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_all).count();
  std::printf("total %.1f s (%d thread%s)\n", secs, a.threads, a.threads == 1 ? "" : "s");
  if (!a.json_out.empty()) {
    nlohmann::json j = {{"bench", "quality"}, {"threads", a.threads}, {"seed", a.seed}, {"continuation", a.continuation},
                        {"seconds", secs}, {"models", out_models}};
    std::ofstream(a.json_out) << j.dump(2) << "\n";
  }
  return 0;
}

}  // namespace

Run add_bench_quality(CLI::App& bench) {
  auto a = std::make_shared<QualityArgs>();
  CLI::App* q = bench.add_subcommand(
      "quality",
      "Approximate reuse vs full recomputation: top-1 agreement, KL and identical greedy continuations per "
      "kind of change (block re-ordered, replaced, inserted, earlier reasoning dropped, a paragraph moved inside a "
      "long part), recompute policy "
      "and budget, on prompts built from text the model generates");
  q->add_option("-m,--model", a->models, "GGUF model files (one or more; trained models: the text is theirs)")
      ->required()->check(CLI::ExistingFile);
  q->add_option("--prompts", a->prompts, "Prompts per kind of change")->capture_default_str()->check(CLI::Range(1, 100000));
  q->add_option("--budgets", a->budgets, "Recompute budgets (0-1; space- or comma-separated)")
      ->capture_default_str()->delimiter(',')->check(CLI::Range(0.0, 1.0));
  q->add_option("--policies", a->policies,
                "Recompute policies: prefix, deviation, impact; deviation:N or impact:N select windows of N tokens")
      ->capture_default_str()->delimiter(',');
  q->add_option("--continuation", a->continuation, "Greedy tokens compared after the prompt")
      ->capture_default_str()->check(CLI::Range(0, 4096));
  q->add_option("--pool", a->pool, "Generated blocks the prompts draw from")->capture_default_str()->check(CLI::Range(8, 100000));
  add_kv_type_option(*q, &a->kv_type);
  q->add_option("-t,--threads", a->threads, "CPU threads (the models are tiny: 1 is fastest)")
      ->capture_default_str()->check(CLI::Range(1, 256));
  q->add_option("--seed", a->seed, "Seed of the generated blocks and the arrangements")->capture_default_str();
  q->add_option("--json", a->json_out, kBenchJsonHelp);
  return [a] { return run_quality(*a); };
}

}  // namespace pc::cli
