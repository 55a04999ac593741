"""``gradsmith bench FILE`` with no configuration on public projects' Functions, judged.

    python benchmarks/bench_real.py --mirrors /work/.mirror --work /tmp/bench_real

Each file is extracted from a fetched mirror (a bare git repository) at a pinned commit and
benched as a user would first run it: no decorator, no example, eager and compiled. The
third-party code stays in ``--work``, outside this repository. The record keeps every row, the
wall time per file, our judgement of each Function from reading its code, and an independent
check of the bytes it keeps for backward: computed by hand from what its ``forward`` saves, at
the grown input size, and compared with what gradsmith measured. Writes
``results/bench_real.{md,json}``.

Breadth: the same zero-configuration ``gradsmith bench FILE --mode eager`` on every file of the
check corpus (``real_corpus.py``: 22 files, 12 projects, without their optional dependencies),
counting what a first run gives: rows measured, inputs grown, skips that name the example to
register, import failures, and any gradsmith crash (there must be none).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"

# mirror folder, commit, file
FILES = [
    ("lukemelas+EfficientNet-PyTorch", "7e8b0d312162f335785fb5dcfa1df29a75a1783a",
     "efficientnet_pytorch/utils.py"),
    ("deep-spin+entmax", "c2bec6d5e7d649cba7766c2172d89123ec2a6d70", "entmax/activations.py"),
    ("janfreyberg+pytorch-revgrad", "330efbe28c70172d152205c8211b37e8a7491392",
     "src/pytorch_revgrad/functional.py"),
    ("1adrianb+binary-networks-pytorch", "51bdeee64d3da6306aebe4f2464eebd778bf7a38",
     "bnn/ops.py"),
    ("KwangHoonAn+PACT", "342414c29444e0ce0a5d13456c8a09226d04c67b", "module.py"),
]

# The grown input: 3 x 4 float64 synthesised, repeated 65536x along the batch.
N = 196608 * 4 * 8
ROWS_INT64 = 196608 * 8
SCALAR = 8

# Function -> (bytes its forward saves at the grown size, computed by hand; our judgement)
JUDGED = {
    "SwishImplementation": (
        N, "the memory-efficient Swish: saves x only and recomputes sigmoid(x) in backward, so "
        "half of autograd's bytes (x and sigmoid(x)) for more time: the tutorials' recompute "
        "trade, measured as such"),
    "SparsemaxFunction": (
        N + ROWS_INT64, "closed-form backward from the output and the support size (int64 per "
        "row): far fewer bytes and less time than autograd through sort and cumsum"),
    "Entmax15Function": (
        N, "closed-form backward from the output alone: the same win as sparsemax"),
    "RevGrad": (
        N + SCALAR, "gradient reversal: saves its input but never reads it in backward "
        "(`_, alpha_ = ctx.saved_tensors`), 6 MiB for nothing where the autograd of its "
        "identity forward keeps 0 B; the note says its gradient differs (an estimator), as it "
        "should; compiled, the unused input is dropped (8 B)"),
    "SignActivation": (
        N, "sign with a clipped straight-through gradient: keeps the input for the clip mask, "
        "where the autograd of sign keeps nothing (its gradient is zero); the note says the "
        "gradients differ"),
    "SignActivationStochastic": (
        N, "stochastic binarisation that saves its input and then rewrites it in place "
        "(`input.add_(1)...`, a defect `gradsmith check` reports as input-mutated): the autograd "
        "of that forward cannot run (in-place on a leaf), so the row has no reference and says "
        "so instead of inventing one"),
    "ActFn": (
        N + SCALAR, "PACT: saves x and alpha, a third of the bytes of the autograd of its "
        "clamp-and-round forward, and faster eager"),
    "DoReFaQuant": (
        0, "DoReFa rounding with an identity gradient: saves nothing; the autograd of its "
        "forward keeps 12 MiB (and computes a zero gradient, as the note says)"),
}


def extract(mirrors: Path, work: Path) -> list[Path]:
    """Each file at its commit under ``work/<mirror>/``; the paths, in FILES order."""
    out = []
    for project, commit, path in FILES:
        dest = work / project
        dest.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "--git-dir", str(mirrors / project / "repo"), "archive",
                                  commit, "--", path], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
        out.append(dest / path)
    return out


def bench(file: Path, work: Path) -> tuple[dict, float]:
    """``gradsmith bench FILE --mode both`` in a fresh process; its report and wall time."""
    out = work / (file.stem + "-" + file.parent.name + ".json")
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "gradsmith", "bench", str(file.relative_to(work)),
                    "--mode", "both", "--json", str(out)], cwd=work, check=False,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=1200)
    return json.loads(out.read_text()), time.perf_counter() - start


def breadth(mirrors: Path, work: Path) -> dict:
    """Eager zero-config bench of every real_corpus file: counts and per-file wall time."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import real_corpus

    real_corpus.extract(mirrors, work)
    files = sorted({f"{project}/{path}" for project, path, *_ in real_corpus.ENTRIES})
    counts = {"files": len(files), "rows": 0, "measured": 0, "with_reference": 0, "grown": 0,
              "tiny": 0, "skipped": 0, "import_failed": 0, "other_errors": 0,
              "nonzero_exit_without_error_row": 0}
    seconds = {}
    for name in files:
        out = work / (name.replace("/", "_") + ".bench.json")
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "gradsmith", "bench", name, "--mode", "eager",
                               "--timeout", "120", "--json", str(out)], cwd=work,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=1200)
        seconds[name] = round(time.perf_counter() - start, 1)
        rows = json.loads(out.read_text())["results"] if out.exists() else []
        if proc.returncode != 0 and not any(r["error"] for r in rows):
            counts["nonzero_exit_without_error_row"] += 1
        for r in rows:
            counts["rows"] += 1
            error, note = r["error"] or "", r["note"] or ""
            if error.startswith("import failed"):
                counts["import_failed"] += 1
            elif error.startswith("skipped"):
                counts["skipped"] += 1
            elif error:
                counts["other_errors"] += 1
            else:
                counts["measured"] += 1
                counts["with_reference"] += r["time_ratio"] is not None
                counts["grown"] += "repeated" in note
                counts["tiny"] += "tiny shapes" in note
    return {"counts": counts, "seconds": seconds}


def _mib(b: int | None) -> str:
    return "-" if b is None else f"{b / 2 ** 20:.2f} MiB" if b >= 2 ** 16 else f"{b} B"


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def render_breadth(b: dict) -> list[str]:
    c, secs = b["counts"], b["seconds"]
    return ["## Breadth: every file of the check corpus, eager", "",
            f"{c['files']} files from 12 projects, run as a user first would (`gradsmith bench "
            f"FILE`, no example, their optional dependencies not installed): {c['rows']} rows; "
            f"{c['measured']} measured ({c['grown']} with inputs grown along the batch, "
            f"{c['tiny']} left at the synthesised size because a larger batch was refused; "
            f"{c['with_reference']} against a reference, the others say why there is none), "
            f"{c['skipped']} skipped with the example to register, {c['import_failed']} import "
            f"failures (missing optional dependencies, named in the row), {c['other_errors']} "
            f"other errors, {c['nonzero_exit_without_error_row']} exits without a row saying "
            f"why. Wall time per file: median {statistics.median(secs.values()):.1f} s, max "
            f"{max(secs.values()):.1f} s.", ""]


def render(records: list[dict], env: dict) -> str:
    lines = ["# gradsmith bench on public projects' Functions, zero configuration", "",
             f"torch {env['torch']}, {env['cpu']} ({env['cpu_count']} CPUs), "
             f"{env['torch_threads']} threads, {env['date_utc']}, 1-minute load "
             f"{env.get('load_average_1min')}. Reproduce: `python benchmarks/bench_real.py`. "
             "Each file as its authors wrote it, benched with `gradsmith bench FILE --mode "
             "both` and nothing else; inputs synthesised and grown along the batch "
             "(3 x 4 float64 -> 196608 x 4). `bytes agree`: the op's saved bytes (eager) equal "
             "what its forward saves, computed by hand at that size.", "",
             "| project @ commit | Function | mode | reference | time x | op saved | ref saved "
             "| bytes agree | file s | judgement |", "|---|---|---|---|---|---|---|---|---|---|"]
    counts = {"rows": 0, "functions": set(), "agree": 0, "checked": 0}
    for rec in records:
        for r in rec["report"]["results"]:
            fn = r["op"].split("::")[-1]
            expected, judgement = JUDGED.get(fn, (None, "not judged"))
            saved = r["saved_bytes"]["op"]
            agree = "-"
            if r["mode"] == "eager" and expected is not None and saved is not None:
                ok = saved == expected
                agree = "yes" if ok else f"no ({expected} expected)"
                counts["checked"] += 1
                counts["agree"] += ok
            counts["rows"] += 1
            counts["functions"].add(r["op"])
            lines.append(
                f"| {rec['project']} @ {rec['commit'][:7]} | {fn} | {r['mode']} | "
                f"{r['reference']} | {_x(r['time_ratio'])} | {_mib(saved)} | "
                f"{_mib(r['saved_bytes']['reference'])} | {agree} | {rec['seconds']:.1f} | "
                f"{judgement if r['mode'] == 'eager' else ''} |")
    lines += ["", f"{len(records)} files from {len(records)} projects, "
              f"{len(counts['functions'])} Functions, {counts['rows']} rows; saved bytes agree "
              f"with the hand computation in {counts['agree']} of {counts['checked']} eager "
              "rows. Every row is measured (no crash, no skip); the rows whose gradient differs "
              "from the autograd of the forward (estimators) or that have no reference say so "
              "in their note (`bench_real.json`).", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench_real"))
    ns = parser.parse_args()
    records = []
    for (project, commit, _), file in zip(FILES, extract(ns.mirrors, ns.work)):
        print(f"benching {project}: {file.name}", file=sys.stderr, flush=True)
        report, seconds = bench(file, ns.work)
        records.append({"project": project, "commit": commit, "file": str(file.relative_to(
            ns.work / project)), "seconds": seconds, "report": report})
    env = records[0]["report"]["environment"]
    wide = breadth(ns.mirrors, ns.work / "corpus")
    md = render(records, env) + "\n".join(render_breadth(wide))
    (RESULTS / "bench_real.json").write_text(json.dumps(
        {"judged": {k: v[1] for k, v in JUDGED.items()}, "records": records, "breadth": wide},
        indent=1) + "\n")
    (RESULTS / "bench_real.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
