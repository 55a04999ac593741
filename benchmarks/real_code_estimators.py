"""Issue 9's verdict semantics on real code: estimators, gradient reversal, complex operators.

Public projects' Functions, run exactly as their authors wrote them, with ``gradsmith check``
and no configuration, **before** (the gradsmith of commit ``--before-src``, the session's
starting point) and **after** (the installed one). For every undeclared estimator the check
now reports, the suggested ``@gradsmith.example(...)`` line is then applied (its factory and
declaration, evaluated as a user would paste them) and must pass. An **independent
computation** in plain PyTorch (central differences against the Function's own backward)
classifies each estimator's signature without gradsmith. Complex MRI operators and module
arguments, which synthesis cannot build inputs for, are also run with inputs made from the
libraries' public API.

Third-party code is never copied here: this script names projects, commits, files and
Function names. Usage (see ``--help``)::

    python benchmarks/real_code_estimators.py --checkouts /work/scratch/checkcore/real \\
        --before-src /work/scratch/checkcore/before/src --python /path/to/venv/bin/python

``--checkouts`` holds one folder per project (``owner+name``) with its Python files at the
recorded commit (``--extract /work/.mirror`` writes them from the fetched mirrors). The Python
given needs torch, gradsmith, and numpy, scipy, setuptools<70, packaging for the projects.
Results: ``benchmarks/results/real_code_estimators.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

PROJECTS = {  # folder -> (commit, import root inside it)
    "Xilinx+brevitas": ("b106358c4169d8a9b68cb2a531aa795417d74887", "src"),
    "Zhen-Dong+HAWQ": ("1616df69fdd99f100a8d8a6e78742e0a89292634", "."),
    "fungtion+DANN": ("476147f70bb818a63bb3461a6ecc12f97f7ab15e", "."),
    "janfreyberg+pytorch-revgrad": ("330efbe28c70172d152205c8211b37e8a7491392", "src"),
    "tadeephuy+GradientReversal": ("5d9857d63fae504b712b3280f0bed71c7503e0c2", "."),
    "hustzxd+LSQuantization": ("86cf51193ec197ec607d271acaa488fd9a8ff60e", "."),
    "mmuckley+torchkbnufft": ("bda32abfeb2d9f20945f0b7dfbdd13410547e000", "."),
    "silvandeleemput+memcnn": ("439ac2673093d6e226c4f45927c50b7210036e18", "."),
}

_STE = "brevitas/ops/autograd_ste_ops.py"
# (project, file, Function, our judgement from reading it, inputs for the independent check)
TARGETS = [
    ("Xilinx+brevitas", _STE, "ScalarClampSteFn", "estimator: straight-through clamp",
     "(x, -1.0, 1.0)"),
    ("Xilinx+brevitas", _STE, "ScalarClampMinSteFn", "estimator: straight-through clamp_min",
     "(x, 0.0)"),
    ("Xilinx+brevitas", _STE, "TensorClampSteFn", "estimator: straight-through clamp",
     "(x, torch.full_like(x, -1.0), torch.full_like(x, 1.0))"),
    ("Xilinx+brevitas", _STE, "InplaceTensorClampSteFn",
     "defect + estimator: clamps its input in place without mark_dirty", None),
    ("Xilinx+brevitas", _STE, "RoundToZeroSteFn", "estimator: straight-through trunc", "(x,)"),
    ("Xilinx+brevitas", _STE, "DPURoundSteFn", "estimator: straight-through round", "(x,)"),
    ("Xilinx+brevitas", _STE, "CeilSteFn", "estimator: straight-through ceil", "(x,)"),
    ("Xilinx+brevitas", _STE, "FloorSteFn", "estimator: straight-through floor", "(x,)"),
    ("Xilinx+brevitas", _STE, "BinarySignSteFn", "estimator: straight-through sign", "(x,)"),
    ("Xilinx+brevitas", _STE, "TernarySignSteFn", "estimator: straight-through sign", "(x,)"),
    ("Xilinx+brevitas", _STE, "RoundSteFn", "estimator: straight-through round", "(x,)"),
    ("Xilinx+brevitas", _STE, "AbsBinarySignGradFn",
     "correct: abs with subgradient 1 at 0 (a kink)", "(x,)"),
    ("Zhen-Dong+HAWQ", "utils/quantization_utils/quant_utils.py", "ste_round",
     "estimator: straight-through round", "(x,)"),
    ("Zhen-Dong+HAWQ", "utils/quantization_utils/quant_utils.py",
     "transfer_float_averaging_to_int_averaging", "estimator: straight-through trunc",
     "(x, 0.01)"),
    ("Zhen-Dong+HAWQ", "utils/quantization_utils/quant_utils.py", "SymmetricQuantFunction",
     "CUDA-only forward (.cuda() inside): cannot run on this CPU machine", None),
    ("fungtion+DANN", "models/functions.py", "ReverseLayerF", "estimator: gradient reversal",
     "(x, 0.5)"),
    ("janfreyberg+pytorch-revgrad", "pytorch_revgrad/functional.py", "RevGrad",
     "estimator: gradient reversal, alpha a tensor", "(x, torch.tensor(0.7, dtype=x.dtype))"),
    ("tadeephuy+GradientReversal", "gradient_reversal/functional.py", "GradientReversal",
     "estimator: gradient reversal, alpha a tensor", "(x, torch.tensor(0.7, dtype=x.dtype))"),
    ("hustzxd+LSQuantization", "lsq.py", "FunLSQ",
     "estimator (LSQ); the module imports ipdb and a local models package", None),
    ("mmuckley+torchkbnufft", "torchkbnufft/_autograd/interp.py", "KbTableInterpForward",
     "correct complex operator (adjoint backward); needs interpolation tables", None),
    ("mmuckley+torchkbnufft", "torchkbnufft/_autograd/interp.py", "KbTableInterpAdjoint",
     "correct complex operator (adjoint backward); needs interpolation tables", None),
    ("silvandeleemput+memcnn", "memcnn/models/additive.py", "AdditiveBlockFunction",
     "first order right; modules + their parameters passed to apply; not double "
     "differentiable and crashes with a frozen parameter", None),
]

INDEPENDENT = r'''
import importlib.util, json, sys, torch
spec = importlib.util.spec_from_file_location("m", sys.argv[1])
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
fn = getattr(m, sys.argv[2])
x = torch.randn(12, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 2
args = eval(sys.argv[3])
v = torch.randn(12, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
xl = x.clone().requires_grad_()
(a,) = torch.autograd.grad(fn.apply(xl, *args[1:]), xl, v)
n = torch.zeros(12, dtype=torch.float64)
for j in range(12):
    d = torch.zeros(12, dtype=torch.float64); d[j] = 1e-6
    n[j] = (v * (fn.apply(x + d, *args[1:]) - fn.apply(x - d, *args[1:]))).sum() / 2e-6
wrong = (a - n).abs() > 1e-6 * (1 + n.abs())
ratio = (a[n != 0] / n[n != 0]).unique() if bool((n != 0).any()) else torch.tensor([])
print(json.dumps({"differ": int(wrong.sum()), "numerical_zero_where_differ":
    int(((n == 0) & wrong).sum()), "ratio": [round(float(r), 6) for r in ratio[:3]]}))
'''

# Inputs built with the libraries' public API (synthesis cannot invent interpolation tables,
# modules and their parameters); run before and after.
WITH_INPUTS = r'''
import json, sys, time, torch
import gradsmith
what = sys.argv[1]
torch.manual_seed(0)
if what.startswith("kbnufft"):
    import numpy as np, torchkbnufft as tkbn
    from torchkbnufft._autograd.interp import KbTableInterpAdjoint, KbTableInterpForward
    kb = tkbn.KbInterp(im_size=(6, 6), grid_size=(12, 12), dtype=torch.complex128)
    omega = (torch.rand(2, 10, dtype=torch.float64) * 2 - 1) * np.pi
    rest = ([kb.table_0, kb.table_1], kb.n_shift, kb.numpoints, kb.table_oversamp,
            kb.offsets.to(torch.long))
    if what == "kbnufft-forward":
        image = torch.randn(1, 1, 12, 12, dtype=torch.complex128, requires_grad=True)
        fn, args = KbTableInterpForward, (image, omega, *rest)
    else:
        data = torch.randn(1, 1, 10, dtype=torch.complex128, requires_grad=True)
        fn, args = KbTableInterpAdjoint, (data, omega, *rest, kb.grid_size)
else:
    from memcnn.models.additive import AdditiveBlockFunction as fn
    fm = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Tanh()).double()
    gm = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Tanh()).double()
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    args = (x, fm, gm, *fm.parameters(), *gm.parameters())
try:
    reference = torch.autograd.gradcheck(fn.apply, args)
except Exception as exc:
    reference = f"{type(exc).__name__}"
start = time.perf_counter()
try:
    r = gradsmith.check(fn, *args)
    out = {"verdict": "pass" if r.passed else "fail", "errors": sorted(r.codes("error"))}
except Exception as exc:
    out = {"verdict": "raised", "errors": [f"{type(exc).__name__}: {str(exc)[:160]}"]}
out.update(elapsed=round(time.perf_counter() - start, 2), gradcheck=reference)
print(json.dumps(out))
'''

DECLARED = r'''
import importlib.util, json, re, sys, torch, gradsmith
spec = importlib.util.spec_from_file_location("m", sys.argv[1])
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
fn = getattr(m, sys.argv[2])
line = sys.argv[3]
factory, key, source = re.fullmatch(
    r"@gradsmith\.example\((lambda: .*), (surrogate|intended)=(lambda .*)\)", line).groups()
namespace = {"torch": torch, fn.__name__: fn}
r = gradsmith.check(fn, *eval(factory, namespace)(), **{key: eval(source, namespace)})
print(json.dumps({"verdict": "pass" if r.passed else "fail",
                  "errors": sorted(r.codes("error"))}))
'''


def _run(python: str, code_or_args: list[str], cwd: Path, before: str | None,
         timeout: float = 600) -> tuple[str, float]:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (before, str(cwd)) if p)
    start = time.perf_counter()
    proc = subprocess.run([python, *code_or_args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)
    return proc.stdout, time.perf_counter() - start


def zero_config(python, root, file, name, before) -> dict:
    out, wall = _run(python, ["-m", "gradsmith", "check", f"{file}::{name}", "--format",
                              "json"], root, before)
    try:
        (row,) = json.loads(out)["results"]
    except (ValueError, KeyError):
        return {"verdict": "no output", "wall": round(wall, 1)}
    findings = (row.get("report") or {}).get("findings", [])
    est = [f for f in findings if f["code"] == "undeclared-estimator"]
    return {"verdict": row["verdict"], "wall": round(wall, 1),
            "errors": sorted({f["code"] for f in findings if f["severity"] == "error"}),
            "reason": (row.get("reason") or "")[:160],
            "estimator": est[0]["details"]["estimator"] if est else None,
            "declaration": est[0]["details"]["declaration"] if est else None,
            "verified": est[0]["details"]["verified"] if est else None}


def run(args) -> dict:
    rows = []
    for project, file, name, judgement, inputs in TARGETS:
        root = Path(args.checkouts) / project / PROJECTS[project][1]
        row = {"project": project, "commit": PROJECTS[project][0], "file": file,
               "function": name, "judgement": judgement}
        for label, before in (("before", args.before_src), ("after", None)):
            row[label] = zero_config(args.python, root, file, name, before)
        decl = row["after"].get("declaration")
        if decl and row["after"]["verified"]:
            out, _ = _run(args.python, ["-c", DECLARED, file, name, decl], root, None)
            row["declared"] = json.loads(out) if out.strip() else {"verdict": "no output"}
        if inputs:
            out, _ = _run(args.python, ["-c", INDEPENDENT, file, name, inputs], root, None)
            row["independent"] = json.loads(out) if out.strip() else None
        rows.append(row)
        print(name, row["before"]["verdict"], "->", row["after"]["verdict"],
              row["after"].get("errors"), flush=True)
    extra = []
    for what, project in (("kbnufft-forward", "mmuckley+torchkbnufft"),
                          ("kbnufft-adjoint", "mmuckley+torchkbnufft"),
                          ("memcnn-additive", "silvandeleemput+memcnn")):
        root = Path(args.checkouts) / project / PROJECTS[project][1]
        item = {"case": what, "project": project, "commit": PROJECTS[project][0]}
        for label, before in (("before", args.before_src), ("after", None)):
            out, _ = _run(args.python, ["-c", WITH_INPUTS, what], root, before)
            item[label] = json.loads(out.strip().splitlines()[-1]) if out.strip() else None
        extra.append(item)
        print(what, item["before"], "->", item["after"], flush=True)
    return {"rows": rows, "with_inputs": extra}


def extract(mirrors: Path, checkouts: Path) -> None:
    """Python files of each project at its recorded commit (blobs the mirror lacks skipped)."""
    for project, (commit, _) in PROJECTS.items():
        git = mirrors / project / "repo"
        git = git / ".git" if (git / ".git").is_dir() else git
        files = subprocess.run(["git", "--git-dir", str(git), "ls-tree", "-r", "--name-only",
                                commit], capture_output=True, text=True, check=True).stdout
        for f in files.split():
            if f.endswith(".py"):
                blob = subprocess.run(["git", "--git-dir", str(git), "show", f"{commit}:{f}"],
                                      capture_output=True)
                if blob.returncode == 0:
                    (checkouts / project / f).parent.mkdir(parents=True, exist_ok=True)
                    (checkouts / project / f).write_bytes(blob.stdout)


def markdown(data: dict) -> str:
    lines = ["# Real code: estimators, gradient reversal, complex operators (issue 9)", "",
             f"Recorded {data['recorded']}, load {data['load']}, python {data['python']}. "
             "Zero configuration: `gradsmith check FILE::Name --format json`, no example, no "
             "option; *before* is gradsmith at the session's start, *after* this version. "
             "*declared*: the suggested line applied. *independent*: plain PyTorch central "
             "differences vs the Function's backward (elements that differ, how many of them "
             "have a numerical gradient of exactly 0, the ratio backward/numerical).", "",
             "| project | Function | judgement | before | after | declaration suggested "
             "(verified) | declared | independent |", "|---|---|---|---|---|---|---|---|"]
    for r in data["rows"]:
        b, a = r["before"], r["after"]
        cell = lambda x: f"{x['verdict'].upper()} {' '.join(x.get('errors') or [])}".strip()  # noqa: E731
        decl = f"`{a['declaration']}` ({a['verified']})" if a.get("declaration") else ""
        dec = r.get("declared", {}).get("verdict", "").upper()
        ind = r.get("independent") or ""
        ind = (f"{ind['differ']} differ, {ind['numerical_zero_where_differ']} zero, ratio "
               f"{ind['ratio']}") if ind else ""
        lines.append(f"| {r['project']} | {r['function']} | {r['judgement']} | {cell(b)} "
                     f"{b.get('reason', '')} | {cell(a)} {a.get('reason', '')} | {decl} | "
                     f"{dec} | {ind} |")
    lines += ["", "With inputs built from the libraries' API (gradcheck as the reference):", "",
              "| case | before | after | gradcheck | time after (s) |", "|---|---|---|---|---|"]
    for e in data["with_inputs"]:
        b, a = e["before"] or {}, e["after"] or {}
        lines.append(f"| {e['case']} | {b.get('verdict')} {' '.join(b.get('errors', []))} | "
                     f"{a.get('verdict')} {' '.join(a.get('errors', []))} | "
                     f"{a.get('gradcheck')} | {a.get('elapsed')} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkouts", required=True, help="folder of extracted projects")
    parser.add_argument("--extract", metavar="MIRRORS", help="first extract from these mirrors")
    parser.add_argument("--before-src", required=True, help="gradsmith src of the baseline")
    parser.add_argument("--python", default=sys.executable, help="interpreter to run checks")
    args = parser.parse_args()
    if args.extract:
        extract(Path(args.extract), Path(args.checkouts))
    data = run(args)
    data.update(recorded=time.strftime("%Y-%m-%d %H:%M"), load=os.getloadavg()[0],
                python=subprocess.run([args.python, "-c", "import torch, sys; print("
                                       "sys.version.split()[0], torch.__version__)"],
                                      capture_output=True, text=True).stdout.strip())
    sys.path.insert(0, str(HERE.parent / "src"))
    from gradsmith.bench.report import write_results

    write_results(data, markdown(data), HERE / "results", "real_code_estimators")


if __name__ == "__main__":
    main()
