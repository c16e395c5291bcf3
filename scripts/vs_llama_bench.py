#!/usr/bin/env python3
"""promptcache's `bench prefill` and llama.cpp's `llama-bench` side by side on the same
GGUF files, alternating, one process a run, so that both see the same machine.

For each model and round it runs, in turn (the order flips every round, so drift weighs
on both):
  ours:  promptcache bench prefill -m F -t T --tokens P1 P2 .. --decode G --json ..
  llama: llama-bench -m F -t T -p P1,P2,.. -n 0 -r 1 -o json            (prompt rates)
         llama-bench -m F -t T -p 0 -n G -d P1 -r 1 -o json               (decode at depth)
and compares like with like:
  prompt of P tokens: our prompt_tokens_per_s at P  against llama-bench's pp P;
  decode:             our decode after the P1-token prompt against tg G @ d P1
                      (a llama-bench without -d: tg G at an empty context, said so).
The table gives each figure's median over the rounds, both ways in seconds (TTFT of the
prompt, the time of the G decoded tokens), and the median of the per-round ratios,
ours / llama.cpp (> 1: promptcache faster).

llama.cpp is not part of this project: build or install it yourself and pass its
llama-bench with --llama-bench. Example (2 threads, 3 rounds):

    scripts/vs_llama_bench.py --llama-bench ~/llama.cpp/build/bin/llama-bench \\
        --model tl-q4km.gguf --model tl-q8_0.gguf -t 2 --rounds 3 --json vs.json

Models of real shapes: `promptcache make-model --shape tinyllama-1.1b --type Q4_K_M ...`.
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile


def positive_ints(text):
    vals = [int(v) for v in text.replace(",", " ").split()]
    if not vals or any(v <= 0 for v in vals):
        raise argparse.ArgumentTypeError(f"expected positive integers, got '{text}'")
    return vals


class Failed(RuntimeError):
    def __init__(self, what, cmd, p):
        super().__init__(f"{what} failed (exit {p.returncode}): {shlex.join(cmd)}\n{p.stderr[-2000:]}")
        self.stderr = p.stderr


def run(cmd, what):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise Failed(what, cmd, p)
    return p.stdout


def ours(a, model, tmp):
    path = os.path.join(tmp, "ours.json")
    cmd = [a.promptcache, "bench", "prefill", "-m", model, "-t", str(a.threads), "--tokens"]
    cmd += [str(p) for p in a.prompts] + ["--decode", str(a.decode), "--no-int8-peak", "--no-bandwidth",
                                          "--json", path] + shlex.split(a.our_args)
    run(cmd, "promptcache bench prefill")
    with open(path) as f:
        d = json.load(f)
    by_len = {r["prompt_tokens"]: r for r in d["results"]}
    out = {}
    for p in a.prompts:
        if p not in by_len:
            raise RuntimeError(f"promptcache's --json has no result for a prompt of {p} tokens")
        out[("prompt", p)] = by_len[p]["prompt_tokens_per_s_median"]
    out[("decode", a.prompts[0])] = by_len[a.prompts[0]]["decode_tokens_per_s_median"]
    return out


def llama_tests(text):
    try:
        tests = json.loads(text)
    except json.JSONDecodeError as e:
        raise RuntimeError(f"llama-bench printed no JSON ({e}): {text[:300]!r}")
    if isinstance(tests, dict):
        tests = [tests]
    return tests


def llama(a, model, state):
    base = [a.llama_bench, "-m", model, "-t", str(a.threads), "-r", "1", "-o", "json"] + shlex.split(a.llama_args)
    out = {}
    pp = llama_tests(run(base + ["-p", ",".join(str(p) for p in a.prompts), "-n", "0"], "llama-bench (prompts)"))
    for t in pp:
        if t.get("n_gen", 0) == 0 and t.get("n_prompt", 0) in a.prompts:
            out[("prompt", t["n_prompt"])] = float(t["avg_ts"])
    for p in a.prompts:
        if ("prompt", p) not in out:
            raise RuntimeError(f"llama-bench's JSON has no pp{p} test")
    depth = a.prompts[0]
    tg_cmd = base + ["-p", "0", "-n", str(a.decode)]
    if state.get("depth", True):
        try:
            tg = llama_tests(run(tg_cmd + ["-d", str(depth)], "llama-bench (decode)"))
        except Failed as e:
            # Builds before -d/--n-depth (2025) reject it ("invalid parameter for argument:
            # -d"): decode at an empty context instead.
            if "invalid parameter" not in e.stderr or "-d" not in e.stderr:
                raise
            state["depth"] = False
            print("note: this llama-bench has no -d (--n-depth); its decode runs at an empty context",
                  file=sys.stderr)
    if not state.get("depth", True):
        tg = llama_tests(run(tg_cmd, "llama-bench (decode)"))
    for t in tg:
        if t.get("n_prompt", 0) == 0 and t.get("n_gen", 0) == a.decode:
            out[("decode", depth)] = float(t["avg_ts"])
    if ("decode", depth) not in out:
        raise RuntimeError(f"llama-bench's JSON has no tg{a.decode} test")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-bench", required=True, help="llama.cpp's llama-bench binary (built or installed by you)")
    ap.add_argument("--promptcache", default="build/promptcache", help="promptcache binary (default build/promptcache)")
    ap.add_argument("--model", action="append", required=True, help="a GGUF file (repeat for several)")
    ap.add_argument("-t", "--threads", type=int, default=2, help="threads for both (default 2)")
    ap.add_argument("--prompts", type=positive_ints, default=[512, 2048],
                    help="prompt lengths (default 512,2048); decode runs after the first")
    ap.add_argument("--decode", type=int, default=32, help="tokens decoded (llama-bench -n; default 32)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds, each running both once (default 3)")
    ap.add_argument("--our-args", default="", help="extra arguments for bench prefill (e.g. '--kernels avx2')")
    ap.add_argument("--llama-args", default="", help="extra arguments for llama-bench (e.g. '-fa 1')")
    ap.add_argument("--json", help="write the rounds and medians here")
    a = ap.parse_args()
    if a.threads < 1 or a.decode < 1 or a.rounds < 1:
        ap.error("--threads, --decode and --rounds must be at least 1")
    for m in a.model:
        if not os.path.isfile(m):
            ap.error(f"--model {m}: no such file")

    tmp = tempfile.mkdtemp(prefix="vs_llama_bench.")
    state = {}
    report = {"threads": a.threads, "decode_tokens": a.decode, "rounds": a.rounds, "models": []}
    try:
        for model in a.model:
            rounds = []
            for i in range(a.rounds):
                got = {}
                for who in (("ours", "llama") if i % 2 == 0 else ("llama", "ours")):
                    got[who] = ours(a, model, tmp) if who == "ours" else llama(a, model, state)
                rounds.append(got)
                print(f"{os.path.basename(model)} round {i + 1}/{a.rounds} done", file=sys.stderr, flush=True)
            rows = []
            for key in rounds[0]["ours"]:
                kind, n = key
                o = [r["ours"][key] for r in rounds]
                l = [r["llama"][key] for r in rounds]
                ratio = statistics.median(x / y for x, y in zip(o, l))
                mo, ml = statistics.median(o), statistics.median(l)
                work = n if kind == "prompt" else a.decode
                label = f"prompt {n}" if kind == "prompt" else (
                    f"decode {a.decode} after {n}" if state.get("depth", True) else
                    f"decode {a.decode} (llama.cpp: empty context)")
                rows.append({"figure": label, "kind": kind, "tokens": n, "ours_tok_s": o, "llama_tok_s": l,
                             "ours_median": mo, "llama_median": ml, "ours_s": work / mo, "llama_s": work / ml,
                             "ratio_median": ratio})
            report["models"].append({"model": model, "rows": rows})
    except RuntimeError as e:
        sys.exit(str(e))

    print(f"\n{a.threads} threads, {a.rounds} rounds, alternating; ratio: ours / llama.cpp (> 1: promptcache faster)")
    for m in report["models"]:
        print(f"\n{m['model']}")
        print(f"  {'figure':34} {'ours tok/s':>11} {'llama tok/s':>12} {'ours s':>8} {'llama s':>8} {'ratio':>7}")
        for r in m["rows"]:
            print(f"  {r['figure']:34} {r['ours_median']:11.1f} {r['llama_median']:12.1f} "
                  f"{r['ours_s']:8.2f} {r['llama_s']:8.2f} {r['ratio_median']:7.3f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
