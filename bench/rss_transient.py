#!/usr/bin/env python3
"""RSS of `promptcache serve` around large transient work: stores N PML schemas of
100,000 small modules (~3.2 MB each), deletes them, and reports the resident memory
before, at the peak and after (right away and after 2 s idle).

  bench/rss_transient.py [--binary build/promptcache] [--schemas 5] [--env MALLOC_ARENA_MAX=1]

Run it once per allocator setting to compare (the numbers go in docs/api.md)."""
import argparse, os, re, socket, subprocess, sys, time, urllib.request

ap = argparse.ArgumentParser()
ap.add_argument("--binary", default="build/promptcache")
ap.add_argument("--model", default=os.path.join(os.path.dirname(__file__), "../../shared/models/stories260K.gguf"))
ap.add_argument("--schemas", type=int, default=5)
ap.add_argument("--modules", type=int, default=100000)
ap.add_argument("--env", action="append", default=[], help="NAME=VALUE for the server (repeatable)")
a = ap.parse_args()

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1)) / 1024

port = free_port()
env = dict(os.environ)
for kv in a.env:
    k, v = kv.split("=", 1); env[k] = v
srv = subprocess.Popen([a.binary, "serve", "-m", a.model, "--port", str(port), "--kv-memory", "64MiB",
                        "--tenant-max-schemas", "100", "--tenant-max-schema-modules", "100000000",
                        "--tenant-max-schema-bytes", "1GiB", "--log-level", "warn"], env=env)
base = f"http://127.0.0.1:{port}"
try:
    for _ in range(100):
        try:
            urllib.request.urlopen(base + "/health", timeout=1); break
        except Exception:
            time.sleep(0.1)
    start = rss_mib(srv.pid)
    body = ("<schema name=\"{}\">" + "".join(f"<module name=\"m{i}\">x{i}</module>" for i in range(a.modules)) +
            "</schema>")
    peak = start
    for n in range(a.schemas):
        data = body.format(f"s{n}").encode()
        req = urllib.request.Request(f"{base}/v1/schemas/s{n}", data=data, method="PUT",
                                     headers={"Content-Type": "application/xml"})
        urllib.request.urlopen(req, timeout=600).read()
        peak = max(peak, rss_mib(srv.pid))
    for n in range(a.schemas):
        urllib.request.urlopen(urllib.request.Request(f"{base}/v1/schemas/s{n}", method="DELETE"), timeout=60).read()
    after = rss_mib(srv.pid)
    time.sleep(2)
    idle = rss_mib(srv.pid)
    print(f"env={' '.join(a.env) or 'default'} schemas={a.schemas} x {len(body)/1e6:.1f} MB: "
          f"RSS start {start:.0f} MiB, peak {peak:.0f} MiB, after DELETE {after:.0f} MiB, after 2 s idle {idle:.0f} MiB")
finally:
    srv.terminate(); srv.wait(timeout=10)
