"""gradsmith lint on real projects: findings per rule, judged finding by finding, and speed.

Usage:
    python benchmarks/lint_realcode.py --mirrors /work/.mirror --work /tmp/lint-src \\
        [--torchfix PATH/TO/torchfix] [--repeat 3] [--out benchmarks/results/lint_realcode.md]

Each project is a bare git mirror ``MIRRORS/owner+name/repo`` (as the team's ``fetch`` tool
leaves them); its ``.py`` files at the pinned commit are extracted to ``WORK/owner+name``
(third-party code stays outside this repository). Every project is linted with zero
configuration (``gradsmith lint DIR``, as a user would run it), and every finding is looked
up in the judgements file: each error-level finding and a sample of the others were judged
by reading the code (``defect`` = a wrong gradient, crash or leak; ``harmless`` = accurate
but without such a consequence; ``false`` = wrong; ``right``/``wrong`` for GS301 and the
sampled warnings). Unjudged error-level findings are listed as such.

Speed: on each project's files that define or use a Function (the files the linter parses),
``gradsmith lint FILES`` and ``torchfix -j 1 FILES`` run as subprocesses, interleaved,
``--repeat`` times (TorchFix in the first ``--torchfix-repeat`` rounds); the CPU time of each child (user + system, robust to other load on a
shared machine) and its wall time are recorded (medians).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tarfile
import time
from collections import Counter
from io import BytesIO
from pathlib import Path

from gradsmith.bench import environment
from gradsmith.bench.report import write_results
from gradsmith.linter import _engine
from gradsmith.linter._registry import RULES

#: (mirror folder, commit): the projects and the exact trees that were judged.
PROJECTS = [
    ("bitsandbytes-foundation+bitsandbytes", "95f9af309d4d5793847169c39288dcd3fcbdf564"),
    ("deep-spin+entmax", "c2bec6d5e7d649cba7766c2172d89123ec2a6d70"),
    ("facebookresearch+xformers", "ca6d2aa0d43241fc8a8dcd872debc2406160160d"),
    ("NVIDIA+apex", "6424da3b4faa6c8f062da4a48c424fff3f02d42d"),
    ("microsoft+DeepSpeed", "38327e07f6cd39b63418f60cedd1651b0be3e7c3"),
    ("state-spaces+mamba", "e9594ce1c732d97440f0332fdc43170a2294dbfa"),
    ("fla-org+flash-linear-attention", "bc3b101dcb713ddc5bd8924b66754eb68b5ccf89"),
    ("facebookresearch+pytorch3d", "9381c4016376345bb795b97c45a6c2de66db354a"),
    ("NVIDIAGameWorks+kaolin", "d52da9f86d460e8abcd99037e21ff0bec57997ed"),
    ("facebookresearch+fairseq", "3d262bb25690e4eb2e7d3c1309b1e9c406ca4b99"),
    ("NVIDIA+Megatron-LM", "d98e8a64ddf34856e74b24714e3bedb2f5a39553"),
    ("open-mmlab+mmcv", "a8073c74bf83d62ec36a103f835faa4837fb6585"),
    ("pytorch+ao", "36027d82d1ad9949597ea16002ff4940374b1b94"),
    ("huggingface+peft", "5d602fdbff04c33c1c4de55cda9d4ae1d7cb7e40"),
]
JUDGEMENTS = Path(__file__).parent / "results" / "lint_realcode_judgements.json"
ERROR_VERDICTS = ("defect", "harmless", "false")


def extract(mirrors: Path, work: Path, name: str, commit: str) -> Path:
    """The project's .py files at ``commit`` under ``work/name`` (extracted once)."""
    dest = work / name
    stamp = dest / ".gradsmith-commit"
    if stamp.is_file() and stamp.read_text().strip() == commit:
        return dest
    git_dir = mirrors / name / "repo"
    archive = subprocess.run(
        ["git", "--git-dir", str(git_dir), "archive", commit, "--", ":(glob)**/*.py"],
        check=True, capture_output=True).stdout
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")
    stamp.write_text(commit + "\n")
    return dest


def analyse(root: Path) -> tuple[int, int, int, list[str]]:
    """(Functions, .py files, bytes, parsed files) of one zero-configuration lint run."""
    raws = _engine.iter_files([root])
    seen: dict = {}
    original = _engine.Index

    class Counting(original):
        def discover(self):
            found = super().discover()
            seen["functions"] = found
            seen["parsed"] = sorted({s.source.path for s in self.by_source.values()})
            return found

    _engine.Index = Counting
    try:
        _engine.analyse(raws)
    finally:
        _engine.Index = original
    with_functions = sorted({fc.source.path for fc in seen["functions"]})
    parsed = [p for p in seen["parsed"] if p in with_functions or _uses(p, seen["functions"])]
    return len(seen["functions"]), len(raws), sum(len(r.data) for r in raws), parsed


def _uses(path: str, functions) -> bool:
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    return any(f"{fc.name}.apply" in text for fc in functions)


def lint_json(root: Path) -> tuple[list[dict], float]:
    """Findings of ``gradsmith lint ROOT --format json`` (a user's run) and its wall time."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "gradsmith", "lint", str(root), "--format",
                           "json"], capture_output=True, text=True, cwd=root)
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"gradsmith lint {root} failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout or "[]"), wall


def timed(cmd: list[str], cwd: Path) -> tuple[float, float]:
    """(CPU seconds of the child, wall seconds) of one run of ``cmd``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def speed(files: list[str], cwd: Path, torchfix: str | None, repeat: int,
          torchfix_repeat: int) -> dict:
    """Median CPU and wall seconds of gradsmith and TorchFix on the same files, interleaved
    (TorchFix runs in the first ``torchfix_repeat`` rounds only: it is slow)."""
    if not files:
        return {}
    rel = [os.path.relpath(f, cwd) for f in files]
    runs: dict[str, list[tuple[float, float]]] = {"gradsmith": [], "torchfix": []}
    for round_ in range(repeat):
        runs["gradsmith"].append(timed([sys.executable, "-m", "gradsmith", "lint", *rel], cwd))
        if torchfix and round_ < torchfix_repeat:
            runs["torchfix"].append(timed([torchfix, "-j", "1", *rel], cwd))
    out = {"files": len(files), "bytes": sum(Path(f).stat().st_size for f in files)}
    for tool, samples in runs.items():
        if samples:
            out[tool] = {"cpu_s": statistics.median(s[0] for s in samples),
                         "wall_s": statistics.median(s[1] for s in samples)}
    return out


def judge(project: str, root: Path, findings: list[dict], table: dict) -> list[dict]:
    """Each finding with its verdict and note from the judgements file (None if unjudged)."""
    out = []
    for f in findings:
        rel = Path(f["path"]).resolve().relative_to(root.resolve()).as_posix()
        key = f"{project}/{rel}:{f['line']}:{f['code']}"
        verdict = table.get(key, {})
        out.append({**f, "path": rel, "project": project, "key": key,
                    "verdict": verdict.get("verdict"), "note": verdict.get("note", "")})
    return out


def render(data: dict) -> str:
    rows = data["projects"]
    totals = data["totals"]
    lines = [
        "# gradsmith lint on real projects", "",
        "Command: `python benchmarks/lint_realcode.py --mirrors MIRRORS --work WORK "
        f"--torchfix TORCHFIX --repeat {data['repeat']} --torchfix-repeat "
        f"{data['torchfix_repeat']}` (zero configuration; judgements in "
        "`benchmarks/results/lint_realcode_judgements.json`).", "",
        "## Projects", "",
        "| project | commit | .py files | MB | Functions | lint (s, wall) | errors | warnings | info |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        sev = r["severities"]
        lines.append(
            f"| {r['project']} | `{r['commit'][:10]}` | {r['files']} | {r['bytes'] / 1e6:.1f} | "
            f"{r['functions']} | {r['lint_wall_s']:.2f} | {sev.get('error', 0)} | "
            f"{sev.get('warning', 0)} | {sev.get('info', 0)} |")
    lines += [
        f"| **total** | | {totals['files']} | {totals['bytes'] / 1e6:.1f} | "
        f"{totals['functions']} | {totals['lint_wall_s']:.2f} | "
        f"{totals['severities'].get('error', 0)} | {totals['severities'].get('warning', 0)} | "
        f"{totals['severities'].get('info', 0)} |", "",
        "## Findings by rule", "", "| code | severity | count | judged | verdicts |",
        "|---|---|---:|---:|---|",
    ]
    for code, n in sorted(totals["codes"].items()):
        verdicts = Counter(f["verdict"] for f in data["findings"] if f["code"] == code
                           and f["verdict"])
        shown = ", ".join(f"{v} {c}" for v, c in sorted(verdicts.items()))
        lines.append(f"| {code} | {RULES[code].severity} | {n} | {sum(verdicts.values())} | "
                     f"{shown} |")
    summary = data["summary"]
    lines += [
        "", "## Goals", "",
        f"- error-level findings: {summary['errors']}; defects {summary['defect']}, "
        f"accurate but harmless {summary['harmless']}, false {summary['false']}, unjudged "
        f"{summary['unjudged']}",
        f"- GS301 judged: {summary['gs301_judged']}, right {summary['gs301_right']} "
        f"({summary['gs301_precision']})",
        f"- speed on the files with Functions: {summary['speed']}", "",
        "## Every error-level finding", "", "| finding | verdict | why |", "|---|---|---|",
    ]
    for f in data["findings"]:
        if f["severity"] == "error":
            lines.append(f"| `{f['key']}` {f['message']} | {f['verdict'] or 'UNJUDGED'} | "
                         f"{f['note']} |")
    lines += ["", "## Judged warnings and info (sample)", "", "| finding | verdict | why |",
              "|---|---|---|"]
    for f in data["findings"]:
        if f["severity"] != "error" and f["verdict"]:
            lines.append(f"| `{f['key']}` {f['message']} | {f['verdict']} | {f['note']} |")
    lines += ["", "## Speed against TorchFix (same files, CPU seconds of each process)", "",
              "| project | files | KB | gradsmith cpu / wall | torchfix cpu / wall | x (cpu) |",
              "|---|---:|---:|---|---|---:|"]
    for r in rows:
        s = r["speed"]
        if not s or "torchfix" not in s:
            continue
        g, t = s["gradsmith"], s["torchfix"]
        lines.append(f"| {r['project']} | {s['files']} | {s['bytes'] / 1e3:.0f} | "
                     f"{g['cpu_s']:.2f} / {g['wall_s']:.2f} | {t['cpu_s']:.2f} / "
                     f"{t['wall_s']:.2f} | {t['cpu_s'] / max(g['cpu_s'], 1e-9):.0f} |")
    lines += ["", "## Environment", "", "```json", json.dumps(data["environment"], indent=2),
              "```", ""]
    return "\n".join(lines)


def _judged(findings: list[dict]) -> dict:
    """Counts of the verdicts: errors by kind, GS301 precision."""
    errors = [f for f in findings if f["severity"] == "error"]
    gs301 = [f for f in findings if f["code"] == "GS301" and f["verdict"]]
    right = sum(f["verdict"] == "right" for f in gs301)
    return {
        "errors": len(errors), **{v: sum(f["verdict"] == v for f in errors) for v in ERROR_VERDICTS},
        "unjudged": sum(f["verdict"] is None for f in errors),
        "gs301_judged": len(gs301), "gs301_right": right,
        "gs301_precision": f"{right}/{len(gs301)}" if gs301 else "n/a",
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirrors", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--torchfix", default=None, help="torchfix executable (own venv)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--torchfix-repeat", type=int, default=1,
                        help="rounds that also run TorchFix (default 1: it is slow)")
    parser.add_argument("--out", default="benchmarks/results/lint_realcode.md")
    parser.add_argument("--rejudge", type=Path, default=None, metavar="RESULT_JSON",
                        help="re-apply the judgements to a recorded run and re-render it "
                             "(no linting, no timing)")
    args = parser.parse_args()
    table = {j["key"]: j for j in json.loads(JUDGEMENTS.read_text())} if JUDGEMENTS.is_file() else {}
    if args.rejudge is not None:
        data = json.loads(args.rejudge.read_text())
        for f in data["findings"]:
            verdict = table.get(f["key"], {})
            f["verdict"], f["note"] = verdict.get("verdict"), verdict.get("note", "")
        data["summary"].update(_judged(data["findings"]))
        out = Path(args.out)
        write_results(data, render(data), out.parent, out.stem)
        print(json.dumps(data["summary"], indent=2))
        return 0
    env = environment()
    rows, findings = [], []
    for name, commit in PROJECTS:
        root = extract(args.mirrors, args.work.resolve(), name, commit)
        functions, files, size, parsed = analyse(root)
        found, wall = lint_json(root)
        judged = judge(name, root, found, table)
        findings += judged
        rows.append({
            "project": name.replace("+", "/"), "commit": commit, "files": files, "bytes": size,
            "functions": functions, "lint_wall_s": wall, "parsed_files": len(parsed),
            "severities": dict(Counter(f["severity"] for f in found)),
            "codes": dict(Counter(f["code"] for f in found)),
            "speed": speed(parsed, root, args.torchfix, args.repeat, args.torchfix_repeat),
        })
        print(f"{name}: {files} files, {functions} Functions, {len(found)} findings", flush=True)
    totals = {
        "files": sum(r["files"] for r in rows), "bytes": sum(r["bytes"] for r in rows),
        "functions": sum(r["functions"] for r in rows),
        "lint_wall_s": sum(r["lint_wall_s"] for r in rows),
        "severities": dict(Counter(f["severity"] for f in findings)),
        "codes": dict(Counter(f["code"] for f in findings)),
    }
    g_cpu = sum(r["speed"].get("gradsmith", {}).get("cpu_s", 0) for r in rows)
    t_cpu = sum(r["speed"].get("torchfix", {}).get("cpu_s", 0) for r in rows)
    summary = {
        **_judged(findings),
        "speed": (f"gradsmith {g_cpu:.1f} s CPU, TorchFix {t_cpu:.1f} s CPU: "
                  f"{t_cpu / g_cpu:.0f}x" if g_cpu and t_cpu else "TorchFix not run"),
    }
    env["load_average_1min_end"] = round(os.getloadavg()[0], 2)
    data = {"repeat": args.repeat, "torchfix_repeat": args.torchfix_repeat, "projects": rows, "totals": totals, "summary": summary,
            "findings": findings, "environment": env}
    out = Path(args.out)
    write_results(data, render(data), out.parent, out.stem)
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
