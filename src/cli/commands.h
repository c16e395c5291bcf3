// Subcommands of the `promptcache` executable. Each registers its options on
// the CLI11 app and returns the function that runs it.
#pragma once
#include <functional>
#include <string>

namespace CLI { class App; }

namespace pc::cli {

using Run = std::function<int()>;

Run add_generate(CLI::App& app);
Run add_inspect(CLI::App& app);
Run add_make_model(CLI::App& app);
Run add_demo(CLI::App& app);
Run add_bench(CLI::App& app);
Run add_pml(CLI::App& app);
Run add_serve(CLI::App& app);
// Help of every command's -t/--threads option (default_thread_count()).
inline constexpr const char* kThreadsHelp = "CPU threads (default: the physical cores this process may use)";
// Help of the --mmap flag (serve, generate, bench prefill).
inline constexpr const char* kMmapHelp =
    "Map the model file instead of copying it into memory (huge pages): less memory when "
    "several processes share one model; decode reads every weight per token and runs "
    "~1.2x slower that way";
// Help of every bench's --json option: the file has a "bench" key naming the bench.
inline constexpr const char* kBenchJsonHelp =
    "Also write the results as JSON to this file (scripts/plot_bench.py draws them as plots)";
// Whole file as a string; throws pc::Error naming the path.
std::string read_text_file(const std::string& path);
// `bench conversation`, registered by add_bench.
Run add_bench_conversation(CLI::App& bench);
// `bench modules`, registered by add_bench.
Run add_bench_modules(CLI::App& bench);
// `bench serve`, registered by add_bench.
Run add_bench_serve(CLI::App& bench);
// `bench tiers`, registered by add_bench.
Run add_bench_tiers(CLI::App& bench);
// `bench agent`, registered by add_bench.
Run add_bench_agent(CLI::App& bench);
// `bench quality`, registered by add_bench.
Run add_bench_quality(CLI::App& bench);
// `bench kv-quality`: quantized KV against F16 (src/cli/bench_kv_quality.cc).
Run add_bench_kv_quality(CLI::App& bench);
// `bench cluster`: several servers and one Redis (src/cli/bench_cluster.cc).
Run add_bench_cluster(CLI::App& bench);
// `bench grammar`: constrained vs free decode (src/cli/bench_grammar.cc).
Run add_bench_grammar(CLI::App& bench);
Run add_bench_hybrid(CLI::App& bench);

}  // namespace pc::cli
