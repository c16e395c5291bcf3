#!/usr/bin/python3
"""Draws the --json output of any `promptcache bench` command as a plot.

    scripts/plot_bench.py RESULT.json...                  # RESULT.svg beside each file
    scripts/plot_bench.py -o docs/bench -f svg,png a.json b.json

Each file's "bench" key names the bench that wrote it; the plot of each bench is
one function below, registered with @plot("name"). A new bench writes "bench": NAME
in its JSON, gets one @plot(NAME) function here, and a small recorded run as
tests/plots/NAME.json (tests/plots requires one per plot). What each draws:

    prefill       prompt and decode tokens/s by prompt length, a line per kernel path
    conversation  TTFT by turn per cache, at full and at a quarter of the capacity
    agent         TTFT and computed tokens by turn: exact, approximate reuse, block-hash cache
    modules       TTFT with cached modules vs full recomputation, and the speed-up,
                  by document length
    quality       top-1 agreement, mean KL and identical continuations by recompute
                  budget, a line per policy (all kinds of change together)
    tiers         restore throughput per tier, and TTFT with the module in each tier
    serve         requests/s, generated tokens/s and TTFT p50/p99 per run
    cluster       computed tokens vs one server's ideal and TTFT p50/p99 per routing,
                  and the speed-up of a promotion from Redis by history length

Uses Debian's python3-matplotlib (scripts/setup.sh installs it); run it with
/usr/bin/python3, which the first line names. A file that is not JSON, not a
bench's output or missing what its plot needs is an error naming the file and
the field: the exit status is 1 and nothing is written for that file.
"""

import argparse
import json
import os
import sys

try:
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator, ScalarFormatter
except ImportError:
    sys.exit("plot_bench: matplotlib is missing: apt-get install python3-matplotlib "
             "(scripts/setup.sh), and run this with /usr/bin/python3")


class BadInput(Exception):
    """A file the plots cannot be drawn from; the message says why."""


def field(obj, key, kind=None, where=""):
    """obj[key], checked: BadInput names the field when it is absent or of the wrong kind."""
    name = f"{where}.{key}" if where else str(key)
    if not isinstance(obj, dict) or key not in obj:
        raise BadInput(f"missing field '{name}'")
    v = obj[key]
    if kind is not None and not isinstance(v, kind) or isinstance(v, bool) and kind in (int, float, (int, float)):
        want = {list: "a list", dict: "an object", str: "a string"}.get(kind, "a number")
        raise BadInput(f"field '{name}' is not {want}")
    return v


def rows(obj, key, where=""):
    """obj[key] as a non-empty list of objects."""
    v = field(obj, key, list, where)
    name = f"{where}.{key}" if where else key
    if not v:
        raise BadInput(f"field '{name}' is empty")
    for i, r in enumerate(v):
        if not isinstance(r, dict):
            raise BadInput(f"field '{name}[{i}]' is not an object")
    return v


def number(obj, key, where="", optional=False):
    """obj[key] as a float (None when optional and null)."""
    if optional and isinstance(obj, dict) and obj.get(key) is None:
        return None
    return float(field(obj, key, (int, float), where))


PLOTS = {}


def plot(name):
    """Registers the function drawing bench `name`: f(data) -> matplotlib Figure."""
    def register(f):
        PLOTS[name] = f
        return f
    return register


def figure(ncols, title, nrows=1, width=5.2, height=3.8):
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False,
                             layout="constrained")
    fig.suptitle(title, fontsize=11)
    return fig, axes


def finish(ax, xlabel, ylabel, legend=True):
    if xlabel == "turn":
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    if legend and ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)


def lengths_axis(ax):
    """A log-2 x axis of token counts, labelled in plain numbers."""
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(ScalarFormatter())


def base(path):
    return os.path.basename(str(path))


def bar_labels(ax, bars, fmt):
    for b in bars:
        ax.annotate(fmt.format(b.get_height()), (b.get_x() + b.get_width() / 2, b.get_height()),
                    ha="center", va="bottom", fontsize=8)


def ttft_bars(ax, runs, where):
    """TTFT p50 and p99 side by side, one pair of bars per run."""
    wdt = 0.38
    for off, key, label in ((-wdt / 2, "ttft_p50_ms", "p50"), (wdt / 2, "ttft_p99_ms", "p99")):
        bars = ax.bar([i + off for i in range(len(runs))],
                      [number(r, key, f"{where}[{i}]") for i, r in enumerate(runs)], wdt, label=label)
        bar_labels(ax, bars, "{:.0f}")
    finish(ax, "", "TTFT (ms)")


@plot("prefill")
def plot_prefill(d):
    results = rows(d, "results")
    by_kernels = {}
    for i, r in enumerate(results):
        w = f"results[{i}]"
        k = field(r, "kernels", str, w)
        t = r.get("temperature", 0)  # decode temperature (bench prefill --temperature)
        if t:
            k += f", temperature {t:g}"
        by_kernels.setdefault(k, []).append(
            (number(r, "prompt_tokens", w), number(r, "prompt_tokens_per_s", w),
             number(r, "decode_tokens_per_s", w, optional=True)))
    fig, ax = figure(2, f"bench prefill: {base(d.get('model', '?'))}, {d.get('threads', '?')} threads")
    for k, pts in by_kernels.items():
        pts.sort()
        ax[0][0].plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=k)
        dec = [(p[0], p[2]) for p in pts if p[2] is not None]
        if dec:
            ax[0][1].plot([p[0] for p in dec], [p[1] for p in dec], marker="o", label=k)
    for a, what in ((ax[0][0], "prompt tokens/s"), (ax[0][1], "decode tokens/s")):
        lengths_axis(a)
        a.set_yscale("log")
        finish(a, "prompt length (tokens)", what)
    if not ax[0][1].lines:
        ax[0][1].text(0.5, 0.5, "no decode (--decode 0)", ha="center", transform=ax[0][1].transAxes)
    return fig


@plot("conversation")
def plot_conversation(d):
    parts = [("full_capacity", "capacity: whole working set"), ("quarter_capacity", "capacity: a quarter of it")]
    parts = [(k, t) for k, t in parts if k in d]
    if not parts:
        raise BadInput("missing field 'full_capacity'")
    fig, ax = figure(len(parts), f"bench conversation: {base(d.get('model', '?'))}, "
                                 f"{d.get('sessions', '?')} sessions x {d.get('turns', '?')} turns")
    for a, (key, title) in zip(ax[0], parts):
        for i, r in enumerate(rows(d, key)):
            w = f"{key}[{i}]"
            ttft = field(r, "ttft_ms_by_turn", list, w)
            est = bool(r.get("ttft_estimated", False))
            a.plot(range(1, len(ttft) + 1), ttft, marker="o", linestyle="--" if est else "-",
                   label=field(r, "cache", str, w) + (" (estimated)" if est else ""))
        a.set_title(title, fontsize=10)
        a.set_ylim(bottom=0)
        finish(a, "turn", "mean TTFT (ms)")
    return fig


@plot("agent")
def plot_agent(d):
    turns = rows(d, "rows")
    t = [number(r, "turn", f"rows[{i}]") for i, r in enumerate(turns)]
    series = lambda key: [number(r, key, f"rows[{i}]") for i, r in enumerate(turns)]
    fig, ax = figure(2, f"bench agent: {base(d.get('model', '?'))}, "
                        f"{d.get('sessions', '?')} sessions x {d.get('turns', '?')} turns, "
                        f"documents {d.get('documents', 'separate')}")
    ax[0][0].plot(t, series("exact_ttft_ms"), marker="o", label="exact reuse")
    ax[0][0].plot(t, series("approximate_ttft_ms"), marker="s", label="approximate reuse")
    if all("block_hash_ttft_ms" in r for r in turns):  # runs recorded before it was reported have none
        ax[0][0].plot(t, series("block_hash_ttft_ms"), marker=".", linestyle="--",
                      label="16-token block hash (sim., est.)")
    ax[0][0].set_ylim(bottom=0)
    finish(ax[0][0], "turn", "mean TTFT (ms)")
    for key, label, style in (("prompt_tokens", "prompt", ":"), ("block_hash_computed", "16-token block hash (sim.)", "--"),
                              ("exact_computed", "exact reuse", "-"), ("approximate_computed", "approximate reuse", "-"),
                              ("ideal_tokens", "ideal (new tokens)", "-.")):
        ax[0][1].plot(t, series(key), marker=".", linestyle=style, label=label)
    ax[0][1].set_yscale("log")
    finish(ax[0][1], "turn", "tokens computed (all sessions)")
    for a in ax[0]:  # the turns where the requests change
        for r, x in zip(turns, t):
            if r.get("change"):
                a.axvline(x, color="grey", alpha=0.4, linewidth=0.8)
                a.annotate(str(r["change"]), (x, 1), xycoords=("data", "axes fraction"), rotation=90,
                           va="top", ha="right", fontsize=7, color="grey")
    return fig


@plot("modules")
def plot_modules(d):
    res = rows(d, "results")
    pts = sorted((number(r, "doc_tokens", f"results[{i}]"), number(r, "ttft_full_ms", f"results[{i}]"),
                  number(r, "ttft_cached_ms", f"results[{i}]"), number(r, "speedup", f"results[{i}]"))
                 for i, r in enumerate(res))
    x = [p[0] for p in pts]
    fig, ax = figure(2, f"bench modules: {base(d.get('model', '?'))}")
    ax[0][0].plot(x, [p[1] for p in pts], marker="o", label="full recomputation")
    ax[0][0].plot(x, [p[2] for p in pts], marker="s", label="cached modules")
    ax[0][0].set_yscale("log")
    ax[0][1].plot(x, [p[3] for p in pts], marker="o", color="C2")
    for xi, p in zip(x, pts):
        ax[0][1].annotate(f"{p[3]:.1f}x", (xi, p[3]), textcoords="offset points", xytext=(0, 5), ha="center", fontsize=8)
    ax[0][1].set_ylim(bottom=0)
    for a in ax[0]:
        lengths_axis(a)
    finish(ax[0][0], "document length (tokens)", "TTFT (ms)")
    finish(ax[0][1], "document length (tokens)", "speed-up (full / cached)", legend=False)
    return fig


@plot("quality")
def plot_quality(d):
    models = rows(d, "models")
    metrics = (("top1_agreement", "top-1 agreement"), ("mean_kl", "mean KL (nats)"),
               ("same_continuation", "identical continuation"))
    fig, ax = figure(3, f"bench quality: approximate reuse vs full recomputation "
                        f"({d.get('continuation', '?')}-token continuations)", nrows=len(models), width=4.6)
    for m, model in enumerate(models):
        w = f"models[{m}]"
        res = rows(model, "results", w)
        everything = [r for r in res if r.get("change") == "all"]
        if not everything:
            raise BadInput(f"no row of '{w}.results' has change \"all\"")
        shared = [r for r in everything if r.get("policy") == "(any)"]  # budget 0: every policy alike
        policies = sorted({field(r, "policy", str, w) for r in everything} - {"(any)"}) or ["(any)"]
        for col, (key, label) in enumerate(metrics):
            a = ax[m][col]
            for p in policies:
                pts = sorted((number(r, "budget", w), number(r, key, w))
                             for r in everything if r["policy"] == p or r in shared)
                a.plot([q[0] for q in pts], [q[1] for q in pts], marker="o", label=p)
            if key != "mean_kl":
                a.set_ylim(0, 1.05)
            a.set_title(f"{base(model.get('model', '?'))}: {label}", fontsize=9)
            finish(a, "recompute budget (fraction of reused tokens)", label, legend=col == 0)
    return fig


@plot("tiers")
def plot_tiers(d):
    parts = [k for k in ("throughput", "ttft") if k in d]
    if not parts:
        raise BadInput("missing field 'ttft' (and 'throughput')")
    fig, ax = figure(len(parts), "bench tiers", width=6)
    for a, key in zip(ax[0], parts):
        res = rows(d, key)
        if key == "throughput":
            names = [field(r, "path", str, f"throughput[{i}]") for i, r in enumerate(res)]
            vals = [number(r, "gb_per_s", f"throughput[{i}]") for i, r in enumerate(res)]
            bars = a.bar(range(len(vals)), vals, color="C0")
            bar_labels(a, bars, "{:.2f}")
            a.set_title("restoring one entry from each tier", fontsize=10)
            ylabel = "restore throughput (GB/s)"
        else:
            names = [field(r, "where", str, f"ttft[{i}]") for i, r in enumerate(res)]
            vals = [number(r, "ms", f"ttft[{i}]") for i, r in enumerate(res)]
            bars = a.bar(range(len(vals)), vals, color="C1")
            for b, r in zip(bars, res):
                a.annotate(f"{b.get_height():.1f} ms\n{float(r.get('speedup', 0)):.1f}x",
                           (b.get_x() + b.get_width() / 2, b.get_height()), ha="center", va="bottom", fontsize=8)
            a.set_title("TTFT of a prompt importing a document module", fontsize=10)
            ylabel = "TTFT (ms)"
        a.set_xticks(range(len(names)), names, rotation=20, ha="right", fontsize=8)
        a.margins(y=0.2)
        finish(a, "", ylabel, legend=False)
    return fig


@plot("serve")
def plot_serve(d):
    runs = rows(d, "runs")
    labels = [field(r, "label", str, f"runs[{i}]") for i, r in enumerate(runs)]
    fig, ax = figure(3, f"bench serve: {d.get('clients', '?')} streaming clients x {d.get('seconds', '?')} s, "
                        f"max_tokens {d.get('max_tokens', '?')}", width=4.2)
    x = range(len(runs))
    for a, key, label in ((ax[0][0], "requests_per_s", "requests/s"), (ax[0][1], "generated_tokens_per_s", "generated tokens/s")):
        bars = a.bar(x, [number(r, key, f"runs[{i}]") for i, r in enumerate(runs)], color="C0")
        bar_labels(a, bars, "{:.1f}")
        finish(a, "", label, legend=False)
    ttft_bars(ax[0][2], runs, "runs")
    for a in ax[0]:
        a.set_xticks(list(x), labels, fontsize=8)
        a.margins(y=0.15)
    return fig


@plot("cluster")
def plot_cluster(d):
    parts = [k for k in ("trace", "promotion") if k in d]
    if not parts:
        raise BadInput("missing field 'trace' (and 'promotion')")
    ncols = (2 if "trace" in d else 0) + (1 if "promotion" in d else 0)
    fig, ax = figure(ncols, f"bench cluster: {base(d.get('model', '?'))}, {d.get('sessions', '?')} sessions x "
                            f"{d.get('turns', '?')} turns", width=4.4)
    col = 0
    if "trace" in d:
        runs = rows(d, "trace")
        labels = [field(r, "label", str, f"trace[{i}]") for i, r in enumerate(runs)]
        x = range(len(runs))
        a = ax[0][0]
        bars = a.bar(x, [number(r, "computed_vs_ideal", f"trace[{i}]") for i, r in enumerate(runs)], color="C0")
        bar_labels(a, bars, "{:.2f}x")
        a.set_title("computed tokens vs one server", fontsize=10)
        finish(a, "", "computed / ideal", legend=False)
        ttft_bars(ax[0][1], runs, "trace")
        for a in ax[0][:2]:
            a.set_xticks(list(x), labels, rotation=20, ha="right", fontsize=8)
            a.margins(y=0.15)
        col = 2
    if "promotion" in d:
        res = rows(d, "promotion")
        a = ax[0][col]
        n = [number(r, "tokens", f"promotion[{i}]") for i, r in enumerate(res)]
        a.plot(n, [number(r, "recompute_ms", f"promotion[{i}]") for i, r in enumerate(res)], "o-", label="recompute")
        a.plot(n, [number(r, "promote_ms", f"promotion[{i}]") for i, r in enumerate(res)], "o-", label="promote from Redis")
        for t, r in zip(n, res):
            a.annotate(f"{float(r.get('speedup', 0)):.1f}x", (t, number(r, "promote_ms")), textcoords="offset points",
                       xytext=(0, -12), ha="center", fontsize=8)
        lengths_axis(a)
        a.set_yscale("log")
        a.set_title("TTFT of one history", fontsize=10)
        finish(a, "history tokens", "TTFT (ms)")
    return fig


def load(path):
    """The parsed file and its bench name; BadInput when it is not a bench's JSON."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as e:
        raise BadInput(f"cannot read: {e.strerror}")
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BadInput(f"not JSON: {e}")
    if not isinstance(data, dict):
        raise BadInput("not a bench result: the JSON is not an object")
    kind = data.get("bench")
    if not isinstance(kind, str):
        raise BadInput("no \"bench\" key naming the bench: not the --json output of `promptcache bench`")
    if kind not in PLOTS:
        raise BadInput(f"unknown bench \"{kind}\" (known: {', '.join(sorted(PLOTS))})")
    return data, kind


def main(argv):
    ap = argparse.ArgumentParser(description="Plots of `promptcache bench ... --json` results.")
    ap.add_argument("files", nargs="+", metavar="RESULT.json")
    ap.add_argument("-o", "--out-dir", help="where the images go (default: beside each file)")
    ap.add_argument("-f", "--formats", default="svg", help="comma-separated: svg, png (default: svg)")
    args = ap.parse_args(argv)
    formats = [f.strip().lower() for f in args.formats.split(",") if f.strip()]
    bad = [f for f in formats if f not in ("svg", "png")]
    if bad or not formats:
        ap.error(f"--formats: {', '.join(bad) or 'none given'}: use svg and/or png")
    if args.out_dir:
        os.makedirs(args.out_dir, exist_ok=True)
    plt.rcParams["svg.hashsalt"] = "promptcache"  # the same input gives the same SVG
    plt.rcParams["svg.fonttype"] = "none"  # text stays text: small files, searchable
    failed = 0
    for path in args.files:
        try:
            data, kind = load(path)
            fig = PLOTS[kind](data)
        except BadInput as e:
            print(f"plot_bench: {path}: {e}", file=sys.stderr)
            failed += 1
            continue
        stem = os.path.splitext(os.path.basename(path))[0]
        for fmt in formats:
            out = os.path.join(args.out_dir or os.path.dirname(path) or ".", f"{stem}.{fmt}")
            fig.savefig(out, format=fmt, bbox_inches="tight", dpi=110,
                        metadata={"Date": None} if fmt == "svg" else None)
            print(f"{path}: bench {kind} -> {out}")
        plt.close(fig)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
