"""The README's first command, ``gradsmith check`` (the embedded default), quiet and under load.

Each run is ``python -m gradsmith check --format json`` in a fresh process, as a user runs it.
``--load N`` starts N busy-loop processes first (one process group this script creates and
kills by its id afterwards), so a run sees what a laptop building something or a shared CI
runner gives it. Recorded per run: the wall time, the load average (1 min) before and after,
the exit code, failed rows, rows that timed out, ``deployment-timeout`` warnings, and rows
that lost their Inputs column or compatibility matrix (what a start-up counted against the time
limit used to cost the first Function of each worker). Issue 21's targets: under 60 s on a
quiet 2-core machine, and passing at load 10.

Usage::

    python benchmarks/default_check_load.py --load 0 --load 10      # writes results/
    python benchmarks/default_check_load.py --load 10 --no-write    # quick look
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
_BUSY = "while True:\n    pass\n"


def start_load(n: int) -> subprocess.Popen | None:
    """N busy loops in one new process group (its leader is a shell that waits for them)."""
    if n <= 0:
        return None
    loops = " ".join(f"'{sys.executable}' -c '{_BUSY}' &" for _ in range(n))
    return subprocess.Popen(["/bin/sh", "-c", f"{loops} wait"], start_new_session=True)


def stop_load(proc: subprocess.Popen | None) -> None:
    if proc is None:
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the group this script created, by its id
    except ProcessLookupError:
        pass
    proc.wait()


def one_run(load: int, settle: float, extra: list[str]) -> dict:
    busy = start_load(load)
    try:
        if busy is not None:
            time.sleep(settle)  # let the 1-minute load average climb towards N
        before = os.getloadavg()[0]
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "gradsmith", "check", "--format", "json",
                               *extra], capture_output=True, text=True, timeout=3600)
        wall = time.perf_counter() - started
        after = os.getloadavg()[0]
    finally:
        stop_load(busy)
    doc = json.loads(done.stdout)
    rows = doc["results"]

    def codes(r: dict) -> list[str]:
        return [f["code"] for f in (r.get("report") or {}).get("findings", [])]

    return {
        "busy_loops": load, "extra": extra, "wall_s": round(wall, 1),
        "load1_before": round(before, 2), "load1_after": round(after, 2),
        "exit": done.returncode, "rows": len(rows),
        "failed": [r["name"] for r in rows if r["verdict"] == "fail"],
        "timed_out": [r["name"] for r in rows if r["error"] == "timeout"],
        "deployment_timeouts": [r["name"] for r in rows if "deployment-timeout" in codes(r)],
        "without_inputs": [r["name"] for r in rows if r["verdict"] != "skip" and not r["inputs"]],
        "without_matrix": [r["name"] for r in rows if r["verdict"] != "skip" and not (
            r.get("report") or {}).get("compat")],
        "max_row_s": max((r["elapsed"] for r in rows), default=0.0),
    }


def markdown(runs: list[dict], env: dict, when: str) -> str:
    md = ["# `gradsmith check` (the embedded default) quiet and under load (issue 21)", "",
          f"{when}; torch {env['torch']}, {env['cpu_count']} CPUs. Load: N busy-loop processes "
          "started by the benchmark (one process group, killed afterwards), on top of "
          "whatever else the machine ran (the shared machine's own load is in the load "
          "columns). `python benchmarks/default_check_load.py --load 0 --load 10`.", "",
          "| busy loops | load 1 min before / after | wall | exit | rows | failed | timed out "
          "| deployment-timeout | rows without Inputs / matrix | slowest row |",
          "|---:|---|---:|---:|---:|---:|---:|---:|---|---:|"]
    for r in runs:
        md.append(f"| {r['busy_loops']} | {r['load1_before']} / {r['load1_after']} | "
                  f"{r['wall_s']:.0f} s | {r['exit']} | {r['rows']} | {len(r['failed'])} | "
                  f"{len(r['timed_out'])} | {len(r['deployment_timeouts'])} | "
                  f"{len(r['without_inputs'])} / {len(r['without_matrix'])} | "
                  f"{r['max_row_s']:.1f} s |")
    names = sorted({n for r in runs for n in r["failed"] + r["deployment_timeouts"]})
    if names:
        md += ["", "Rows that failed or lost a deployment check: " + ", ".join(names)]
    return "\n".join(md) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--load", type=int, action="append",
                        help="busy-loop processes during a run (repeatable; default 0 and 10)")
    parser.add_argument("--settle", type=float, default=20.0,
                        help="seconds the busy loops run before the check starts")
    parser.add_argument("--label", default="", help="appended to the result file names")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("extra", nargs="*", help="more arguments for gradsmith check")
    args = parser.parse_args()
    from gradsmith.bench import environment

    env = environment()
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    runs = []
    for load in args.load or [0, 10]:
        runs.append(one_run(load, args.settle, args.extra))
        print(json.dumps(runs[-1]), flush=True)
    text = markdown(runs, env, when)
    print(text)
    if not args.no_write:
        out = HERE / "results"
        name = f"default_check_load{args.label}"
        (out / f"{name}.json").write_text(json.dumps(
            {"environment": env, "when": when, "runs": runs}, indent=1) + "\n")
        (out / f"{name}.md").write_text(text)


if __name__ == "__main__":
    main()
