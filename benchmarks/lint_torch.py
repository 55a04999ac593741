"""Lint the whole installed torch package: time, Functions found, findings by code.

Usage:
    python benchmarks/lint_torch.py [--repeat 3] [--out benchmarks/results/lint_torch.md]

Each repetition is a full, cold-cache-free run in this process (files are re-read and
re-parsed every time; nothing is cached between runs). Reports the median and spread of the
wall time, the environment, the number of discovered autograd.Function subclasses, the
findings by code and every error-level finding (reviewed in docs/lint.md).
"""

from __future__ import annotations

import argparse
import json
import os
from collections import Counter
from pathlib import Path

import torch

from gradsmith.bench import environment, measure
from gradsmith.bench.report import write_results
from gradsmith.linter import _engine, lint
from gradsmith.linter._registry import RULES


def count_functions(root: str) -> tuple[int, int, int]:
    """(Functions discovered, files seen, files parsed) in one analysis of ``root``."""
    raws = _engine.iter_files([root])
    seen: dict[str, int] = {}
    original = _engine.Index

    class Counting(original):
        def discover(self):
            found = super().discover()
            seen["functions"], seen["parsed"] = len(found), len(self.by_source)
            return found

    _engine.Index = Counting
    try:
        _engine.analyse(raws)
    finally:
        _engine.Index = original
    return seen["functions"], len(raws), seen["parsed"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default="benchmarks/results/lint_torch.md")
    args = parser.parse_args()
    root = os.path.dirname(torch.__file__)
    env = environment()  # before the runs: its load average is the start's
    findings = []

    def run() -> None:
        findings[:] = lint(root, config=False)

    # 1 warm-up run (imports, page cache), then the timed ones
    stats = measure(run, tuple, repeat=args.repeat, warmup=1).to_dict("s")
    functions, files, parsed = count_functions(root)
    by_code = Counter(f.code for f in findings)
    result = {
        "median_s": stats["median"], "min_s": stats["min"], "max_s": stats["max"],
        "runs": stats["runs"], "files": files, "files_parsed": parsed, "functions": functions,
        "findings": dict(sorted(by_code.items())), "environment": env,
    }
    lines = [
        "# gradsmith lint on the installed torch package", "",
        f"Command: `python benchmarks/lint_torch.py --repeat {args.repeat}`", "",
        "| metric | value |", "|---|---|",
        f"| wall time, median of {stats['runs']} runs (after 1 warm-up) | {result['median_s']:.2f} s |",
        f"| spread (min - max) | {result['min_s']:.2f} - {result['max_s']:.2f} s |",
        f"| .py files under torch/ | {files} |",
        f"| files parsed (text pre-filter, see docs/lint.md) | {parsed} |",
        f"| autograd.Function subclasses found | {functions} |",
        f"| internal errors (GS003) | {by_code.get('GS003', 0)} |", "",
        "## Findings by code", "", "| code | severity | count |", "|---|---|---|",
        *[f"| {c} | {RULES[c].severity} | {n} |" for c, n in sorted(by_code.items())], "",
        "## Error-level findings (each reviewed in docs/lint.md)", "",
        *[f"- `{Path(f.path).relative_to(Path(root).parent).as_posix()}:{f.line}` {f.code}: "
          f"{f.message.split('. ')[0]}" for f in findings if f.severity == "error"], "",
        "## Environment", "", "```json", json.dumps(env, indent=2), "```", "",
    ]
    out = Path(args.out)
    write_results(result, "\n".join(lines), out.parent, out.stem)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
