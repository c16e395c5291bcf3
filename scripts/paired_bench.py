#!/usr/bin/env python3
"""Two promptcache builds side by side on the benchmarks a change to the engine or its
caches must not slow down: bench prefill, conversation, modules, serve and agent.

Each benchmark runs A then B (then B then A on the next round, so drift weighs on both),
--runs times, and the headline figures of each run are read from its --json output. The
table gives each figure's median for A and B and the median of the per-round ratios,
oriented so that > 1 means B is better (B/A for rates, A/B for times).

    scripts/paired_bench.py --a OLD/promptcache --b NEW/promptcache \\
        --model big.gguf --small-model small.gguf --chat-model small-qwen2.gguf

--model: a model of realistic size for bench prefill (e.g. make-model --shape smollm-135m);
--small-model: a small model for conversation, modules and serve (make-model --shape small);
--chat-model: a Qwen2-vocabulary model for bench agent (its traces use the Qwen2.5 template).
Only options both builds accept are passed. Run it from the checkout (bench agent reads
../shared/templates).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def figures_prefill(d):
    r = d["results"][0]
    return {"prompt tok/s": (r["prompt_tokens_per_s"], "rate"), "decode tok/s": (r["decode_tokens_per_s"], "rate")}


def figures_conversation(d):
    rows = d["full_capacity"]
    ours = next(r for r in rows if r["cache"].startswith("promptcache"))
    return {"mean TTFT ms": (statistics.mean(ours["ttft_ms_by_turn"]), "time")}


def figures_modules(d):
    out = {}
    for r in d["results"]:
        out[f"cached TTFT ms ({r['doc_tokens']})"] = (r["ttft_cached_ms"], "time")
        out[f"full TTFT ms ({r['doc_tokens']})"] = (r["ttft_full_ms"], "time")
    return out


def figures_serve(d):
    on = next(r for r in d["runs"] if r["prefix_cache"])
    return {"requests/s": (on["requests_per_s"], "rate"), "TTFT p50 ms": (on["ttft_p50_ms"], "time")}


def figures_agent(d):
    rows = d["rows"]
    return {
        "exact TTFT ms (sum)": (sum(r["exact_ttft_ms"] for r in rows), "time"),
        "approximate TTFT ms (sum)": (sum(r["approximate_ttft_ms"] for r in rows), "time"),
    }


def benches(a):
    return [
        ("prefill", ["bench", "prefill", "-m", a.model, "--tokens", "512", "--decode", "16"], figures_prefill),
        ("conversation", ["bench", "conversation", "-m", a.small_model, "--sessions", "4", "--turns", "4"],
         figures_conversation),
        ("modules", ["bench", "modules", "-m", a.small_model, "--lengths", "512", "1024"], figures_modules),
        ("serve", ["bench", "serve", "-m", a.small_model, "--seconds", "4", "--clients", "8"], figures_serve),
        ("agent", ["bench", "agent", "-m", a.chat_model, "--sessions", "2", "--turns", "6"], figures_agent),
    ]


def run(binary, args, json_path):
    cmd = [binary] + args + ["--json", json_path]
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    with open(json_path) as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", required=True, help="promptcache binary A (the baseline)")
    ap.add_argument("--b", required=True, help="promptcache binary B (the change)")
    ap.add_argument("--model", required=True)
    ap.add_argument("--small-model", required=True)
    ap.add_argument("--chat-model", required=True)
    ap.add_argument("--runs", type=int, default=5, help="rounds per benchmark (default 5)")
    ap.add_argument("--only", default="", help="comma-separated benchmark names (default: all)")
    a = ap.parse_args()
    only = set(filter(None, a.only.split(",")))
    tmp = tempfile.mkdtemp(prefix="paired_bench.")
    print(f"A: {a.a}\nB: {a.b}\n{a.runs} rounds each, A and B alternating; ratio > 1: B better\n")
    print(f"{'bench':13} {'figure':28} {'median A':>10} {'median B':>10} {'ratio':>7} {'min':>6} {'max':>6}")
    worst = None
    for name, args, figures in benches(a):
        if only and name not in only:
            continue
        per = {}  # figure -> ([A], [B], kind)
        for i in range(a.runs):
            order = [("A", a.a), ("B", a.b)] if i % 2 == 0 else [("B", a.b), ("A", a.a)]
            got = {}
            for label, binary in order:
                got[label] = figures(run(binary, args, os.path.join(tmp, f"{name}.{label}.json")))
            for fig, (va, kind) in got["A"].items():
                vb = got["B"][fig][0]
                per.setdefault(fig, ([], [], kind))
                per[fig][0].append(va)
                per[fig][1].append(vb)
        for fig, (va, vb, kind) in per.items():
            ratios = [(b / x if kind == "rate" else x / b) if x > 0 and b > 0 else float("nan") for x, b in zip(va, vb)]
            r = statistics.median(ratios)
            worst = r if worst is None else min(worst, r)
            print(f"{name:13} {fig:28} {statistics.median(va):10.1f} {statistics.median(vb):10.1f} "
                  f"{r:7.3f} {min(ratios):6.3f} {max(ratios):6.3f}", flush=True)
    if worst is not None:
        print(f"\nlowest median ratio: {worst:.3f}")


if __name__ == "__main__":
    main()
