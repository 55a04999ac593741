"""Issue 18's new real-code corpus: zero-configuration ``gradsmith check`` on code nobody here saw.

The corpus (``results/check_newcorpus_split.json``) lists 32 public projects, their commits and
123 ``autograd.Function``s, split by project into a development half and a held-out half before
gradsmith ran on any of it, each Function judged by reading it and by an independent
computation (``judgement``, ``note``, ``evidence`` per Function). The projects' code never
enters this repository: extract each tree outside it (``git --git-dir MIRROR archive COMMIT |
tar -x -C CORPUS/owner+name``) and install what their imports need into ``--deps``.

For one half this script runs ``gradsmith check FILE::Fn ... --format json --repro DIR`` once
per file, as a user would (no examples, no options), each run bounded by ``--file-timeout``;
applies every declaration line gradsmith printed for an estimator exactly as printed; and
scores each row against the judgement:

- false PASS: a defect (or an estimator with a defect) that PASSes;
- false alarm: a correct Function that FAILs;
- missing row: a requested Function with no row;
- skip: a row that checked nothing (SKIP, or a module that did not import);
- defect caught: a defect's row FAILs;
- declaration passes as printed: an estimator whose printed declaration, applied verbatim,
  makes the check pass.

Usage::

    python benchmarks/check_newcorpus.py --half dev --corpus /tmp/checkcorpus --deps /tmp/ccdeps

Results: ``benchmarks/results/check_newcorpus_<half>.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from real_corpus import APPLY, _codes, _env, _guided  # noqa: E402  (sibling benchmark)

SPLIT = HERE / "results" / "check_newcorpus_split.json"
ESTIMATORS = ("estimator", "estimator-defect")
DEFECTS = ("defect", "estimator-defect")


def run_file(targets: list[str], env: dict, repro: Path, timeout: float
             ) -> tuple[dict, float, str | None]:
    """One ``gradsmith check FILE::Fn ...`` (one file's or one project's requested
    Functions), bounded in time."""
    cmd = [sys.executable, "-m", "gradsmith", "check", *targets,
           "--format", "json", "--repro", str(repro)]
    started = time.perf_counter()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout,
                              start_new_session=True)
    except subprocess.TimeoutExpired:
        return {"results": []}, time.perf_counter() - started, f"timed out after {timeout:.0f} s"
    elapsed = time.perf_counter() - started
    try:
        return json.loads(done.stdout), elapsed, None
    except json.JSONDecodeError:
        return {"results": []}, elapsed, (done.stderr or done.stdout)[-1500:]


def apply_declarations(rows: dict, env: dict) -> dict:
    """Every declaration line printed for a row (verified or template), applied verbatim."""
    jobs = []
    for key, row in rows.items():
        for f in (row.get("report") or {}).get("findings", []):
            line = (f.get("details") or {}).get("declaration")
            if f["code"] == "undeclared-estimator" and line and row.get("repro"):
                jobs.append(["::".join(key), row["repro"]["source"], line])
    if not jobs:
        return {}
    done = subprocess.run([sys.executable, "-c", APPLY], input=json.dumps(jobs),
                          capture_output=True, text=True, env=env, timeout=1800)
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        return {"error": done.stderr[-2000:]}


def _row_name(row: dict) -> str:
    return row["name"].rsplit("::", 1)[-1].rsplit(".", 1)[-1]


def score(split: dict, half: str, rows: dict, applied: dict, walls: dict) -> dict:
    table, c = [], defaultdict(int)
    for project in split[half]:
        info = split["projects"][project]
        for fn in info["functions"]:
            key = (project, fn["path"], fn["function"])
            row = rows.get(key)
            verdict = row["verdict"] if row else "missing"
            judgement = fn.get("judgement", "unjudged")
            passes = (applied.get("::".join(key)) or {}).get("passed")
            c["functions"] += 1
            c["missing"] += row is None
            c["skips"] += verdict in ("skip", "error") and judgement != "unimportable"
            c["unimportable"] += judgement == "unimportable"
            c["false_pass"] += judgement in DEFECTS and verdict == "pass"
            c["estimator_pass"] += judgement == "estimator" and verdict == "pass"
            c["false_alarm"] += judgement == "correct" and verdict == "fail"
            c["correct"] += judgement == "correct"
            c["correct_pass"] += judgement == "correct" and verdict == "pass"
            c["defects"] += judgement in DEFECTS
            c["defects_caught"] += judgement in DEFECTS and verdict == "fail"
            c["estimators"] += judgement in ESTIMATORS
            c["estimators_guided"] += judgement in ESTIMATORS and _guided(row)
            c["declarations_pass"] += judgement == "estimator" and bool(passes)
            c["elapsed"] += (row or {}).get("elapsed") or 0.0
            table.append({
                "project": project, "path": fn["path"], "function": fn["function"],
                "line": fn["line"], "judgement": judgement, "verdict": verdict,
                "error_codes": _codes(row), "warnings": _codes(row, "warning"),
                "inputs": (row or {}).get("inputs"), "elapsed": (row or {}).get("elapsed"),
                "declaration_passes": passes, "guided": _guided(row)})
    c["pure_estimators"] = c["estimators"] - sum(
        1 for p in split[half] for f in split["projects"][p]["functions"]
        if f.get("judgement") == "estimator-defect")
    return {"half": half, "counts": dict(c), "table": table, "wall_per_file": walls,
            "wall_total": round(sum(w for w in walls.values()), 1)}


def goals(c: dict) -> list[str]:
    n = c["functions"]
    items = [
        ("0 false PASS", c["false_pass"] == 0, f"{c['false_pass']}"),
        ("0 false alarms on correct Functions", c["false_alarm"] == 0,
         f"{c['false_alarm']} of {c['correct']}"),
        ("every requested target a row", c["missing"] == 0, f"{c['missing']} missing"),
        ("at most 1 skip in 12", c["skips"] <= n // 12, f"{c['skips']} in {n}"),
        (">= 80% of real defects caught", c["defects_caught"] >= 0.8 * c["defects"],
         f"{c['defects_caught']} of {c['defects']}"),
        (">= 90% of estimators given a declaration that passes as printed",
         c["declarations_pass"] >= 0.9 * c["pure_estimators"],
         f"{c['declarations_pass']} of {c['pure_estimators']}"),
    ]
    return [f"- {'MET' if ok else 'NOT MET'}: {what} ({count})" for what, ok, count in items]


def markdown(data: dict) -> str:
    c = data["counts"]
    lines = [f"# New real-code corpus, {data['half']} half (issue 18)", "",
             f"{c['functions']} Functions; wall {data['wall_total']} s; "
             f"{c['unimportable']} cannot be imported here (their rows are counted apart).",
             "", *goals(c), "",
             "| project | Function | judgement | verdict | error codes | warnings | "
             "declaration passes | s |", "|---|---|---|---|---|---|---|---:|"]
    for r in data["table"]:
        lines.append(f"| {r['project']} | {r['function']} | {r['judgement']} | {r['verdict']} | "
                     f"{', '.join(r['error_codes']) or '-'} | {', '.join(r['warnings']) or '-'} | "
                     f"{r['declaration_passes'] if r['declaration_passes'] is not None else '-'} "
                     f"| {r['elapsed'] or 0:.1f} |")
    return "\n".join(lines) + "\n"


def combine(out: Path) -> None:
    """``check_newcorpus.{json,md}``: both halves' numbers side by side, as they are."""
    from gradsmith.bench import environment

    halves = {h: json.loads((out / f"check_newcorpus_{h}.json").read_text())
              for h in ("dev", "heldout") if (out / f"check_newcorpus_{h}.json").exists()}
    split = json.loads(SPLIT.read_text())
    data = {"environment": environment(),
            "gradsmith_commit": os.environ.get("GRADSMITH_COMMIT", "working tree"),
            "split": {k: split[k] for k in ("method", "dev",
                                                                        "heldout", "counts")},
            "projects": {p: {"repo": v["repo"], "commit": v["commit"], "half": v["half"]}
                         for p, v in split["projects"].items()},
            "halves": {h: {k: d[k] for k in ("counts", "table", "wall_per_file", "wall_total",
                                             "errors")} for h, d in halves.items()}}
    lines = ["# New real-code corpus (issue 18): zero-configuration `gradsmith check`", "",
             f"{split['counts']['projects']} public projects never used here before, "
             f"{split['counts']['functions']} `autograd.Function`s, split by project (sha256 of "
             "the name, alternating) into a development half and a held-out half before "
             "gradsmith ran; every Function judged by reading it and by an independent "
             "computation (autograd of an equivalent expression, gradcheck on hand inputs, "
             "a brute-force or library reference) recorded in "
             "`check_newcorpus_split.json`. The held-out half was run once, after the last "
             "code change.", "",
             f"- environment: torch {data['environment'].get('torch')}, Python "
             f"{data['environment'].get('python')}, {data['environment'].get('cpu_count')} "
             f"CPUs shared with other work; gradsmith at commit {data['gradsmith_commit']}",
             ""]
    for half, d in halves.items():
        c = d["counts"]
        lines += [f"## {half} half: {c['functions']} Functions, {len(split[half])} projects, "
                  f"wall {d['wall_total']} s", "",
                  f"- judgements: {c['correct']} correct, {c['defects']} with a real defect, "
                  f"{c['estimators']} estimators, {c['unimportable']} not importable here, "
                  f"the rest opaque (inputs cannot be invented)",
                  f"- correct Functions that PASS: {c['correct_pass']} of {c['correct']}; "
                  f"estimators that PASS: {c['estimator_pass']}", "", *goals(c), ""]
        lines += markdown(d).split("\n", 4)[4].splitlines() + [""]
    (out / "check_newcorpus.json").write_text(json.dumps(data, indent=1, default=str))
    (out / "check_newcorpus.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--half", choices=("dev", "heldout"))
    parser.add_argument("--combine", action="store_true",
                        help="write check_newcorpus.{json,md} from both halves' results")
    parser.add_argument("--corpus", default="/tmp/checkcorpus", type=Path)
    parser.add_argument("--deps", default=None, help="PYTHONPATH entry with the projects' deps")
    parser.add_argument("--file-timeout", default=600.0, type=float)
    parser.add_argument("--project", action="append", help="only these projects (development)")
    parser.add_argument("--per-project", action="store_true",
                        help="one gradsmith check per project instead of per file")
    parser.add_argument("--out", default=HERE / "results", type=Path)
    args = parser.parse_args()
    if args.combine:
        combine(args.out)
        return
    if args.half is None:
        parser.error("--half is required (or --combine)")
    split = json.loads(SPLIT.read_text())
    if args.project:
        split[args.half] = [p for p in split[args.half] if p in args.project]
    env = _env(args.deps, args.corpus)
    repro = args.corpus / "_repro" / args.half
    rows, walls, errors = {}, {}, {}
    for project in split[args.half]:
        by_file = defaultdict(list)
        for fn in split["projects"][project]["functions"]:
            by_file[fn["path"]].append(fn["function"])
        # One command per file, or (--per-project) one per project: the start-up (torch,
        # workers) is paid once; rows are matched by Function name, unique in a project.
        groups = [list(by_file.items())] if args.per_project else [[i] for i in by_file.items()]
        for group in groups:
            targets = [f"{args.corpus / project / path}::{n}" for path, ns in group for n in ns]
            where = {n: path for path, ns in group for n in ns}
            label = f"{project}/{group[0][0]}" if len(group) == 1 else project
            doc, wall, err = run_file(targets, env, repro / project, args.file_timeout)
            walls[label] = round(wall, 2)
            if err:
                errors[label] = err
            for r in doc.get("results", []):
                if _row_name(r) in where:
                    rows[(project, where[_row_name(r)], _row_name(r))] = r
            print(f"{label}: {len(doc.get('results', []))} rows in {wall:.1f} s", flush=True)
    applied = apply_declarations(rows, env)
    data = score(split, args.half, rows, applied, walls)
    data["errors"] = errors
    data["declarations_applied"] = applied
    data["reports"] = {"::".join(k): v for k, v in rows.items()}
    args.out.mkdir(parents=True, exist_ok=True)
    suffix = "" if not args.project else "_partial"
    (args.out / f"check_newcorpus_{args.half}{suffix}.json").write_text(
        json.dumps(data, indent=1, default=str))
    (args.out / f"check_newcorpus_{args.half}{suffix}.md").write_text(markdown(data))
    print(markdown(data))


if __name__ == "__main__":
    main()
