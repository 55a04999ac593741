"""Cost of isolation in ``gradsmith check``: in-process vs the worker (a fresh fork per task), 1 and 2 jobs.

Each configuration runs ``python -m gradsmith check TARGET --format json`` in a fresh process
(so every run pays its own imports, as a user does), interleaved round-robin so that load
changes on the machine hit all configurations alike, with one warm-up round discarded.
Reports median, min and max wall time per configuration, and the per-row check time summed
from the JSON (the verifier's own work), so the overhead is the difference.

Usage:
    python benchmarks/cli_isolation.py [--target gradsmith.examples] [--repeats 3]
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

from gradsmith.bench import environment
from gradsmith.bench.report import write_results

CONFIGS = {
    "in-process (--no-isolate)": ["--no-isolate"],
    "isolated, --jobs 1": ["--jobs", "1"],
    "isolated, --jobs 2": ["--jobs", "2"],
}


def _run(target: str, extra: list[str]) -> tuple[float, float, int]:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "gradsmith", "check", target, "--format",
                           "json", *extra], capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    doc = json.loads(proc.stdout)
    return wall, sum(r["elapsed"] for r in doc["results"]), len(doc["results"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="gradsmith.examples")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results"))
    args = parser.parse_args()
    env = environment()  # its load average is the one at the start
    walls: dict[str, list[float]] = {name: [] for name in CONFIGS}
    work: dict[str, list[float]] = {name: [] for name in CONFIGS}
    rows = 0
    for round_index in range(args.repeats + 1):
        for name, extra in CONFIGS.items():
            wall, checked, rows = _run(args.target, extra)
            if round_index:  # round 0 warms the OS file cache
                walls[name].append(wall)
                work[name].append(checked)
    env["load_average_1min_at_end"] = round(os.getloadavg()[0], 2)
    results = {name: {"median_s": statistics.median(w), "min_s": min(w), "max_s": max(w),
                      "median_sum_of_check_times_s": statistics.median(work[name]),
                      "runs": w} for name, w in walls.items()}
    doc = {"target": args.target, "rows": rows, "repeats": args.repeats,
           "environment": env, "results": results}
    lines = [f"# gradsmith check: isolation overhead ({args.target}, {rows} rows)", "",
             f"Environment: Python {env['python']}, torch {env['torch']}, {env['cpu']}, "
             f"{env['cpu_count']} CPUs, {env['platform']}, recorded {env['date_utc']}; 1-minute "
             f"load average {env['load_average_1min']} at start, "
             f"{env['load_average_1min_at_end']} at end (above about 1, other processes shared "
             "the CPUs).", "",
             "| configuration | median wall (s) | min | max | sum of check times (s) |",
             "|---|---|---|---|---|"]
    for name, r in results.items():
        lines.append(f"| {name} | {r['median_s']:.1f} | {r['min_s']:.1f} | {r['max_s']:.1f} | "
                     f"{r['median_sum_of_check_times_s']:.1f} |")
    write_results(doc, "\n".join(lines) + "\n", args.out, "cli_isolation")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
