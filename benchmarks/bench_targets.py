"""Measure the issue-14 time targets in several fresh processes and record them.

    python benchmarks/bench_targets.py                  # 5 processes at full threads, 5 at 1
    python benchmarks/bench_targets.py --processes 3 --threads 2

Targets: ``fused_add_relu`` <= 1.2x ``relu(x + y)`` and attention with a dense bias <= 1.0x
SDPA, eager, at the machine's full thread count and at 1 thread. Each process runs
``gradsmith bench fused_add_relu attention-bias --mode eager --threads T --repeat 25
--warmup 3`` (interleaved runs against the reference in that process). One process is not
enough on this machine: the reference's own time moves between processes (how freshly freed
memory is reused), so the record keeps every process's ratio and their range, with the
environment and the load before and after. Writes ``results/bench_targets_t{T}.md`` and
``.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
TARGETS = {"fused_add_relu": 1.2, "attention-bias": 1.0}
COMMAND = ("gradsmith bench fused_add_relu attention-bias --mode eager --threads {t} "
           "--repeat 25 --warmup 3")


def one_process(threads: int) -> dict:
    """One ``gradsmith bench`` run in a fresh interpreter; its JSON report."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.json"
        cmd = [sys.executable, "-m", "gradsmith", *COMMAND.format(t=threads).split()[1:],
               "--json", str(out)]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=600)
        return json.loads(out.read_text())


def _row(report: dict, op: str) -> dict:
    return next(r for r in report["results"] if r["op"] == op)


def summary(reports: list[dict]) -> dict:
    """Per target: every process's ratio, their median and range, and whether it is met."""
    out = {}
    for op, target in TARGETS.items():
        ratios = [_row(r, op)["time_ratio"] for r in reports]
        out[op] = {"target": target, "ratios": ratios, "median": statistics.median(ratios),
                   "min": min(ratios), "max": max(ratios),
                   "met_in": sum(x <= target for x in ratios),
                   "ref_ms": [_row(r, op)["time_ms"]["reference"]["median"] for r in reports],
                   "op_ms": [_row(r, op)["time_ms"]["op"]["median"] for r in reports]}
    return out


def render(threads: int, reports: list[dict], load: tuple[float, float]) -> str:
    from gradsmith.bench.report import markdown

    env = reports[0]["environment"]
    s = summary(reports)
    lines = [f"# Issue-14 targets, {threads} thread(s): `{COMMAND.format(t=threads)}`, "
             f"{len(reports)} processes", "",
             f"torch {env['torch']}, {env['cpu']} ({env['cpu_count']} CPUs), {threads} torch "
             f"threads, measured {env['date_utc']}, 1-minute load average {load[0]:.2f} -> "
             f"{load[1]:.2f}. Reproduce: `python benchmarks/bench_targets.py --threads "
             f"{threads}`.", "",
             "| target | limit | median of processes | range | met in | reference ms "
             "(per process) |", "|---|---|---|---|---|---|"]
    for op, t in s.items():
        lines.append(f"| {op} | <= {t['target']}x | {t['median']:.2f}x | "
                     f"{t['min']:.2f}-{t['max']:.2f}x | {t['met_in']} of {len(reports)} | "
                     f"{', '.join(f'{v:.2f}' for v in t['ref_ms'])} |")
    lines += ["", "Every process's ratio, in order: " + "; ".join(
        f"{op} " + ", ".join(f"{x:.2f}" for x in t["ratios"]) for op, t in s.items()), "",
        "The first process's table:", "", markdown(reports[0]), ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="*", default=None,
                        help="thread counts (default: all CPUs, then 1)")
    parser.add_argument("--processes", type=int, default=5)
    ns = parser.parse_args()
    for threads in ns.threads or [os.cpu_count() or 1, 1]:
        before = os.getloadavg()[0]
        reports = []
        for i in range(ns.processes):
            print(f"[{threads} threads] process {i + 1} of {ns.processes}", file=sys.stderr,
                  flush=True)
            reports.append(one_process(threads))
        load = (before, os.getloadavg()[0])
        stem = RESULTS / f"bench_targets_t{threads}"
        stem.with_suffix(".json").write_text(json.dumps(
            {"summary": summary(reports), "load_average_1min": load, "reports": reports},
            indent=1) + "\n")
        stem.with_suffix(".md").write_text(render(threads, reports, load))
        for op, t in summary(reports).items():
            print(f"{threads} threads: {op} {t['median']:.2f}x (range {t['min']:.2f}-"
                  f"{t['max']:.2f}x), target <= {t['target']}x met in {t['met_in']} of "
                  f"{len(reports)}")


if __name__ == "__main__":
    main()
