"""Lint time against code size: one generated file of N small Functions, for growing N.

Usage:
    python benchmarks/lint_scaling.py [--sizes 2000 13000] [--repeat 3]
        [--out benchmarks/results/lint_scaling.md]

Each file holds N copies of a small Function (forward saves its inputs, backward returns
two gradients) and a caller using ``.apply``: about 300 bytes per Function. Each size is
linted by ``gradsmith lint FILE`` in a fresh process, ``--repeat`` times; the child's CPU
time (user + system, robust to other load) and wall time are recorded (medians). Time per
MB must stay flat when N grows (it grew from 3.1 s/MB at 2,000 Functions to 9.4 s/MB at
13,000 before the garbage collector was paused during analysis and the per-call scans of
GS111 became single passes).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gradsmith.bench import environment
from gradsmith.bench.report import write_results

TEMPLATE = '''
class Fn{i}(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w + {i}

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w, g * x


def use{i}(x, w):
    return Fn{i}.apply(x, w)
'''


def generate(path: Path, n: int) -> int:
    text = "import torch\n" + "".join(TEMPLATE.replace("{i}", str(i)) for i in range(n))
    path.write_text(text)
    return len(text.encode())


def _child_times(cmd: list[str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one run of ``cmd`` in a child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 13000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default="benchmarks/results/lint_scaling.md")
    args = parser.parse_args()
    env = environment()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            path = Path(tmp) / f"functions_{n}.py"
            size = generate(path, n)
            samples = [_child_times([sys.executable, "-m", "gradsmith", "lint", str(path)])
                       for _ in range(args.repeat)]
            cpu = statistics.median(c for c, _ in samples)
            rows.append({"functions": n, "bytes": size, "cpu_s": cpu,
                         "cpu_min_s": min(c for c, _ in samples),
                         "cpu_max_s": max(c for c, _ in samples),
                         "wall_s": statistics.median(w for _, w in samples),
                         "cpu_s_per_mb": cpu / (size / 1e6)})
    env["load_average_1min_end"] = round(os.getloadavg()[0], 2)
    lines = ["# gradsmith lint time against code size", "",
             f"Command: `python benchmarks/lint_scaling.py --sizes {' '.join(map(str, args.sizes))}"
             f" --repeat {args.repeat}`", "",
             "| Functions | MB | CPU s, median (min-max) | wall s | CPU s per MB |",
             "|---:|---:|---|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['functions']} | {r['bytes'] / 1e6:.2f} | {r['cpu_s']:.2f} "
                     f"({r['cpu_min_s']:.2f}-{r['cpu_max_s']:.2f}) | {r['wall_s']:.2f} | "
                     f"{r['cpu_s_per_mb']:.2f} |")
    lines += ["", "## Environment", "", "```json", json.dumps(env, indent=2), "```", ""]
    out = Path(args.out)
    write_results({"rows": rows, "environment": env}, "\n".join(lines), out.parent, out.stem)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
