"""What running each task in a fresh fork costs, against reusing one worker (issue 12).

A verdict must not depend on what ran before it, so ``gradsmith check`` runs every task in a
fresh fork of a warm worker server (plus a keeper process that cleans up what the task
started) instead of reusing one worker process. This measures the price per task: ``N`` tiny
tasks (import a one-Function file and list it; check that Function with only the
``structure`` check) through :class:`gradsmith.isolation.pool.WorkerPool` with one job, and
the same tasks in-process (``run_task``), for this checkout and, with ``--before SRC``, another
gradsmith source tree (the persistent worker of the commit before). Each configuration runs in
a fresh interpreter; rounds are interleaved so load changes hit them alike; the worker start-up
is excluded (the pool is started and warmed by one task first).

Usage:
    python benchmarks/isolation_overhead.py [--before /path/to/old/src] [--tasks 40]
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

from gradsmith.bench import environment
from gradsmith.bench.report import write_results

ONE = '''
import torch


class Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 3 * x * x * grad
'''

# Runs in a fresh interpreter with the gradsmith under test first on sys.path.
PROBE = r'''
import json, sys, time
from gradsmith.discovery import list_candidates, resolve_targets
from gradsmith.isolation.pool import WorkerPool
try:
    from gradsmith.checkrun.task import KIND as CHECK
    from gradsmith.discovery.task import KIND as LIST
    from gradsmith.isolation.task import run_task
except ImportError:  # a checkout from before the runner knew tasks by their module (issue 20)
    from gradsmith.isolation.tasks import run_task
    CHECK, LIST = "check", "list"

path, n, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
(source,) = resolve_targets([path])
(candidate,) = list_candidates(source).candidates
tasks = {"list": [(LIST, source)] * n,
         "check": [(CHECK, candidate, None, {"checks": ["structure"]}, False)] * n}
out = {}
if mode == "in-process":
    run_task(tasks["check"][0])  # warm: lazy imports
    for kind, batch in tasks.items():
        started = time.perf_counter()
        for task in batch:
            run_task(task)
        out[kind] = (time.perf_counter() - started) / n
else:
    with WorkerPool(jobs=1, timeout=120) as pool:
        pool.start()
        list(pool.run(tasks["check"][:1]))  # warm: start-up excluded
        for kind, batch in tasks.items():
            started = time.perf_counter()
            outcomes = list(pool.run(batch))
            out[kind] = (time.perf_counter() - started) / n
            assert all(o.kind == "ok" for o in outcomes), outcomes[0]
print(json.dumps(out))
'''


def measure(src: str, mode: str, path: Path, n: int) -> dict:
    env = dict(os.environ, PYTHONPATH=src)
    proc = subprocess.run([sys.executable, "-c", PROBE, str(path), str(n), mode], env=env,
                          capture_output=True, text=True, timeout=900, check=False)
    if proc.returncode:
        raise SystemExit(f"{src} {mode} failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", metavar="SRC", help="another gradsmith source tree")
    parser.add_argument("--before-label", default="before")
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results"))
    args = parser.parse_args()
    here = str(Path(__file__).resolve().parents[1] / "src")
    configs = {"after: fresh fork per task": (here, "pool"),
               "after: in-process": (here, "in-process")}
    if args.before:
        configs[f"{args.before_label}: reused worker"] = (str(Path(args.before).resolve()),
                                                          "pool")
    env_info = environment()
    runs: dict[str, list[dict]] = {name: [] for name in configs}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "one.py")
        path.write_text(ONE)
        for _ in range(args.repeats):
            for name, (src, mode) in configs.items():
                runs[name].append(measure(src, mode, path, args.tasks))
    env_info["load_average_1min_at_end"] = round(os.getloadavg()[0], 2)
    table = {name: {kind: round(1000 * statistics.median(r[kind] for r in rs), 2)
                    for kind in ("list", "check")} for name, rs in runs.items()}
    doc = {"tasks": args.tasks, "repeats": args.repeats, "environment": env_info,
           "ms_per_task_median": table, "runs_s_per_task": runs}
    lines = ["# Isolation: the cost per task of a fresh fork", "",
             f"Environment: Python {env_info['python']}, torch {env_info['torch']}, "
             f"{env_info['cpu']}, {env_info['cpu_count']} CPUs, {env_info['platform']}, "
             f"recorded {env_info['date_utc']}; 1-minute load average "
             f"{env_info['load_average_1min']} at start, "
             f"{env_info['load_average_1min_at_end']} at end. {args.tasks} tasks in a row, "
             f"median of {args.repeats} interleaved runs, worker start-up excluded.", "",
             "| configuration | import + list a one-Function file (ms/task) | "
             "check it, structure only (ms/task) |", "|---|---|---|"]
    for name, row in table.items():
        lines.append(f"| {name} | {row['list']:.1f} | {row['check']:.1f} |")
    write_results(doc, "\n".join(lines) + "\n", args.out, "isolation_overhead")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
