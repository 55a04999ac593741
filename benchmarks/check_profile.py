"""Where ``gradsmith check``'s time per Function goes (issue 18: the eager verdict under 0.5 s).

Runs ``gradsmith check FILE::Fn ...`` in this process (``--no-isolate``), after the warm-up
a worker server pays before its first task (``gradsmith.checkrun.task.warm_up``: torch.func,
Dynamo, the first compile and export), under ``cProfile``, and splits each file's time into:

- ``process``: start-up before the first task (``import torch``, gradsmith, the warm-up),
  measured once in this process;
- ``import``: importing the user's module (``discovery.collect.resolve_ref``);
- ``synthesis``: building inputs (``discovery.synthesize.synthesize``);
- ``check:<name>``: each check, from the reports' own timings (summed over input sets);
- ``repro``: capturing the exact inputs (``repro.capture.capture_args``);
- ``other``: the rest of the rows' wall time (listing, sets, merging, JSON).

The row time the corpus runners score (``row["elapsed"]``) is synthesis plus the checks plus
repro capture; import and process start-up are outside it.

Usage (corpus 7's development runs; the projects stay outside the repository)::

    python benchmarks/check_profile.py --name check_corpus7b --half heldout \\
        --corpus /tmp/checkcorpus7 --deps /tmp/cc7deps_b:/tmp/cc7deps --out /tmp/t3/prof.json

or on files of one's own: ``python benchmarks/check_profile.py tests/fixtures/x.py::Fn``.

``--cases`` instead times ``gradsmith.check(fn, compat=True)`` on the deployment test cases
(``tests/checker/deploy_cases.py``: graph breaks, compile-only bugs, export, autocast, ...) in
this process after the same warm-up, three times each, with wall and process CPU seconds per
Function (CPU time moves less with the machine's load than wall time); run it once per
gradsmith tree (``PYTHONPATH=TREE/src``), alternating, to compare two versions.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import os
import pstats
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
STAGES = {
    "import": ("collect.py", "resolve_ref"),
    "synthesis": ("synthesize.py", "synthesize"),
    "repro": ("capture.py", "capture_args"),
}


def _cumulative(stats: pstats.Stats, where: tuple[str, str]) -> float:
    """Cumulative seconds of one function (outermost calls only: cProfile's cumtime)."""
    total = 0.0
    for (file, _, name), (_, _, _, cum, _) in stats.stats.items():  # type: ignore[attr-defined]
        if name == where[1] and file.endswith(where[0]):
            total += cum
    return total


def profile_targets(targets: list[str]) -> dict:
    """Check ``targets`` (one file's ``FILE::Fn``) in this process; the breakdown."""
    from gradsmith.cli import main as cli_main

    out = io.StringIO()
    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        cli_main(["check", *targets, "--no-isolate", "--format", "json"])
    profiler.disable()
    wall = time.perf_counter() - started
    stats = pstats.Stats(profiler)
    try:
        rows = json.loads(out.getvalue()).get("results", [])
    except json.JSONDecodeError:
        rows = []
    split: Counter = Counter()
    for stage, where in STAGES.items():
        split[stage] = _cumulative(stats, where)
    checked = 0
    for row in rows:
        timings = (row.get("report") or {}).get("timings") or {}
        checked += row.get("verdict") in ("pass", "fail")
        for name, seconds in timings.items():
            split[f"check:{name}"] += seconds
    split["other"] = max(0.0, wall - sum(split.values()))
    return {"targets": targets, "wall": round(wall, 3), "rows": len(rows), "checked": checked,
            "elapsed": round(sum(r.get("elapsed") or 0.0 for r in rows), 3),
            "split": {k: round(v, 4) for k, v in split.items()},
            "verdicts": [(r.get("name", "").rsplit("::", 1)[-1], r.get("verdict"),
                          r.get("elapsed")) for r in rows]}


def time_cases(repeat: int) -> dict:
    """Wall and CPU seconds of ``check(fn, compat=True)`` per deployment test case."""
    import torch

    sys.path.insert(0, str(HERE.parent / "tests" / "checker"))
    import deploy_cases

    from gradsmith._example import examples_of
    from gradsmith.checker import check

    names = [n for n, v in vars(deploy_cases).items()
             if isinstance(v, type) and issubclass(v, torch.autograd.Function)
             and v.__module__ == deploy_cases.__name__ and not n.startswith("_")
             and examples_of(v)]
    out: dict = {}
    for _ in range(repeat):
        for name in names:
            wall, cpu = time.perf_counter(), time.process_time()
            report = check(getattr(deploy_cases, name), compat=True)
            row = out.setdefault(name, {"wall": [], "cpu": [], "compile": [], "codes": None})
            row["wall"].append(round(time.perf_counter() - wall, 4))
            row["cpu"].append(round(time.process_time() - cpu, 4))
            row["compile"].append(round(report.timings.get("compile", 0.0), 4))
            row["codes"] = sorted(report.codes("error") | report.codes("warning"))
    return out


def _corpus_targets(args: argparse.Namespace) -> list[list[str]]:
    sys.path.insert(0, str(HERE))
    from check_corpus3 import judged_split

    split = judged_split(args.half, args.name)
    files = []
    for project in split[args.half]:
        if args.project and project not in args.project:
            continue
        by_file = defaultdict(list)
        for fn in split["projects"][project]["functions"]:
            by_file[fn["path"]].append(fn["function"])
        for path, names in by_file.items():
            files.append([f"{args.corpus / project / path}::{n}" for n in dict.fromkeys(names)])
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("targets", nargs="*", help="FILE::Fn targets (instead of a corpus)")
    parser.add_argument("--name", help="corpus files results/NAME_split.json, _judgements.json")
    parser.add_argument("--half", choices=("dev", "heldout"), default="dev")
    parser.add_argument("--corpus", type=Path, default=Path("/tmp/checkcorpus7"))
    parser.add_argument("--deps", default="", help="what the projects import (sys.path)")
    parser.add_argument("--project", action="append")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--cases", type=int, default=0,
                        help="time the deployment test cases this many times instead")
    args = parser.parse_args()
    started = time.perf_counter()
    import torch  # noqa: F401  (process start-up: what a worker server pays once)

    from gradsmith.checkrun.task import _check_a_tiny_function

    _check_a_tiny_function(deploy=True)
    process = time.perf_counter() - started
    if args.cases:
        cases = time_cases(args.cases)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"process_startup": process, "cases": cases}, indent=1))
        return
    files = _corpus_targets(args) if args.name else [args.targets]
    results = []
    for targets in files:
        project = Path(targets[0].split("::")[0]).resolve()
        extra = [p for p in args.deps.split(os.pathsep) if p]
        if args.name:
            extra.append(str(args.corpus / targets[0][len(str(args.corpus)) + 1:].split("/")[0]))
        sys.path[:0] = extra
        try:
            results.append(profile_targets(targets))
        finally:
            del sys.path[:len(extra)]
        print(f"{project.name}: {results[-1]['wall']:.2f} s, {results[-1]['verdicts']}",
              file=sys.stderr, flush=True)
    total: Counter = Counter()
    for r in results:
        total.update(r["split"])
    checked = sum(r["checked"] for r in results)
    summary = {"process_startup": round(process, 3), "files": len(results),
               "checked": checked, "rows": sum(r["rows"] for r in results),
               "row_elapsed_per_checked": round(sum(r["elapsed"] for r in results)
                                                / max(checked, 1), 3),
               "per_checked_function": {k: round(v / max(checked, 1), 4)
                                        for k, v in total.most_common()}}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"summary": summary, "files": results}, indent=1))
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
