"""Native Triton check of two kernel libraries, judged against plain-PyTorch references.

One prepared step for a GPU session (the device tool's 15 minutes leave no room to improvise):
runs ``gradsmith check`` natively (zero configuration, as ``benchmarks/triton_reach.py`` does on
the CPU) on Liger-Kernel's and attorch's Triton-backed Functions, and, beside it, each Function
on gradsmith's own synthesised inputs against an independent plain-PyTorch reference (float64
autograd of the same arguments, a seeded random grad_output): the worst relative error of every
output and input gradient over the input sets. A row then says whether gradsmith's gradient
verdict and the reference agree: a gradient finding on an input whose reference gradient
agrees is a false alarm, a reference disagreement without a finding is a miss; the other codes
(double backward, mutation, layouts) are listed as not judged here (read the code).

No third-party code is in this repository: the libraries are checked where they were
extracted, and the references live beside them, outside it (``--refs DIR`` with
``liger_refs.py`` and ``attorch_refs.py``, each a ``REFS`` dict ``"<module>.<Class>"`` ->
callable of the Function's forward arguments, and optionally ``ADJUST``, the same keys ->
a function making synthesised arguments realistic, e.g. rotary cos/sin tables).

Usage (from the repository root; also runs on a CPU, interpreted, for a dry run with --only):
    python benchmarks/triton_gpu_judge.py --liger LIGER/src --attorch ATTORCH --refs REFS \\
        --out OUT [--jobs 14] [--timeout 90] [--only rms_norm.py,tvd.py]

Writes to OUT (6 files): env.json, liger_check.json and attorch_check.json (``gradsmith check
--format json``), judged.json (rows), judged.md (the tables), log.txt (stderr of every step).
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
SRC = HERE.parent / "src"
#: Relative error (to the reference's largest entry) below which a quantity agrees, and above
#: which it is clearly off; between, the row says "close" and the code is read.
AGREE, OFF = 5e-3, 5e-2
GRADIENT_CODES = {"gradient-mismatch", "reference-mismatch", "nan-gradient"}
#: The plans of benchmarks/results/triton_reach.md: each library's Triton-backed Functions on
#: its default path (package dir, files, repository and commit checked on the CPU).
LIBRARIES = {
    "liger": ("linkedin/Liger-Kernel @ ead96b618e5c", "liger_kernel/ops", [
        "attn_res.py", "cross_entropy.py", "dyt.py", "fused_add_rms_norm.py",
        "fused_linear_cross_entropy.py", "fused_linear_jsd.py",
        "fused_linear_scaled_cross_entropy.py", "fused_moe.py", "fused_neighborhood_attention.py",
        "geglu.py", "group_norm.py", "grpo_loss.py", "jsd.py", "kl_div.py", "layer_norm.py",
        "llama4_rope.py", "mhc.py", "mlp.py", "modulated_rms_norm.py",
        "multi_token_attention.py", "poly_norm.py", "qwen2vl_mrope.py", "relu_squared.py",
        "rms_norm.py", "rope.py", "softmax.py", "sparsemax.py", "swiglu.py", "tiled_mlp.py",
        "tvd.py", "vocab_parallel_cross_entropy.py"]),
    "attorch": ("BobMcDear/attorch @ 67c2772baf33", "attorch", [
        "act_layers.py", "batch_norm_layer.py", "conv_layer.py", "cross_entropy_loss_layer.py",
        "dropout_layer.py", "glu_layer.py", "layer_norm_layer.py", "linear_layer.py",
        "multi_head_attention_kernels.py", "nll_loss_layer.py", "p_loss_layers.py",
        "rms_norm_layer.py", "softmax_layers.py"]),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--liger", required=True, help="directory holding liger_kernel/")
    parser.add_argument("--attorch", required=True, help="directory holding attorch/")
    parser.add_argument("--refs", required=True, help="directory of the *_refs.py files")
    parser.add_argument("--out", required=True)
    parser.add_argument("--jobs", type=int, default=14)
    parser.add_argument("--timeout", type=int, default=90)
    parser.add_argument("--only", default="", help="comma-separated file names (a dry run)")
    parser.add_argument("--budget", type=float, default=520,
                        help="seconds for everything (the device tool stops a command at 600)")
    parser.add_argument("--judge", help=argparse.SUPPRESS)  # internal: library key
    parser.add_argument("--keys", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.judge:
        return judge_all(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = environment()
    (out / "env.json").write_text(json.dumps(env, indent=1) + "\n")
    log = open(out / "log.txt", "w", buffering=1)  # noqa: SIM115 - every step appends to it
    only = {f for f in args.only.split(",") if f}
    deadline = time.monotonic() + args.budget
    rows = []
    for lib, (title, package, files) in LIBRARIES.items():
        root = Path(getattr(args, lib)).resolve()
        files = [f for f in files if not only or f in only]
        if not files:
            continue
        judges = start_judges(args, lib, root, package, files, log)
        # Liger first, with most of the time; what is written survives a stop
        left = deadline - time.monotonic()
        check = run_check(args, lib, root, package, files, out, log,
                          left * (0.6 if lib == "liger" and not only else 1.0))
        refs = collect(judges, log, max(30.0, deadline - time.monotonic()))
        rows += [judged_row(lib, title, r, refs.get(_key(r["name"]))) for r in check]
        (out / "judged.json").write_text(json.dumps(rows, indent=1) + "\n")
        (out / "judged.md").write_text(render(rows, env))
    print((out / "judged.md").read_text())


def environment() -> dict:
    import torch

    def dist(name: str) -> str | None:
        from importlib.metadata import version

        try:
            return version(name)
        except Exception:  # noqa: BLE001
            return None

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    commit = subprocess.run(["git", "-C", str(HERE), "rev-parse", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or None
    return {"python": platform.python_version(), "torch": torch.__version__,
            "cuda": torch.version.cuda, "triton": dist("triton"), "gpu": gpu,
            "cpus": os.cpu_count(), "gradsmith_commit": commit,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}


def _env(root: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), str(root), env.get("PYTHONPATH")]))
    return env


def run_check(args, lib: str, root: Path, package: str, files: list[str], out: Path,
              log, seconds: float) -> list[dict]:
    """``gradsmith check`` on the files, natively where a GPU is visible; its rows."""
    started = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "gradsmith", "check", *(f"{package}/{f}" for f in files),
             "--no-compat", "--format", "json", "--jobs", str(args.jobs), "--timeout",
             str(args.timeout)],
            # from the root: a package's own types.py or enum.py must not shadow the stdlib's
            cwd=root, env=_env(root), capture_output=True, text=True, timeout=max(30, seconds))
    except subprocess.TimeoutExpired:
        log.write(f"== {lib} check: stopped after {seconds:.0f} s (--budget)\n")
        return []
    log.write(f"== {lib} check: rc {proc.returncode}, {time.perf_counter() - started:.0f} s\n"
              f"{proc.stderr[-4000:]}\n")
    (out / f"{lib}_check.json").write_text(proc.stdout)
    try:
        return json.loads(proc.stdout)["results"]
    except (ValueError, KeyError):
        return []


def start_judges(args, lib: str, root: Path, package: str, files: list[str], log):
    """The reference runs, in a process of their own beside the check."""
    sys.path.insert(0, str(Path(args.refs).resolve()))
    refs = __import__(f"{lib}_refs").REFS
    keys = [k for k in refs if f"{k.rsplit('.', 1)[0]}.py" in files]
    cmd = [sys.executable, __file__, "--judge", lib, "--keys", ",".join(keys), "--liger",
           args.liger, "--attorch", args.attorch, "--refs", str(Path(args.refs).resolve()),
           "--out", args.out]
    return subprocess.Popen(cmd, env=_env(root), stdout=subprocess.PIPE, stderr=log, text=True,
                            cwd=root), keys, cmd, root


def collect(judges, log, seconds: float) -> dict:
    """Rows of the reference runs by key, within ``seconds``; a run that dies is restarted
    after the key it was on (a CUDA error poisons its process), which is marked."""
    proc, keys, cmd, root = judges
    deadline = time.monotonic() + seconds
    done: dict = {}
    while True:
        try:
            out, _ = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
            stopped = False
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
            stopped = True
        for line in out.splitlines():
            if line.startswith("{"):
                row = json.loads(line)
                done[row["key"]] = row
        left = [k for k in keys if k not in done]
        if proc.returncode == 0 or not left:
            return done
        if stopped:
            done.update({k: {"key": k, "error": "no time left (--budget)"} for k in left})
            return done
        done[left[0]] = {"key": left[0], "error": f"the reference run died (rc {proc.returncode})"}
        log.write(f"judge died on {left[0]}, restarting\n")
        cmd = [*cmd[:cmd.index("--keys") + 1], ",".join(left[1:]), *cmd[cmd.index("--keys") + 2:]]
        proc = subprocess.Popen(cmd, env=_env(root), stdout=subprocess.PIPE, stderr=log,
                                text=True, cwd=root)


def judge_all(args) -> None:
    """(In its own process.) One JSON line per Function: reference errors over its sets."""
    from gradsmith._triton import prepare

    prepare()  # before the kernels' modules load, as gradsmith check does
    sys.path.insert(0, args.refs)
    module = __import__(f"{args.judge}_refs")
    package = LIBRARIES[args.judge][1].replace("/", ".")
    for key in filter(None, args.keys.split(",")):
        try:
            row = judge_one(package, key, module.REFS[key], getattr(module, "ADJUST", {}).get(key))
        except Exception as exc:  # noqa: BLE001 - third-party code: a row, not a crash
            row = {"key": key, "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        print(json.dumps(row), flush=True)


def judge_one(package: str, key: str, ref, adjust) -> dict:
    import importlib

    import torch

    from gradsmith.discovery import NoInputs, parameter_names, synthesize

    mod, cls = key.rsplit(".", 1)
    fn = getattr(importlib.import_module(f"{package}.{mod}"), cls)
    found = synthesize(fn)
    if isinstance(found, NoInputs):
        return {"key": key, "error": "no inputs synthesised (as in the check)"}
    names = parameter_names(fn)
    worst: dict[str, float] = {}
    sets = [("first", found.args)] + [(v.change, v.args) for v in found.variants]
    for _, args in sets:
        args = list(adjust(list(args)) if adjust else args)
        leaves = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.requires_grad]
        mine = _run(fn.apply, args, leaves, torch)
        theirs = _run(ref, [a.detach().double().requires_grad_(a.requires_grad)
                            if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                            for a in args], leaves, torch)
        labels = [f"out[{i}]" for i in range(min(len(mine[0]), len(theirs[0])))] + \
            [names[i] if i < len(names) else f"arg{i}" for i in leaves]
        for label, a, b in zip(labels, mine[0][:len(labels) - len(leaves)] + mine[1],
                               theirs[0][:len(labels) - len(leaves)] + theirs[1]):
            err = _relative(a, b, torch)
            worst[label] = max(worst.get(label, 0.0), err)
    return {"key": key, "sets": len(sets), "worst": worst,
            "dtype": str(next(a for a in found.args if isinstance(a, torch.Tensor)).dtype)}


def _run(f, args, leaves, torch):
    args = [a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor)
            else a for a in args]
    out = f(*args)
    outs = [o for o in (out if isinstance(out, (tuple, list)) else (out,))
            if isinstance(o, torch.Tensor) and o.is_floating_point()]
    gen = torch.Generator().manual_seed(1)
    gs = [torch.randn(o.shape, generator=gen, dtype=torch.float64).to(o.device, o.dtype)
          for o in outs]
    used = [(o, g) for o, g in zip(outs, gs) if o.requires_grad]
    grads = torch.autograd.grad([o for o, _ in used], [args[i] for i in leaves],
                                [g for _, g in used], allow_unused=True) if used else []
    return ([o.detach().double() for o in outs],
            [torch.zeros_like(args[i]).double() if g is None else g.double()
             for i, g in zip(leaves, grads)])


def _relative(a, b, torch) -> float:
    if a.shape != b.shape:
        return float("inf")
    scale = float(b.abs().max()) if b.numel() else 0.0
    diff = float((a.to(b.device) - b).abs().max()) if b.numel() else 0.0
    return diff / max(scale, 1e-12)


def _key(name: str) -> str:
    file, _, cls = name.split("/")[-1].partition("::")
    return f"{file.removesuffix('.py')}.{cls}"


def judged_row(lib: str, title: str, r: dict, ref: dict | None) -> dict:
    """gradsmith's row beside the reference's errors, and whether they agree."""
    findings = (r.get("report") or {}).get("findings", [])
    errors = sorted({(f["code"], f.get("input") or "") for f in findings
                     if f["severity"] == "error"})
    gradient = {i for c, i in errors if c in GRADIENT_CODES}
    precision = [f["message"][:160] for f in findings if f["code"] in
                 ("float64-unsupported", "float64-crash", "low-precision-numerics")]
    row = {"library": title, "function": r["name"], "verdict": r["verdict"],
           "error": r.get("error"), "seconds": round(r.get("elapsed") or 0.0, 1),
           "gradient_errors": sorted(f"{c}[{i}]" for c, i in errors if c in GRADIENT_CODES),
           "other_errors": sorted(f"{c}[{i}]" for c, i in errors if c not in GRADIENT_CODES),
           "precision": precision, "reason": (r.get("reason") or "")[:200],
           "reference": ref}
    if r["verdict"] == "skip" or r.get("error") in ("exception", "import", "crash"):
        row["judgement"] = "not reached"
    elif ref is None:
        row["judgement"] = "no reference: judge by reading the code"
    elif "error" in ref:
        row["judgement"] = f"reference did not run: {ref['error'][:120]}"
    else:
        grads = {k: v for k, v in ref["worst"].items() if not k.startswith("out[")}
        false = sorted(i for i in gradient if grads.get(i, 1.0) <= AGREE)
        missed = sorted(i for i, e in grads.items() if e > OFF and i not in gradient)
        words = [f"false alarm on {', '.join(false)}"] if false else []
        words += [f"missed: {', '.join(missed)} off"] if missed else []
        row["judgement"] = "; ".join(words) or ("consistent" if r.get("error") is None
                                                else f"consistent so far ({r['error']})")
    return row


def render(rows: list[dict], env: dict) -> str:
    lines = ["# Native Triton check, judged against plain-PyTorch references", "",
             f"Environment: {env}", "",
             f"Reference columns: worst relative error over the input sets (agrees <= {AGREE:g}, "
             f"off > {OFF:g}). Only gradient findings ({', '.join(sorted(GRADIENT_CODES))}) "
             "are judged by the reference; other errors are listed for reading.", ""]
    for title in dict.fromkeys(r["library"] for r in rows):
        mine = [r for r in rows if r["library"] == title]
        reached = [r for r in mine if r["judgement"] != "not reached"]
        bad = [r for r in mine if "false alarm" in r["judgement"] or "missed" in r["judgement"]]
        lines += [f"## {title}", "", f"{len(mine)} Functions, {len(reached)} reached a verdict "
                  f"({'natively on ' + env['gpu'] if env.get('gpu') else 'interpreted'}), {len(bad)} with a false alarm or a miss on gradients.", "",
                  "| Function | verdict | s | gradient errors | other errors (read) | reference "
                  "| judgement | precision |", "|---|---|---|---|---|---|---|---|"]
        for r in mine:
            ref = r["reference"] or {}
            worst = ", ".join(f"{k} {v:.1e}" for k, v in ref.get("worst", {}).items()) or \
                ref.get("error", "-")
            lines.append(
                f"| {r['function']} | {r['verdict']}{' (' + r['error'] + ')' if r['error'] else ''}"
                f" | {r['seconds']} | {', '.join(r['gradient_errors']) or '-'} | "
                f"{', '.join(r['other_errors']) or '-'} | {worst[:160]} | {r['judgement']} | "
                f"{'; '.join(r['precision'])[:160] or r['reason'][:100] or '-'} |".replace("\n", " "))
        lines.append("")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
