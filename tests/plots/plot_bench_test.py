#!/usr/bin/python3
"""scripts/plot_bench.py on the recorded JSON of each bench (small real runs kept
beside this file): every bench's plot renders to a non-empty SVG and PNG, and bad
input is a clear error with exit status 1 and no image."""

import glob
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "scripts", "plot_bench.py")
RECORDED = sorted(glob.glob(os.path.join(HERE, "*.json")))


def plot(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=120)


def bench_of(path):
    with open(path) as f:
        return json.load(f)["bench"]


class PlotBench(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def test_every_bench_has_a_recorded_run(self):
        spec = importlib.util.spec_from_file_location("plot_bench", SCRIPT)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        self.assertEqual(sorted(mod.PLOTS), sorted(bench_of(p) for p in RECORDED))

    def test_each_recorded_run_renders(self):
        r = plot("-o", self.out, "-f", "svg,png", *RECORDED)
        self.assertEqual(r.returncode, 0, r.stderr)
        for path in RECORDED:
            stem = os.path.splitext(os.path.basename(path))[0]
            with self.subTest(bench=bench_of(path)):
                self.assertIn(f"bench {bench_of(path)} -> ", r.stdout)
                svg = os.path.join(self.out, stem + ".svg")
                root = ET.parse(svg).getroot()
                self.assertTrue(root.tag.endswith("svg"))
                # Axes, lines and bars are paths; an empty figure has only a few.
                paths = [e for e in root.iter() if e.tag.endswith("path")]
                self.assertGreater(len(paths), 20, svg)
                with open(os.path.join(self.out, stem + ".png"), "rb") as f:
                    png = f.read()
                self.assertTrue(png.startswith(b"\x89PNG\r\n\x1a\n"))
                self.assertGreater(len(png), 10000)

    def test_agent_draws_the_ttft_of_three_modes(self):
        spec = importlib.util.spec_from_file_location("plot_bench", SCRIPT)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        with open(os.path.join(HERE, "agent.json")) as f:
            d = json.load(f)
        fig = mod.PLOTS["agent"](d)
        ttft = fig.axes[0]
        labels = [line.get_label() for line in ttft.get_lines()]
        self.assertEqual(labels[:3], ["exact reuse", "approximate reuse", "16-token block hash (sim., est.)"])
        hash_line = ttft.get_lines()[2]
        self.assertEqual(list(hash_line.get_ydata()), [r["block_hash_ttft_ms"] for r in d["rows"]])

    def write(self, name, text):
        path = os.path.join(self.out, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_bad_input_is_a_clear_error(self):
        # One run over all of them (matplotlib is slow to import): each bad file is
        # reported and skipped, the good one among them is still drawn.
        bad = {
            self.write("trunc.json", '{"bench": "prefill", "results": ['): "not JSON",
            self.write("list.json", "[1, 2]"): "not a bench result: the JSON is not an object",
            self.write("nokey.json", '{"results": []}'): 'no "bench" key',
            self.write("unknown.json", '{"bench": "teleport"}'): 'unknown bench "teleport"',
            self.write("missing.json", '{"bench": "prefill"}'): "missing field 'results'",
            self.write("empty.json", '{"bench": "modules", "results": []}'): "field 'results' is empty",
            self.write("type.json", '{"bench": "serve", "runs": [{"label": "a", "requests_per_s": "fast"}]}'):
                "field 'runs[0].requests_per_s' is not a number",
            os.path.join(self.out, "absent.json"): "cannot read",
        }
        good = RECORDED[0]
        r = plot("-o", self.out, *bad, good)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        for path, message in bad.items():
            self.assertIn(f"plot_bench: {path}: {message}", r.stderr)
            self.assertFalse(os.path.exists(os.path.splitext(path)[0] + ".svg"), path)
        stem = os.path.splitext(os.path.basename(good))[0]
        self.assertGreater(os.path.getsize(os.path.join(self.out, stem + ".svg")), 0)
        self.assertEqual(r.stderr.count("plot_bench: "), len(bad))


if __name__ == "__main__":
    unittest.main()
