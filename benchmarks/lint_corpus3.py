"""`gradsmith lint` on corpus 3: 18 repositories no earlier round used, judged by hand first.

Usage:
    python benchmarks/lint_corpus3.py --half dev --out /tmp/lintcorpus3/dev
    python benchmarks/lint_corpus3.py --half heldout   # once, at the end, by the lead

The repositories, pinned commits and the dev/held-out split are in
``benchmarks/results/lint_corpus3_split.json`` (committed before any judging or lint run).
The problems found by reading every held-out Function by hand, and the Functions judged
correct, are in ``benchmarks/results/lint_corpus3_judgements.json`` (a list of {repo, commit,
path, line, function, problem, confirmed_by}; ``problem`` is null for a Function judged
correct). Third-party code never enters this repository: each repository's ``.py`` files at
its commit are extracted from the bare mirror to ``WORK/owner+name`` (see
``lint_heldout.extract``).

Each tree is linted through the command line a user runs, ``gradsmith lint --format json
--exit-zero TREE``, in a fresh process, ``--repeat`` times; the median wall time is recorded
with the files and bytes linted. The report lists:

- every error-level finding, with an empty "judgement" column to fill in by reading the code;
- recall: each hand-found problem counts as reported when a finding of any severity lies in
  the same file within ``--window`` lines of it (or inside its ``lines`` span when the
  judgement gives one);
- crashes: a non-zero exit other than 1, output that is not JSON, a traceback on stderr or a
  GS003 internal-error finding;
- seconds per MB for each repository and overall, less the time the same command takes on an
  empty directory (process start and imports), to see that time grows linearly with size.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from lint_heldout import extract  # noqa: E402  (a sibling script, not a package)

RESULTS = Path(__file__).parent / "results"
SPLIT = RESULTS / "lint_corpus3_split.json"
JUDGEMENTS = RESULTS / "lint_corpus3_judgements.json"
CRASH_CODES = {"GS003"}


def tree_size(root: Path) -> tuple[int, int]:
    """Number of ``.py`` files under ``root`` and their total size in bytes."""
    files = [p for p in root.rglob("*.py") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def lint_tree(root: Path, repeat: int, timeout: float) -> dict:
    """Run ``gradsmith lint --format json`` on ``root``; findings, crash signs and timings."""
    command = [sys.executable, "-m", "gradsmith", "lint", "--format", "json", "--exit-zero",
               str(root)]
    times, proc = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        try:
            proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"crash": f"timed out after {timeout:.0f}s", "findings": [],
                    "time_s": None, "times_s": times}
        times.append(time.perf_counter() - start)
    crash = None
    try:
        raw = json.loads(proc.stdout or "[]")
    except json.JSONDecodeError as exc:
        raw, crash = [], f"output is not JSON ({exc}); stderr tail: {proc.stderr[-300:]!r}"
    if proc.returncode not in (0, 1):
        crash = f"exit status {proc.returncode}; stderr tail: {proc.stderr[-300:]!r}"
    elif "Traceback (most recent call last)" in proc.stderr:
        crash = f"traceback on stderr: {proc.stderr[-300:]!r}"
    findings = [
        {"path": Path(f["path"]).resolve().relative_to(root.resolve()).as_posix(),
         "line": f["line"], "code": f["code"], "severity": f["severity"],
         "message": f["message"]}
        for f in raw
    ]
    findings.sort(key=lambda f: (f["path"], f["line"], f["code"]))
    internal = [f for f in findings if f["code"] in CRASH_CODES]
    if internal and crash is None:
        crash = f"{len(internal)} internal-error finding(s), first at " \
                f"{internal[0]['path']}:{internal[0]['line']}"
    return {"crash": crash, "findings": findings, "time_s": statistics.median(times),
            "times_s": times}


def startup_time(repeat: int, timeout: float) -> float:
    """Median wall time of the same command on an empty directory (process start, imports)."""
    with tempfile.TemporaryDirectory() as empty:
        return lint_tree(Path(empty), repeat, timeout)["time_s"] or 0.0


def match(problem: dict, findings: list[dict], window: int) -> list[dict]:
    """Findings of any severity that report ``problem``: same file, nearby line."""
    low, high = problem.get("lines") or (problem["line"] - window, problem["line"] + window)
    return [f for f in findings if f["path"] == problem["path"] and low <= f["line"] <= high]


def render_md(report: dict) -> str:
    """The report as Markdown: per-repository table, errors to judge, recall."""
    out = [f"# gradsmith lint on corpus 3, {report['half']} half", "",
           f"Command: `{report['command']}`; gradsmith {report['gradsmith']}, "
           f"median of {report['repeat']} runs per repository, fresh process each run; "
           f"net s/MB subtracts {report['summary']['startup_s']:.2f} s, the median time of "
           f"the same command on an empty directory.", "",
           "| repository | files | MB | Functions | s | net s/MB | errors | warnings | info | crash |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in report["repos"]:
        sev = Counter(f["severity"] for f in r["findings"])
        mb = r["bytes"] / 1e6
        secs = "-" if r["time_s"] is None else f"{r['time_s']:.2f}"
        per = "-" if r.get("net_s_per_mb") is None else f"{r['net_s_per_mb']:.2f}"
        out.append(f"| {r['repo']} | {r['files']} | {mb:.2f} | {r['functions']} | {secs} | "
                   f"{per} | {sev['error']} | {sev['warning']} | {sev['info']} | "
                   f"{r['crash'] or 'no'} |")
    s = report["summary"]
    out += ["", f"Total: {s['files']} files, {s['mb']:.2f} MB, {s['functions']} Functions, "
            f"{s['seconds']:.1f} s net ({s['seconds_per_mb']:.2f} s/MB; per repository "
            f"{s['seconds_per_mb_min']:.2f} to {s['seconds_per_mb_max']:.2f}), "
            f"{s['crashes']} crash(es).", "",
            "## Error-level findings (judge each by reading the code)", "",
            "| repository | path:line | code | message | judgement |", "|---|---|---|---|---|"]
    for r in report["repos"]:
        for f in r["findings"]:
            if f["severity"] == "error":
                message = f["message"].replace("|", "\\|").replace("\n", " ")
                out.append(f"| {r['repo']} | {f['path']}:{f['line']} | {f['code']} | "
                           f"{message} |  |")
    rec = report["recall"]
    out += ["", f"## Recall: {rec['reported']} of {rec['problems']} problems found by hand "
            f"reported at some severity ({rec['percent']:.0f}%)", "",
            f"Judged by hand before any run: {rec['functions_read']} Functions and call sites; a "
            f"finding matches a problem in the same file within {rec['window']} lines of it, or "
            f"inside the forward/backward span the judgement gives for whole-method problems "
            f"(check that the matched code is about the problem).", "",
            "| class | reported | problems |", "|---|---:|---:|"]
    out += [f"| {k} | {v['reported']} | {v['problems']} |" for k, v in rec["by_class"].items()]
    out += ["", "| repository | path:line | Function | problem | reported by |",
            "|---|---|---|---|---|"]
    for p in rec["items"]:
        by = ", ".join(f"{f['code']} ({f['severity']}) line {f['line']}" for f in p["matched"])
        out.append(f"| {p['repo']} | {p['path']}:{p['line']} | {p['function']} | "
                   f"{p['problem']} | {by or 'not reported'} |")
    return "\n".join(out) + "\n"


def summarise(results: list[dict], judgements: list[dict], window: int,
              startup: float) -> tuple[dict, dict]:
    """Totals with seconds per MB net of ``startup``, and recall of the hand-found problems."""
    timed = [r for r in results if r["time_s"] is not None]
    for r in timed:
        r["net_s"] = max(r["time_s"] - startup, 0.0)
        r["net_s_per_mb"] = r["net_s"] / (r["bytes"] / 1e6) if r["bytes"] else None
    per_mb = [r["net_s_per_mb"] for r in timed if r["net_s_per_mb"] is not None]
    mb = sum(r["bytes"] for r in results) / 1e6
    seconds = sum(r["net_s"] for r in timed)
    summary = {"startup_s": startup, "repos": len(results), "files": sum(r["files"] for r in results), "mb": mb,
               "functions": sum(r["functions"] for r in results), "seconds": seconds,
               "seconds_per_mb": seconds / mb if mb else 0.0,
               "seconds_per_mb_min": min(per_mb, default=0.0),
               "seconds_per_mb_max": max(per_mb, default=0.0),
               "crashes": sum(r["crash"] is not None for r in results),
               "errors": sum(f["severity"] == "error" for r in results for f in r["findings"])}
    by_repo = {r["repo"]: r for r in results}
    items = []
    for j in judgements:
        if not j.get("problem") or j["repo"] not in by_repo:
            continue
        found = match(j, by_repo[j["repo"]]["findings"], window)
        items.append({**j, "matched": [{k: f[k] for k in ("line", "code", "severity")}
                                       for f in found]})
    reported = sum(bool(i["matched"]) for i in items)
    by_class: dict[str, list[int]] = {}
    for i in items:
        counts = by_class.setdefault(i.get("class") or "unclassified", [0, 0])
        counts[0] += bool(i["matched"])
        counts[1] += 1
    read = [j for j in judgements if j["repo"] in by_repo]
    recall = {"problems": len(items), "reported": reported,
              "percent": 100.0 * reported / len(items) if items else 0.0, "window": window,
              "functions_read": len({(j["repo"], j["path"], j["function"]) for j in read}),
              "by_class": {k: {"reported": v[0], "problems": v[1]}
                           for k, v in sorted(by_class.items())},
              "items": items}
    return summary, recall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--half", choices=("dev", "heldout"), required=True)
    parser.add_argument("--split", type=Path, default=SPLIT)
    parser.add_argument("--judgements", type=Path, default=JUDGEMENTS)
    parser.add_argument("--work", type=Path, default=Path("/tmp/lintcorpus3"))
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--extract", action="store_true", help="(re)extract the trees first")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--window", type=int, default=5,
                        help="lines either side of a hand-found problem that count as a match")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per lint run")
    parser.add_argument("--out", type=Path, default=None,
                        help="write OUT.json and OUT.md (default: benchmarks/results/"
                             "lint_corpus3_<half>)")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error(f"--repeat must be >= 1, got {args.repeat}")
    if args.window < 0:
        parser.error(f"--window must be >= 0, got {args.window}")
    for name in ("split", "judgements"):
        if not getattr(args, name).is_file():
            parser.error(f"--{name} {getattr(args, name)} does not exist; pass the committed "
                         f"file from benchmarks/results/")
    out = args.out or RESULTS / f"lint_corpus3_{args.half}"
    split = json.loads(args.split.read_text())
    judgements = json.loads(args.judgements.read_text())
    version = subprocess.run(
        [sys.executable, "-c", "import gradsmith; print(gradsmith.__version__)"],
        capture_output=True, text=True).stdout.strip()
    results = []
    for entry in split[args.half]:
        repo, commit = entry["repo"], entry["commit"]
        root = args.work / repo.replace("/", "+")
        if args.extract or not root.is_dir():
            root = extract(args.mirrors, args.work, repo, commit)
        files, nbytes = tree_size(root)
        result = {"repo": repo, "commit": commit, "files": files, "bytes": nbytes,
                  "functions": entry["function_classes"],
                  **lint_tree(root, args.repeat, args.timeout)}
        results.append(result)
        sev = Counter(f["severity"] for f in result["findings"])
        secs = "-" if result["time_s"] is None else f"{result['time_s']:.2f}s"
        print(f"{repo:42s} files={files:5d} MB={nbytes / 1e6:6.2f} time={secs} "
              f"errors={sev['error']} warnings={sev['warning']} info={sev['info']} "
              f"crash={result['crash'] or 'no'}", flush=True)
    startup = startup_time(args.repeat, args.timeout)
    summary, recall = summarise(results, judgements, args.window, startup)
    report = {"half": args.half, "gradsmith": version, "repeat": args.repeat,
              "command": "gradsmith lint --format json --exit-zero <tree>",
              "summary": summary, "recall": recall, "repos": results}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
    out.with_suffix(".md").write_text(render_md(report))
    print(f"errors={summary['errors']} crashes={summary['crashes']} "
          f"recall={recall['reported']}/{recall['problems']} "
          f"s/MB={summary['seconds_per_mb']:.2f}; wrote {out}.json and {out}.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
