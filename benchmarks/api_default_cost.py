"""Seconds per Function of ``gradsmith.check(Fn, *inputs)`` in a test suite: the default (the
eager checks) against ``compat=True`` (the deployment matrix too, the default before issue 21).

Each run is a fresh process (as one test file in a fresh pytest worker) that checks the
examples' Functions with registered inputs one after another; runs alternate between the two
settings so load changes hit both. Records the median of the per-Function seconds (first
Function included: it pays the lazy imports, as a suite's first test does) and the load.

Usage::

    python benchmarks/api_default_cost.py --repeat 3          # writes results/
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
_ONE = r"""
import json, sys, time
import torch
import gradsmith
from gradsmith._example import examples_of
from gradsmith.discovery import default_sources, list_candidates, resolve_ref

fns = []
for source in default_sources():
    if source.location != "gradsmith.examples":
        continue
    for cand in list_candidates(source).candidates:
        obj = resolve_ref(cand.ref)
        if examples_of(obj):
            fns.append(obj)
fns = fns[:int(sys.argv[2])]
kw = {"compat": True} if sys.argv[1] == "1" else {}
started = time.perf_counter()
for fn in fns:
    ex = examples_of(fn)[0]
    gradsmith.check(fn, *ex.make_args(), surrogate=ex.surrogate, **{**ex.options, **kw})
print(json.dumps({"n": len(fns), "seconds": time.perf_counter() - started}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--functions", type=int, default=12)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    from gradsmith.bench import environment

    per: dict[str, list[float]] = {"default (eager checks)": [], "compat=True": []}
    load_before = os.getloadavg()[0]
    n = 0
    for _ in range(args.repeat):
        for label, flag in (("default (eager checks)", "0"), ("compat=True", "1")):
            done = subprocess.run([sys.executable, "-c", _ONE, flag, str(args.functions)],
                                  capture_output=True, text=True, timeout=3600, check=True)
            result = json.loads(done.stdout.strip().splitlines()[-1])
            n = result["n"]
            per[label].append(round(result["seconds"] / n, 2))
    load_after = os.getloadavg()[0]
    env = environment()
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    md = ["# `gradsmith.check(Fn, *inputs)` per Function: default vs compat=True (issue 21)", "",
          f"{when}; {n} example Functions per fresh process, {args.repeat} runs each, "
          f"alternating; load (1 min) before {load_before:.1f}, after {load_after:.1f}; torch "
          f"{env['torch']}, {env['cpu_count']} CPUs. `python benchmarks/api_default_cost.py`.",
          "", "| setting | median s per Function | all runs |", "|---|---:|---|"]
    for label, values in per.items():
        md.append(f"| {label} | {statistics.median(values):.2f} | {values} |")
    text = "\n".join(md) + "\n"
    print(text)
    if not args.no_write:
        (HERE / "results" / "api_default_cost.md").write_text(text)
        (HERE / "results" / "api_default_cost.json").write_text(json.dumps(
            {"environment": env, "when": when, "per_function_s": per, "functions": n,
             "load_before": load_before, "load_after": load_after}, indent=1) + "\n")


if __name__ == "__main__":
    main()
