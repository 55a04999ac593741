"""Lint time against code size: one generated file of N small Functions, for growing N.

Usage:
    python benchmarks/lint_scaling.py [--sizes 2000 13000] [--repeat 3]
        [--out benchmarks/results/lint_scaling.md]

Each file holds N copies of a small Function (forward saves its inputs, backward returns
two gradients) and a caller using ``.apply``: about 300 bytes per Function. Time per MB
must stay flat when N grows (it grew from 3.1 s/MB at 2,000 Functions to 9.4 s/MB at
13,000 before the garbage collector was paused during analysis and the per-call scans of
GS111 became single passes).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from gradsmith.bench import environment, measure
from gradsmith.bench.report import write_results
from gradsmith.linter import lint

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
            found = []

            def run(path=path, found=found) -> None:
                found[:] = lint(path, config=False)

            stats = measure(run, tuple, repeat=args.repeat, warmup=1).to_dict("s")
            rows.append({"functions": n, "bytes": size, "median_s": stats["median"],
                         "min_s": stats["min"], "max_s": stats["max"],
                         "s_per_mb": stats["median"] / (size / 1e6), "findings": len(found)})
    lines = ["# gradsmith lint time against code size", "",
             f"Command: `python benchmarks/lint_scaling.py --sizes {' '.join(map(str, args.sizes))}"
             f" --repeat {args.repeat}`", "",
             "| Functions | MB | median s (min-max) | s per MB | findings |",
             "|---:|---:|---|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['functions']} | {r['bytes'] / 1e6:.2f} | {r['median_s']:.2f} "
                     f"({r['min_s']:.2f}-{r['max_s']:.2f}) | {r['s_per_mb']:.2f} | {r['findings']} |")
    lines += ["", "## Environment", "", "```json", json.dumps(env, indent=2), "```", ""]
    out = Path(args.out)
    write_results({"rows": rows, "environment": env}, "\n".join(lines), out.parent, out.stem)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
