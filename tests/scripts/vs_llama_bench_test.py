#!/usr/bin/python3
"""scripts/vs_llama_bench.py against the real promptcache and a stand-in llama-bench
(a script printing llama-bench's JSON, with rates made from its arguments, and logging
its command lines): the figures it pairs are the ones asked for, the medians and ratios
are those of the rounds, a llama-bench without -d falls back to an empty context and
says so, and failures are errors that name the command.

Usage: vs_llama_bench_test.py PROMPTCACHE MODEL.gguf
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "scripts", "vs_llama_bench.py")
PROMPTCACHE = None
MODEL = None

# The stand-in: pp P at depth D runs at 1000 + P tok/s, tg G at depth D at 50 + D.
STUB = r'''#!/usr/bin/python3
import json, os, sys
args = sys.argv[1:]
with open(os.environ["STUB_LOG"], "a") as f:
    f.write(json.dumps(args) + "\n")
mode = os.environ.get("STUB_MODE", "normal")
if mode == "fail":
    print("error: failed to load model", file=sys.stderr)
    sys.exit(3)
if mode == "no_depth" and "-d" in args:
    print("error: invalid parameter for argument: -d", file=sys.stderr)
    sys.exit(1)
def val(flag, default):
    return args[args.index(flag) + 1] if flag in args else default
assert val("-o", "md") == "json" and val("-r", "5") == "1"
prompts = [int(v) for v in val("-p", "512").split(",")]
gen = int(val("-n", "128"))
depth = int(val("-d", "0"))
tests = []
for p in prompts:
    if p > 0:
        tests.append({"n_prompt": p, "n_gen": 0, "n_depth": depth, "n_threads": int(val("-t", "4")),
                      "avg_ts": 1000.0 + p, "samples_ts": [1000.0 + p]})
if gen > 0:
    tests.append({"n_prompt": 0, "n_gen": gen, "n_depth": depth, "n_threads": int(val("-t", "4")),
                  "avg_ts": 50.0 + depth, "samples_ts": [50.0 + depth]})
print(json.dumps(tests, indent=2))
'''


class VsLlamaBench(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.stub = os.path.join(self.tmp.name, "llama-bench")
        with open(self.stub, "w") as f:
            f.write(STUB)
        os.chmod(self.stub, 0o755)
        self.log = os.path.join(self.tmp.name, "log")
        self.out = os.path.join(self.tmp.name, "out.json")

    def tearDown(self):
        self.tmp.cleanup()

    def run_script(self, mode="normal", extra=()):
        env = dict(os.environ, STUB_LOG=self.log, STUB_MODE=mode)
        cmd = [sys.executable, SCRIPT, "--llama-bench", self.stub, "--promptcache", PROMPTCACHE, "--model", MODEL,
               "-t", "2", "--prompts", "16,32", "--decode", "4", "--rounds", "2", "--json", self.out, *extra]
        return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)

    def calls(self):
        with open(self.log) as f:
            return [json.loads(line) for line in f]

    def test_pairs_medians_and_ratios(self):
        p = self.run_script()
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(self.out) as f:
            rep = json.load(f)
        rows = {r["figure"]: r for r in rep["models"][0]["rows"]}
        self.assertEqual(sorted(rows), ["decode 4 after 16", "prompt 16", "prompt 32"])
        self.assertEqual(rows["prompt 16"]["llama_tok_s"], [1016.0, 1016.0])
        self.assertEqual(rows["prompt 32"]["llama_tok_s"], [1032.0, 1032.0])
        self.assertEqual(rows["decode 4 after 16"]["llama_tok_s"], [66.0, 66.0])  # tg at depth 16
        for r in rows.values():
            self.assertEqual(len(r["ours_tok_s"]), 2)
            self.assertTrue(all(v > 0 for v in r["ours_tok_s"]))
            want = statistics.median(o / l for o, l in zip(r["ours_tok_s"], r["llama_tok_s"]))
            self.assertAlmostEqual(r["ratio_median"], want, places=9)
            work = r["tokens"] if r["kind"] == "prompt" else 4
            self.assertAlmostEqual(r["llama_s"], work / statistics.median(r["llama_tok_s"]), places=9)
        self.assertIn("decode 4 after 16", p.stdout)
        calls = self.calls()
        self.assertEqual(len(calls), 4)  # two rounds of (prompts, decode)
        for c in calls:
            self.assertEqual(c[c.index("-t") + 1], "2")
            self.assertEqual(c[c.index("-m") + 1], MODEL)
        self.assertEqual([c[c.index("-d") + 1] for c in calls if "-d" in c], ["16", "16"])

    def test_llama_bench_without_depth(self):
        p = self.run_script(mode="no_depth")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("no -d", p.stderr)
        with open(self.out) as f:
            rows = {r["figure"]: r for r in json.load(f)["models"][0]["rows"]}
        self.assertEqual(rows["decode 4 (llama.cpp: empty context)"]["llama_tok_s"], [50.0, 50.0])
        # -d is tried once, then left off
        self.assertEqual(sum(1 for c in self.calls() if "-d" in c), 1)

    def test_failures_name_the_command(self):
        p = self.run_script(mode="fail")
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("llama-bench (prompts) failed (exit 3)", p.stderr)
        self.assertIn("failed to load model", p.stderr)
        self.assertFalse(os.path.exists(self.out))
        p = self.run_script(extra=["--model", os.path.join(self.tmp.name, "missing.gguf")])
        self.assertEqual(p.returncode, 2)
        self.assertIn("missing.gguf: no such file", p.stderr)
        p = self.run_script(extra=["--prompts", "0"])
        self.assertEqual(p.returncode, 2)
        self.assertIn("--prompts", p.stderr)


if __name__ == "__main__":
    PROMPTCACHE, MODEL = sys.argv[1], sys.argv[2]
    unittest.main(argv=sys.argv[:1])
