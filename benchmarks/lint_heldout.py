"""gradsmith lint on a corpus nobody here had seen, split by repository before any run.

Usage:
    python benchmarks/lint_heldout.py --half dev [--work /tmp/lintcorpus] [--repeat 3]
    python benchmarks/lint_heldout.py --half heldout --json benchmarks/results/lint_newcorpus.json

The repositories, their pinned commits and the dev/held-out split are in
``benchmarks/results/lint_newcorpus_split.json`` (written and committed before gradsmith ran on
any of them). Each repository's ``.py`` files at its commit are extracted from the bare
mirror ``MIRRORS/owner+name/repo`` to ``WORK/owner+name`` (third-party code never enters this
repository; pass ``--extract`` to (re)extract). Each repository is linted with zero
configuration, in-process, ``--repeat`` times; the median wall time is recorded with the
number of files, bytes and Functions (classes the linter discovered). Every finding is
written out with its location; error-level findings are listed for judging, and joined with
``--judgements`` (a JSON list of {repo, path, line, code, verdict, note}) when given.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time
from collections import Counter
from pathlib import Path

from gradsmith.linter import _engine
from gradsmith.linter._discovery import Index

SPLIT = Path(__file__).parent / "results" / "lint_newcorpus_split.json"


def extract(mirrors: Path, work: Path, repo: str, commit: str) -> Path:
    """The repository's ``.py`` files at ``commit`` under ``work/owner+name``."""
    name = repo.replace("/", "+")
    dest = work / name
    git = ["git", "--git-dir", str(mirrors / name / "repo")]
    paths = subprocess.run([*git, "ls-tree", "-r", "--name-only", commit], check=True,
                           capture_output=True, text=True).stdout.splitlines()
    for path in paths:
        if not path.endswith(".py"):
            continue
        blob = subprocess.run([*git, "show", f"{commit}:{path}"], capture_output=True)
        if blob.returncode == 0:
            (dest / path).parent.mkdir(parents=True, exist_ok=True)
            (dest / path).write_bytes(blob.stdout)
    return dest


def lint_repo(root: Path, repeat: int) -> dict:
    """Findings, Functions discovered and median wall time of linting ``root``."""
    times, findings = [], []
    for _ in range(repeat):
        start = time.perf_counter()
        raws = _engine.iter_files([root])
        findings = _engine.analyse(raws)
        times.append(time.perf_counter() - start)
    sources = []
    for raw in _engine.iter_files([root]):
        try:
            sources.append(_engine.parse(_engine.decode(raw.data), raw.path, raw.module,
                                         raw.is_package))
        except Exception:  # a syntax error is a GS001 finding, counted above
            continue
    functions = len(Index(sources).discover())
    return {
        "files": len(raws), "bytes": sum(len(r.data) for r in raws), "functions": functions,
        "time_s": statistics.median(times), "times_s": times,
        "findings": [
            {"path": str(Path(f.path).relative_to(root)), "line": f.line, "code": f.code,
             "severity": f.severity, "message": f.message}
            for f in sorted(findings, key=lambda f: (f.path, f.line, f.code))
        ],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--half", choices=("dev", "heldout"), required=True)
    parser.add_argument("--work", type=Path, default=Path("/tmp/lintcorpus"))
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--extract", action="store_true", help="(re)extract the files first")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--judgements", type=Path, help="JSON list of judged error findings")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error(f"--repeat must be >= 1, got {args.repeat}")
    split = json.loads(SPLIT.read_text())
    judged = {}
    if args.judgements:
        for j in json.loads(args.judgements.read_text()):
            judged[(j["repo"], j["path"], j["line"], j["code"])] = j
    results = []
    for entry in split[args.half]:
        repo, commit = entry["repo"], entry["commit"]
        root = args.work / repo.replace("/", "+")
        if args.extract or not root.is_dir():
            root = extract(args.mirrors, args.work, repo, commit)
        result = {"repo": repo, "commit": commit, **lint_repo(root, args.repeat)}
        for f in result["findings"]:
            j = judged.get((repo, f["path"], f["line"], f["code"]))
            if j is not None:
                f["verdict"], f["note"] = j["verdict"], j.get("note", "")
        results.append(result)
        severities = Counter(f["severity"] for f in result["findings"])
        print(f"{repo:40s} files={result['files']:5d} functions={result['functions']:4d} "
              f"time={result['time_s']:.2f}s errors={severities['error']} "
              f"warnings={severities['warning']} info={severities['info']}")
        for f in result["findings"]:
            if f["severity"] == "error":
                print(f"    {f['path']}:{f['line']} {f['code']} {f['message']}"
                      f"  [{f.get('verdict', 'unjudged')}]")
    if args.json:
        args.json.write_text(json.dumps({"half": args.half, "repos": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
