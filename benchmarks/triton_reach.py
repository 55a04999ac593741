"""Reach on Triton kernel libraries: ``gradsmith check`` with zero configuration, no GPU.

Runs ``gradsmith check`` on a library's files exactly as a user would after ``pip install
'gradsmith[triton]'`` (no TRITON_INTERPRET, no examples, no options beyond a longer
``--timeout`` for interpreted kernels), records each Function's row, and renders the table.
Third-party code is never copied here: the library is checked where it was extracted, and the
plain-PyTorch references that judge the verdicts live beside it (outside the repository); their
judgements are merged from a JSON file of ``{"<file>::<Function>": {"reference": ..., "right":
true/false, "why": ...}}``.

Usage:
    python benchmarks/triton_reach.py run --library NAME --commit SHA --src DIR FILE... \\
        [--judged JUDGED.json] [--out benchmarks/results/triton_reach.json]
    python benchmarks/triton_reach.py render [--out benchmarks/results/triton_reach.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT = HERE / "results" / "triton_reach.json"


def run(args: argparse.Namespace) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [args.src, env.get("PYTHONPATH")]))
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "gradsmith", "check", *args.files, "--no-compat", "--format",
         "json", "--jobs", str(args.jobs), "--timeout", str(args.timeout)],
        capture_output=True, text=True, env=env, timeout=3600)
    wall = time.perf_counter() - start
    doc = json.loads(proc.stdout)
    judged = json.loads(Path(args.judged).read_text()) if args.judged else {}
    rows = [_row(r, judged) for r in doc["results"]]
    out = Path(args.out)
    results = json.loads(out.read_text()) if out.exists() else {"libraries": {}}
    results["environment"] = _environment()
    results["libraries"][args.library] = {
        "commit": args.commit, "wall_s": round(wall, 1), "jobs": args.jobs,
        "timeout_s": args.timeout, "rows": rows}
    out.write_text(json.dumps(results, indent=1) + "\n")
    print(f"{args.library}: {len(rows)} rows in {wall:.0f} s -> {out}")


def _row(r: dict, judged: dict) -> dict:
    name = r["name"].split("/")[-1]
    report = r.get("report") or {}
    findings = report.get("findings", [])
    row = {
        "function": name,
        "verdict": r["verdict"],
        "error": r.get("error"),
        "reason": (r.get("reason") or "")[:300],
        "inputs": (r.get("inputs") or "")[:200],
        "seconds": round(r.get("elapsed") or 0.0, 1),
        "errors": sorted({f"{f['code']}[{f.get('input') or ''}]" for f in findings
                          if f["severity"] == "error"}),
        "warnings": sorted({f["code"] for f in findings if f["severity"] == "warning"}),
        "interpreted": any(f["code"] == "triton-interpreted" for f in findings),
    }
    row.update(judged.get(name, {}))
    return row


def _environment() -> dict:
    import torch

    try:
        from importlib.metadata import version

        triton = version("triton")
    except Exception:  # noqa: BLE001
        triton = None
    gpu = (f"{torch.cuda.get_device_name(0)} (kernels compiled, run natively)"
           if torch.cuda.is_available() else "none (Triton's interpreter)")
    return {"python": platform.python_version(), "torch": torch.__version__,
            "triton": triton, "machine": platform.machine(), "cpus": os.cpu_count(),
            "gpu": gpu}


def render(args: argparse.Namespace) -> None:
    results = json.loads(Path(args.out).read_text())
    lines = ["# Reach on Triton kernel libraries (CPU only, zero configuration)", "",
             f"Environment: {results['environment']}", ""]
    for library, lib in results["libraries"].items():
        rows = lib["rows"]
        checked = [r for r in rows if r["verdict"] in ("pass", "fail") and r.get("checkable",
                                                                                 True)]
        lines += [f"## {library} @ {lib['commit'][:12]}", "",
                  f"{len(rows)} Functions; wall {lib['wall_s']} s with --jobs {lib['jobs']}, "
                  f"--timeout {lib['timeout_s']}.", "",
                  "| Function | verdict | seconds | errors | reference / reading | right? |",
                  "|---|---|---|---|---|---|"]
        for r in rows:
            what = r.get("reference") or r.get("reason", "")[:80]
            right = {True: "yes", False: "**no**", None: "-"}[r.get("right")]
            lines.append(f"| {r['function']} | {r['verdict']}{' (' + r['error'] + ')' if r.get('error') else ''} "
                         f"| {r['seconds']} | {', '.join(r['errors']) or '-'} | {what} | {right} |")
        lines += ["", f"Checked: {len(checked)} of {len(rows)}.", ""]
    out = Path(args.out).with_suffix(".md")
    summary = Path(args.out).with_name(Path(args.out).stem + "_notes.md")
    if summary.exists():
        lines += [summary.read_text()]
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--library", required=True)
    r.add_argument("--commit", required=True)
    r.add_argument("--src", required=True, help="directory to put on PYTHONPATH")
    r.add_argument("--judged", help="JSON of judgements by Function name")
    r.add_argument("--jobs", type=int, default=2)
    r.add_argument("--timeout", type=int, default=120)
    r.add_argument("--out", default=str(DEFAULT))
    r.add_argument("files", nargs="+")
    d = sub.add_parser("render")
    d.add_argument("--out", default=str(DEFAULT))
    args = parser.parse_args()
    run(args) if args.cmd == "run" else render(args)


if __name__ == "__main__":
    main()
