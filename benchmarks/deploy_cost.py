"""What the deployment checks cost: the default ``gradsmith check`` run with and without them.

Runs ``python -m gradsmith check --format json`` (the embedded default: examples + catalog)
``--repeat`` times, alternating with ``--no-compat``, each in a fresh process as a user runs
it, and records the wall times (median and spread), the per-check seconds summed over all
rows from one run's JSON, the load before and after, and ``gradsmith.bench.environment()``.
Issue 11's budget: the whole default run under 2 minutes on the 2-core machine.

With ``--suite`` it also times the README's test command (``python -m pytest -q``, once)
against its 15-minute budget.

Usage::

    python benchmarks/deploy_cost.py --repeat 3 --suite
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


def _run(extra: list[str]) -> tuple[float, dict]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "gradsmith", "check", "--format", "json",
                           *extra], capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - started
    return wall, json.loads(done.stdout)


def _check_seconds(doc: dict) -> dict[str, float]:
    """Rows' elapsed summed, and how many rows carry a matrix."""
    rows = doc["results"]
    return {"rows": len(rows), "row_seconds": round(sum(r["elapsed"] for r in rows), 2),
            "with_matrix": sum(1 for r in rows if r["report"] and r["report"].get("compat")),
            "exit_code": doc["summary"]["exit_code"]}


def _suite() -> dict:
    load_before = round(os.getloadavg()[0], 2)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                          capture_output=True, text=True, timeout=3600, cwd=HERE.parent)
    wall = time.perf_counter() - started
    lines = done.stdout.strip().splitlines()
    return {"wall": round(wall, 1), "exit": done.returncode,
            "failed": [ln for ln in lines if ln.startswith("FAILED")],
            "summary": lines[-1].strip("= ") if lines else "", "load_before": load_before,
            "load_after": round(os.getloadavg()[0], 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--suite", action="store_true", help="also time the full test suite")
    args = parser.parse_args()
    from gradsmith.bench import environment
    from gradsmith.bench.report import write_results

    load_before = os.getloadavg()
    walls: dict[str, list[float]] = {"with deployment checks": [], "--no-compat": []}
    last: dict[str, dict] = {}
    for _ in range(args.repeat):
        for label, extra in (("with deployment checks", []), ("--no-compat", ["--no-compat"])):
            wall, doc = _run(extra)
            walls[label].append(round(wall, 2))
            last[label] = _check_seconds(doc)
    suite = _suite() if args.suite else None
    # How the runs were scheduled: on a shared machine they may run niced, single-threaded.
    sched = {"nice": os.nice(0), "omp_num_threads": os.environ.get("OMP_NUM_THREADS")}
    data = {"environment": environment(), "load_before": load_before, "suite": suite,
            "scheduling": sched,
            "load_after": os.getloadavg(), "when": time.strftime("%Y-%m-%d %H:%M"),
            "walls": walls, "median": {k: statistics.median(v) for k, v in walls.items()},
            "rows": last, "budget_seconds": 120}
    md = ["# Cost of the deployment checks (issue 11)", "",
          f"`gradsmith check` (the embedded default, {last['--no-compat']['rows']} rows), "
          f"{args.repeat} fresh runs each, alternating; {data['when']}, load (1/5/15 min) "
          f"before {tuple(round(x, 2) for x in load_before)}, after "
          f"{tuple(round(x, 2) for x in data['load_after'])}; torch "
          f"{data['environment']['torch']}, {data['environment']['cpu_count']} CPUs; nice "
          f"{sched['nice']}, OMP_NUM_THREADS={sched['omp_num_threads'] or 'unset'}.", "",
          "| run | median wall | all runs | rows with a matrix | exit |", "|---|---:|---|---:|---:|"]
    for label, values in walls.items():
        md.append(f"| {label} | {statistics.median(values):.1f} s | {values} | "
                  f"{last[label]['with_matrix']} | {last[label]['exit_code']} |")
    md += ["", f"Budget: {data['budget_seconds']} s for the default run with the deployment "
               "checks."]
    if suite:
        md += ["", f"README test command (`python -m pytest -q`, whole suite): "
                   f"{suite['wall']:.0f} s ({suite['summary']}), load before/after "
                   f"{suite['load_before']} / {suite['load_after']}; budget 900 s."]
        md += [f"- {line}" for line in suite["failed"]]
    write_results(data, "\n".join(md) + "\n", args.out, "deploy_cost")
    print("\n".join(md))


if __name__ == "__main__":
    main()
