// `promptcache bench prefill`: prompt and decode throughput of a model.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>

#include "cli/commands.h"
#include "cli/kv_type_flag.h"
#include "cli/progress.h"
#include "cli/repack_flag.h"
#include "cli/units.h"
#include "engine/engine.h"
#include "common/error.h"
#include "gguf/gguf.h"
#include "kernels/cpu.h"
#include "kernels/cpu_count.h"
#include "kernels/int8_peak.h"
#include "kernels/layout_choice.h"
#include "kernels/paged_attention.h"
#include "kernels/read_bandwidth.h"
#include "kernels/thread_pool.h"
#include "kv/kv_storage.h"
#include "model/model.h"
#include "model/recurrent_state.h"

namespace pc::cli {

namespace {

struct PrefillArgs {
  std::string model;
  std::vector<int> lengths{512, 2048};
  int cached = 0;  // tokens of a cached prefix every prompt follows (a turn in a long conversation)
  int decode = 32;
  int threads = default_thread_count();
  int repeat = 1;
  int batch_tokens = EngineOptions{}.max_batch_tokens;
  bool mmap = false;
  Model::WeightLayout weights = Model::WeightLayout::kFastest;
  bool bandwidth = true;
  bool int8_peak = true;
  std::vector<std::string> kernels{"auto"};
  std::vector<float> temperatures{0.f};  // decode sampling; 0 = greedy
  std::vector<KvType> kv_types{KvType::kF16};
  std::vector<std::string> attn_prefetch{"on"};  // decode attention's prefetch (set_attn_prefetch)
  uint64_t seed = 1;
  std::string json_out;
  std::vector<std::string> compare;  // models measured side by side with `model`
};

// One measured configuration: kernels × decode temperature.
struct PrefillRun {
  CpuLevel level;
  float temperature;
  size_t model = 0;  // index into the models measured (--compare)
  size_t kv = 0;     // index in PrefillArgs::kv_types
  size_t pf = 0;     // index in PrefillArgs::attn_prefetch
};

// --kernels names -> levels ("auto": the best this CPU runs). Throws on a name
// that is not a level or a level this CPU cannot run (before the model loads).
std::vector<CpuLevel> kernel_levels(const std::vector<std::string>& names) {
  std::vector<CpuLevel> levels;
  for (const std::string& name : names) {
    CpuLevel l = default_cpu_level();
    if (name != "auto" && !cpu_level_from_name(name, &l))
      throw Error("--kernels: unknown kernels '" + name + "' (auto, avx512, avxvnni, avx2 or scalar)");
    if (l > detect_cpu_level())
      throw Error("--kernels: this CPU cannot run " + name + " (best: " + cpu_level_name(detect_cpu_level()) + ")");
    if (l == CpuLevel::AvxVnni && !cpu_has_avx_vnni())
      throw Error("--kernels: this CPU cannot run avxvnni (no AVX-VNNI instructions)");
    levels.push_back(l);
  }
  return levels;
}

// Bytes of weights one decode token reads: every tensor but token_embd, of
// which one row is read (unless output is tied to it); of a MoE layer's expert
// tensors (`*_exps`) only the n_used of n_expert a token selects.
int64_t decode_weight_bytes(const std::string& path, const ModelConfig& c) {
  const auto f = GgufFile::open(path);
  int64_t total = 0;
  for (const GgufTensorInfo& t : f->tensors()) {
    if (t.name == "token_embd.weight" && f->tensor("output.weight")) continue;
    const bool experts = t.name.find("_exps.") != std::string::npos && c.moe.n_expert > 0;
    total += experts ? int64_t(t.nbytes) / c.moe.n_expert * c.moe.n_used : int64_t(t.nbytes);
  }
  return total;
}

// int8 multiply-adds a prompt token costs in the quantized matmuls of the blocks
// (one per weight: the activations are quantized to int8, kernels/matmul.h); a MoE
// layer counts its selected experts. The embedding lookup and the output head (run
// for the prompt's last token only) are not per prompt token; float weights go
// through float kernels and are not counted.
int64_t prompt_int8_macs(const std::string& path, const ModelConfig& c) {
  const auto f = GgufFile::open(path);
  int64_t total = 0;
  for (const GgufTensorInfo& t : f->tensors()) {
    if (t.ne.size() < 2 || t.name == "token_embd.weight" || t.name == "output.weight") continue;
    if (t.type == GgmlType::F32 || t.type == GgmlType::F16 || t.type == GgmlType::BF16) continue;
    const bool experts = t.name.find("_exps.") != std::string::npos && c.moe.n_expert > 0;
    total += experts ? t.n_elements() / c.moe.n_expert * c.moe.n_used : t.n_elements();
  }
  return total;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}

// One model under measurement, with its own engine.
struct PrefillModel {
  std::string path;
  std::unique_ptr<Model> model;
  std::vector<std::unique_ptr<Engine>> engines;  // one per KV type measured
  double load_seconds = 0;  // Model::load: reading the file and repacking the weights
  std::vector<int32_t> prefix;  // --cached: the prefix every prompt follows
};

int run_prefill(const PrefillArgs& a) {
  const std::vector<CpuLevel> levels = kernel_levels(a.kernels);
  int max_len = 0;
  for (int n : a.lengths) max_len = std::max(max_len, n);
  std::vector<PrefillModel> models;
  std::vector<std::string> paths{a.model};
  paths.insert(paths.end(), a.compare.begin(), a.compare.end());
  // Weights repacked for the kernels measured as --repack says
  // (Model::WeightLayout); as stored when several levels are compared, so no
  // level reads another's layout.
  const bool one_level = std::all_of(levels.begin(), levels.end(), [&](CpuLevel l) { return l == levels[0]; });
  const Model::WeightLayout layout = one_level ? a.weights : Model::WeightLayout::kAsStored;
  for (const std::string& path : paths) {
    PrefillModel pm;
    pm.path = path;
    if (one_level) set_cpu_level(levels[0]);
    const auto load_start = std::chrono::steady_clock::now();
    pm.model = Model::load(path, a.mmap ? Residency::kMap : Residency::kMemory, 0,
                           layout);
    pm.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
    set_cpu_level(default_cpu_level());
    const ModelConfig& c = pm.model->config();
    // An engine per KV type, each with room for the longest run (its own bytes per token).
    for (KvType t : a.kv_types) {
      EngineOptions eo;
      eo.threads = a.threads;
      eo.max_batch_tokens = a.batch_tokens;
      eo.kv_type = t;
      KvShape shape{int(c.n_layer), int(c.n_kv_head), int(c.head_dim), eo.page_size, t};
      // (with --cached: the prefix, and room for two runs after it, so that making
      // room for a run evicts the previous run's tokens, never the prefix all share)
      eo.kv_memory_bytes = int64_t(shape.bytes_per_token()) * (a.cached + (a.cached > 0 ? 2 : 1) * (max_len + a.decode + 64));
      if (c.n_recurrent > 0) eo.kv_memory_bytes += 4 * RecurrentState(c).bytes();  // the prompt's snapshots
      pm.engines.push_back(std::make_unique<Engine>(*pm.model, eo));
    }
    models.push_back(std::move(pm));
  }
  const bool compare = models.size() > 1;
  std::mt19937 rng(42);
  // --cached: each model's prefix, computed once in each of its engines (with the
  // first kernels measured), untimed; every run's prompt is the prefix and its
  // own random tokens, so only those are computed (the cache serves the prefix).
  if (a.cached > 0) {
    std::mt19937 prefix_rng(7);
    for (PrefillModel& pm : models) {
      std::uniform_int_distribution<int32_t> pick(3, int32_t(pm.model->config().n_vocab) - 1);
      for (int i = 0; i < a.cached; ++i) pm.prefix.push_back(pick(prefix_rng));
      set_cpu_level(levels[0]);
      for (auto& engine : pm.engines) {
        Progress warm("the cached prefix", 1);
        warm.set(0, std::to_string(a.cached) + " tokens");
        GenerateRequest req;
        req.prompt = pm.prefix;
        req.max_tokens = 0;
        const GenerateResult r = engine->generate(req);
        warm.done();
        if (!r.error.empty()) throw Error("--cached: computing the prefix failed: " + r.error);
      }
      set_cpu_level(default_cpu_level());
    }
  }

  std::vector<PrefillRun> runs;
  for (size_t mi = 0; mi < models.size(); ++mi)
    for (CpuLevel l : levels)
      for (float t : a.temperatures)
        for (size_t f = 0; f < a.attn_prefetch.size(); ++f)
          for (size_t k = 0; k < a.kv_types.size(); ++k) runs.push_back({l, t, mi, k, f});
  const bool several = levels.size() * a.temperatures.size() * a.kv_types.size() * a.attn_prefetch.size() > 1;
  const bool several_pf = a.attn_prefetch.size() > 1;
  std::string names, temps;
  for (CpuLevel l : levels) names += (names.empty() ? "" : ", ") + cpu_level_name(l);
  for (float t : a.temperatures) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", double(t));
    temps += (temps.empty() ? "" : ", ") + std::string(buf);
  }
  std::string kv_names;
  for (KvType t : a.kv_types) kv_names += (kv_names.empty() ? "" : ", ") + std::string(kv_type_name(t));
  for (size_t mi = 0; mi < models.size(); ++mi)
    std::printf("%s%s: %s (loaded in %.0f ms)\n%s\nweights: %s\n", compare ? "model " : "model",
                compare ? std::to_string(mi).c_str() : "", models[mi].path.c_str(), 1e3 * models[mi].load_seconds,
                models[mi].model->config().describe().c_str(), models[mi].model->weight_layouts().c_str());
  std::printf("threads %d, kernels %s, repack %s, decode temperature %s (seed %llu), KV %s%s\n", a.threads,
              names.c_str(), Model::weight_layout_name(layout), temps.c_str(), (unsigned long long)a.seed,
              kv_names.c_str(),
              several || compare ? " (runs interleaved, side by side)" : "");
  if (a.cached > 0)
    std::printf("every prompt follows a cached prefix of %d tokens (computed once, untimed): the tokens, prompt "
                "tok/s and TTFT are those of the new tokens\n",
                a.cached);
  std::printf("\n");
  for (const PrefillModel& pm : models) {
    const ModelConfig& c = pm.model->config();
    if (c.n_ctx_train > 0 && a.cached + max_len + a.decode > c.n_ctx_train)
      std::fprintf(stderr,
                   "warning: %d cached + %d prompt + %d decode tokens exceed the model's training context (%lld): "
                   "the speed is measured, the text would not be meaningful\n",
                   a.cached, max_len, a.decode, (long long)c.n_ctx_train);
  }
  std::printf("%8s  %14s  %10s  %14s%s%s\n", "tokens", "prompt tok/s", "TTFT ms", "decode tok/s",
              compare ? "  model" : "", several ? (several_pf ? "  kernels  temperature  kv  prefetch" : "  kernels  temperature  kv") : "");
  nlohmann::json rows = nlohmann::json::array();
  std::vector<double> best_decode(models.size(), 0);
  struct PromptRate {  // a printed row's prompt rate, for the int8 peak share below
    int tokens;
    size_t model;
    CpuLevel level;
    double tok_per_s;
    size_t row;
  };
  std::vector<PromptRate> prompt_rates;
  Progress progress("prefill", int64_t(a.lengths.size()) * a.repeat * int64_t(runs.size()));
  for (int n : a.lengths) {
    const size_t nl = runs.size();
    std::vector<double> best_pp(nl, 0), best_tg(nl, 0), best_ttft(nl, 1e30);
    std::vector<std::vector<double>> all_pp(nl), all_tg(nl), all_ttft(nl);
    std::vector<int64_t> least_cached(nl, int64_t(1) << 62);  // the prompt tokens the cache served, fewest of a run
    for (int rep = 0; rep < a.repeat; ++rep) {
      for (size_t li = 0; li < nl; ++li) {
        set_cpu_level(runs[li].level);
        set_attn_prefetch(a.attn_prefetch[runs[li].pf] == "on");
        const ModelConfig& c = models[runs[li].model].model->config();
        std::uniform_int_distribution<int32_t> pick(3, int32_t(c.n_vocab) - 1);
        GenerateRequest req;
        req.prompt = models[runs[li].model].prefix;
        for (int i = 0; i < n; ++i) req.prompt.push_back(pick(rng));
        req.max_tokens = a.decode;
        req.stop_at_eog = false;
        req.sampling.temperature = runs[li].temperature;
        req.sampling.seed = a.seed;
        GenerateResult r = models[runs[li].model].engines[runs[li].kv]->generate(req);
        const double pp = n / (r.prompt_ms / 1000);
        const double tg = r.tokens.size() > 1 ? (r.tokens.size() - 1) / (r.decode_ms / 1000) : 0;
        best_pp[li] = std::max(best_pp[li], pp);
        best_tg[li] = std::max(best_tg[li], tg);
        best_ttft[li] = std::min(best_ttft[li], r.ttft_ms);
        all_pp[li].push_back(pp);
        all_tg[li].push_back(tg);
        all_ttft[li].push_back(r.ttft_ms);
        least_cached[li] = std::min(least_cached[li], r.n_cached);
        progress.step("runs (" + std::to_string(n) + " tokens, " + cpu_level_name(runs[li].level) + ")");
      }
    }
    progress.clear();
    for (size_t li = 0; li < nl; ++li) {
      char mname[16] = "", kname[64] = "";
      if (compare) std::snprintf(mname, sizeof mname, "  %5zu", runs[li].model);
      if (several)
        std::snprintf(kname, sizeof kname, "  %-7s  %-11g  %-4s%s%s", cpu_level_name(runs[li].level).c_str(),
                      double(runs[li].temperature), kv_type_name(a.kv_types[runs[li].kv]), several_pf ? "  " : "",
                      several_pf ? a.attn_prefetch[runs[li].pf].c_str() : "");
      if (a.decode > 0) {
        std::printf("%8d  %14.1f  %10.1f  %14.1f%s%s\n", n, best_pp[li], best_ttft[li], best_tg[li], mname, kname);
      } else {  // (no token generated: no TTFT, no decode rate)
        std::printf("%8d  %14.1f  %10s  %14s%s%s\n", n, best_pp[li], "-", "-", mname, kname);
      }
      // The table has each row's best run (the machine's least disturbed);
      // with --repeat, the medians under it.
      if (a.repeat > 1) {
        if (a.decode > 0)
          std::printf("%8s  medians of %d: prompt %.1f tok/s (TTFT %.1f ms), decode %.1f tok/s\n", "", a.repeat,
                      median(all_pp[li]), median(all_ttft[li]), median(all_tg[li]));
        else
          std::printf("%8s  medians of %d: prompt %.1f tok/s\n", "", a.repeat, median(all_pp[li]));
      }
      best_decode[runs[li].model] = std::max(best_decode[runs[li].model], best_tg[li]);
      nlohmann::json row = {{"prompt_tokens", n}, {"kernels", cpu_level_name(runs[li].level)},
                            {"kv_type", kv_type_name(a.kv_types[runs[li].kv])},
                            {"attn_prefetch", a.attn_prefetch[runs[li].pf] == "on"},
                            {"temperature", runs[li].temperature}, {"prompt_tokens_per_s", best_pp[li]},
                            {"prompt_tokens_per_s_median", median(all_pp[li])},
                            {"ttft_ms", a.decode > 0 ? nlohmann::json(best_ttft[li]) : nlohmann::json(nullptr)},
                            {"ttft_ms_median", a.decode > 0 ? nlohmann::json(median(all_ttft[li])) : nlohmann::json(nullptr)},
                            {"decode_tokens_per_s", a.decode > 0 ? nlohmann::json(best_tg[li]) : nlohmann::json(nullptr)},
                            {"decode_tokens_per_s_median",
                             a.decode > 0 ? nlohmann::json(median(all_tg[li])) : nlohmann::json(nullptr)},
                            {"decode_tokens_per_s_runs", a.decode > 0 ? nlohmann::json(all_tg[li]) : nlohmann::json(nullptr)}};
      if (compare) row["model"] = runs[li].model;
      if (a.cached > 0) {
        row["cached_tokens"] = least_cached[li];
        if (least_cached[li] < a.cached)
          std::fprintf(stderr, "warning: a run reused %lld of the %d cached tokens (the rest were computed and timed)\n",
                       (long long)least_cached[li], a.cached);
      }
      prompt_rates.push_back({n, runs[li].model, runs[li].level, best_pp[li], rows.size()});
      rows.push_back(row);
    }
    // Side by side: each model's medians against the first's (same kernels and temperature).
    if (compare) {
      for (size_t li = 0; li < nl; ++li) {
        if (runs[li].model == 0) continue;
        const size_t base = li % (nl / models.size());
        const double m0 = median(all_tg[base]), m1 = median(all_tg[li]);
        const double p0 = median(all_pp[base]), p1 = median(all_pp[li]);
        if (a.decode > 0)
          std::printf("%8d  medians of %d: decode %.1f (model 0) vs %.1f (model %zu) tok/s: model %zu / model 0 = "
                      "%.2fx; prompt %.2fx\n",
                      n, a.repeat, m0, m1, runs[li].model, runs[li].model, m0 > 0 ? m1 / m0 : 0.0,
                      p0 > 0 ? p1 / p0 : 0.0);
        else
          std::printf("%8d  medians of %d: prompt %.1f (model 0) vs %.1f (model %zu) tok/s: %.2fx\n", n, a.repeat, p0,
                      p1, runs[li].model, p0 > 0 ? p1 / p0 : 0.0);
      }
    }
    // Several KV types: each type's medians against the first type's (same model,
    // kernels and temperature; kv is the runs' innermost index).
    if (a.kv_types.size() > 1) {
      for (size_t li = 0; li < nl; ++li) {
        if (runs[li].kv == 0) continue;
        const size_t base = li - runs[li].kv;
        const char* t0 = kv_type_name(a.kv_types[0]);
        const char* t1 = kv_type_name(a.kv_types[runs[li].kv]);
        const double m0 = median(all_tg[base]), m1 = median(all_tg[li]);
        const double p0 = median(all_pp[base]), p1 = median(all_pp[li]);
        if (a.decode > 0)
          std::printf("%8d  medians of %d: decode %.1f (%s) vs %.1f (%s) tok/s: %s / %s = %.2fx; prompt %.2fx\n", n,
                      a.repeat, m0, t0, m1, t1, t1, t0, m0 > 0 ? m1 / m0 : 0.0, p0 > 0 ? p1 / p0 : 0.0);
        else
          std::printf("%8d  medians of %d: prompt %.1f (%s) vs %.1f (%s) tok/s: %.2fx\n", n, a.repeat, p0, t0, p1, t1,
                      p0 > 0 ? p1 / p0 : 0.0);
      }
    }
    // Prefetch on and off: each setting's medians against the first's (same
    // model, kernels, temperature and KV type).
    if (several_pf) {
      for (size_t li = 0; li < nl; ++li) {
        if (runs[li].pf == 0) continue;
        const size_t base = li - runs[li].pf * a.kv_types.size();
        const double m0 = median(all_tg[base]), m1 = median(all_tg[li]);
        const double p0 = median(all_pp[base]), p1 = median(all_pp[li]);
        const char* f0 = a.attn_prefetch[0].c_str();
        const char* f1 = a.attn_prefetch[runs[li].pf].c_str();
        if (a.decode > 0)
          std::printf("%8d  medians of %d: decode %.1f (prefetch %s) vs %.1f (prefetch %s) tok/s: %s / %s = %.2fx; "
                      "prompt %.2fx\n",
                      n, a.repeat, m0, f0, m1, f1, f1, f0, m0 > 0 ? m1 / m0 : 0.0, p0 > 0 ? p1 / p0 : 0.0);
      }
    }
    std::fflush(stdout);
  }
  progress.done();
  set_cpu_level(default_cpu_level());
  set_attn_prefetch(true);
  // Decode reads every weight once a token (a MoE layer: its selected experts'):
  // its bytes times the decode rate against the machine's read bandwidth on the
  // same threads.
  nlohmann::json bw = nullptr;
  if (a.bandwidth && a.decode > 0) {
    ThreadPool pool(a.threads);
    const ReadBandwidth rb = measure_read_bandwidth(pool);
    nlohmann::json per = nlohmann::json::array();
    for (size_t mi = 0; mi < models.size(); ++mi) {
      const int64_t weight_bytes = decode_weight_bytes(models[mi].path, models[mi].model->config());
      const double streamed = double(weight_bytes) * best_decode[mi] * 1e-9;
      std::printf("\n%sdecode reads %.1f MB of weights a token: %.2f GB/s at %.1f tok/s; read bandwidth %.2f GB/s "
                  "(%d threads, %.0f MiB buffer, best of %d): %.0f %%\n",
                  compare ? ("model " + std::to_string(mi) + ": ").c_str() : "", weight_bytes * 1e-6, streamed,
                  best_decode[mi], rb.gb_per_s, a.threads, rb.bytes / 1048576.0, rb.passes,
                  rb.gb_per_s > 0 ? 100 * streamed / rb.gb_per_s : 0.0);
      per.push_back({{"weight_bytes_per_token", weight_bytes}, {"decode_gb_per_s", streamed},
                     {"read_bandwidth_gb_per_s", rb.gb_per_s}});
    }
    bw = compare ? per : per[0];
  }
  // A prompt's quantized matmuls do one int8 multiply-add per weight and token:
  // weights × prompt tokens/s against the machine's peak rate of them, measured
  // with the instruction the level's kernels use, on the same threads. Attention
  // and the rest of a prompt step (float) are in the tokens/s too, so the share
  // is a lower bound of what the matmuls reach.
  nlohmann::json peaks = nullptr;
  if (a.int8_peak) {
    std::vector<int64_t> macs(models.size());
    for (size_t mi = 0; mi < models.size(); ++mi) macs[mi] = prompt_int8_macs(models[mi].path, models[mi].model->config());
    ThreadPool pool(a.threads);
    peaks = nlohmann::json::object();
    for (CpuLevel l : levels) {
      if (l == CpuLevel::Scalar || peaks.contains(cpu_level_name(l))) continue;
      const Int8Peak pk = measure_int8_peak(pool, l);
      peaks[cpu_level_name(l)] = {{"gmacs", pk.gmacs}, {"instruction", pk.instruction}};
      std::printf("\nint8 peak (%s kernels): %.0f G multiply-adds/s (%s, %d threads, best of %d)\n",
                  cpu_level_name(l).c_str(), pk.gmacs, pk.instruction, pk.threads, pk.passes);
      for (const PromptRate& pr : prompt_rates) {
        if (pr.level != l || macs[pr.model] == 0) continue;
        const double g = double(macs[pr.model]) * pr.tok_per_s * 1e-9;
        std::printf("  %s%d tokens: %.1f tok/s x %.1f M int8 weights = %.1f G multiply-adds/s: %.1f %% of the peak\n",
                    compare ? ("model " + std::to_string(pr.model) + ", ").c_str() : "", pr.tokens, pr.tok_per_s,
                    macs[pr.model] * 1e-6, g, pk.gmacs > 0 ? 100 * g / pk.gmacs : 0.0);
        rows[pr.row]["int8_gmacs"] = g;
        rows[pr.row]["int8_peak_share"] = pk.gmacs > 0 ? g / pk.gmacs : 0.0;
      }
    }
  }
  if (!a.json_out.empty()) {
    nlohmann::json kernels = nlohmann::json::array();
    for (CpuLevel l : levels) kernels.push_back(cpu_level_name(l));
    nlohmann::json j = {{"bench", "prefill"}, {"model", a.model}, {"threads", a.threads}, {"kernels", kernels},
                        {"cached", a.cached},
                        {"repack", Model::weight_layout_name(layout)}, {"temperatures", a.temperatures},
                        {"seed", a.seed}, {"results", rows},
                        {"bandwidth", bw}, {"int8_peak", peaks}};
    if (compare) j["models"] = paths;
    nlohmann::json load = nlohmann::json::array(), weights = nlohmann::json::array();  // one a model, in order
    for (const PrefillModel& pm : models) {
      load.push_back(1e3 * pm.load_seconds);
      weights.push_back(pm.model->weight_layouts());
    }
    j["load_ms"] = load;
    j["weights"] = weights;
    nlohmann::json timings = nlohmann::json::array();  // --repack auto's measurements (layout_choice.h)
    for (const LayoutTiming& t : measured_layouts())
      timings.push_back({{"stored", ggml_type_name(t.stored)}, {"repacked", ggml_type_name(t.x16)},
                         {"stored_gb_per_s", t.stored_gb_per_s}, {"repacked_gb_per_s", t.x16_gb_per_s},
                         {"repacked_over_stored", t.x16_over_stored},
                         {"stored_prompt_gmacs", t.stored_prompt_gmacs},
                         {"repacked_prompt_gmacs", t.x16_prompt_gmacs},
                         {"repacked_prompt_over_stored", t.x16_prompt_over_stored},
                         {"request_speedup", t.x16_request_speedup},
                         {"bytes", t.bytes}, {"prompt_bytes", t.prompt_bytes}, {"ms", 1e3 * t.seconds}});
    j["layout_timings"] = timings;
    std::ofstream(a.json_out) << j.dump(2) << "\n";
  }
  return 0;
}

}  // namespace

Run add_bench(CLI::App& app) {
  app.require_subcommand(1);
  auto a = std::make_shared<PrefillArgs>();
  CLI::App* p = app.add_subcommand("prefill", "Prompt (prefill) and decode tokens/s");
  p->add_option("-m,--model", a->model, "GGUF model file")->required()->check(CLI::ExistingFile);
  p->add_flag("--mmap", a->mmap, kMmapHelp);
  add_repack_options(*p, &a->weights);
  p->add_flag("!--no-bandwidth", a->bandwidth,
              "Skip measuring the memory read bandwidth (otherwise measured after the runs, on the same threads, "
              "and set against the weights decode streams a second)");
  p->add_flag("!--no-int8-peak", a->int8_peak,
              "Skip measuring the machine's int8 multiply-add peak (otherwise measured after the runs with the "
              "instruction of the kernels in use, and set against the prompt's quantized matmuls: weights x "
              "prompt tokens/s)");
  p->add_option("--tokens", a->lengths, "Prompt lengths (space- or comma-separated)")
      ->capture_default_str()->delimiter(',')->check(CLI::Range(1, 1 << 20));
  p->add_option("--cached", a->cached,
                "Tokens of a cached prefix every prompt follows, as in a turn of a long conversation: computed "
                "once (untimed, with the first --kernels), then each run computes only its --tokens after it, "
                "whose rate and TTFT are reported (0 = none)")
      ->capture_default_str()->check(CLI::Range(0, 1 << 20));
  p->add_option("--decode", a->decode, "Tokens to decode after each prompt")
      ->capture_default_str()->check(CLI::Range(0, 1 << 20));
  p->add_option("-t,--threads", a->threads, kThreadsHelp)->capture_default_str()->check(CLI::Range(1, 256));
  p->add_option("--compare", a->compare,
                "Other GGUF models measured side by side with --model: every run alternates between the models "
                "(each with its own engine), and each length prints the medians of --repeat and their ratio "
                "to --model's (space- or comma-separated)")
      ->delimiter(',')->check(CLI::ExistingFile);
  p->add_option("--repeat", a->repeat,
                 "Runs per length (the table has the best of them, a line under each row their medians; with "
                 "--compare, --kv-type or --attn-prefetch also the medians' ratios)")
      ->capture_default_str()->check(CLI::Range(1, 1000));
  p->add_option("--batch-tokens", a->batch_tokens, "Tokens per forward step (a longer prompt runs in chunks of this many)")
      ->capture_default_str()->check(CLI::Range(1, 1 << 20));
  p->add_option("--kernels", a->kernels,
                 "CPU code paths to measure, interleaved in one process for side-by-side ratios "
                 "(auto = the best this CPU runs, capped by PROMPTCACHE_KERNELS; avx512, avxvnni (AVX2 with "
                 "AVX-VNNI), avx2, scalar; "
                 "space- or comma-separated)")
      ->capture_default_str()->delimiter(',');
  p->add_option("--temperature", a->temperatures,
                 "Decode sampling temperatures to measure, interleaved like --kernels (0 = greedy; "
                 "others sample the whole vocabulary: top-k, top-p and min-p off)")
      ->capture_default_str()->delimiter(',')->check(CLI::Range(0.0, 100.0));
  p->add_option("--seed", a->seed, "Sampling seed of the decode at temperature > 0")->capture_default_str();
  add_kv_types_option(*p, &a->kv_types);
  p->add_option("--attn-prefetch", a->attn_prefetch,
                "Whether decode attention prefetches the KV ahead of its arithmetic (on, the default, or off; "
                "the results are the same bit for bit): both (on off) measure them interleaved like --kernels, "
                "with their ratio (space- or comma-separated)")
      ->capture_default_str()->delimiter(',')->check(CLI::IsMember({"on", "off"}));
  p->add_option("--json", a->json_out, kBenchJsonHelp);
  Run conversation = add_bench_conversation(app);
  Run modules = add_bench_modules(app);
  Run serve = add_bench_serve(app);
  Run tiers = add_bench_tiers(app);
  Run agent = add_bench_agent(app);
  Run quality = add_bench_quality(app);
  Run kv_quality = add_bench_kv_quality(app);
  Run cluster = add_bench_cluster(app);
  Run grammar = add_bench_grammar(app);
  Run hybrid = add_bench_hybrid(app);
  CLI::App* conv = app.get_subcommand("conversation");
  CLI::App* srv = app.get_subcommand("serve");
  CLI::App* tie = app.get_subcommand("tiers");
  CLI::App* agt = app.get_subcommand("agent");
  CLI::App* qua = app.get_subcommand("quality");
  CLI::App* kvq = app.get_subcommand("kv-quality");
  CLI::App* clu = app.get_subcommand("cluster");
  CLI::App* gra = app.get_subcommand("grammar");
  CLI::App* hyb = app.get_subcommand("hybrid");
  return [a, p, conv, srv, tie, agt, qua, clu, gra, conversation, modules, serve, tiers, agent, quality, cluster,
          grammar, hyb, hybrid, kvq, kv_quality] {
    return p->parsed()    ? run_prefill(*a)
           : conv->parsed() ? conversation()
           : srv->parsed()  ? serve()
           : tie->parsed()  ? tiers()
           : agt->parsed()  ? agent()
           : qua->parsed()  ? quality()
           : kvq->parsed()  ? kv_quality()
           : clu->parsed()  ? cluster()
           : gra->parsed()  ? grammar()
           : hyb->parsed()  ? hybrid()
                            : modules();
  };
}

}  // namespace pc::cli
