"""Soft sort/rank against torchsort over regularization strengths, and LSQ/PACT against PyTorch.

Run with a Python that has torchsort installed to get the anchor column (it builds only with
nvcc hidden from PATH and ``--no-build-isolation``); without it the reference is gradsmith's
torch-only PAV solver. Writes benchmarks/results/sort_quant_sweep.{json,md}.

    python benchmarks/sort_quant_sweep.py [--repeat 15] [--quick] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import torch

import gradsmith.functional as G
from gradsmith.bench import environment, interleaved, saved_bytes
from gradsmith.bench.report import write_results
from gradsmith.ops._pav_native import torch_solver

RESULTS = Path(__file__).resolve().parent / "results"


def _anchor():
    try:
        import torchsort
    except ImportError:
        return None
    return torchsort


def _torch_only(op):
    def run(*args):
        with torch_solver():
            return op(*args)
    return run


def _row(name, size, candidates, make, repeat):
    stats = interleaved({k: (fn, make) for k, fn in candidates.items()}, repeat=repeat, warmup=3)
    row = {"case": name, "size": size}
    for k, fn in candidates.items():
        row[f"{k}_ms"] = stats[k].median
        row[f"{k}_iqr_ms"] = [stats[k].q1, stats[k].q3]
        row[f"{k}_saved_bytes"] = saved_bytes(fn, make())
    return row


def sort_rows(repeat: int, quick: bool):
    ts = _anchor()
    rows = []
    sizes = [(8, 64)] if quick else [(8, 1000), (8, 10000)]
    for rows_, n in sizes:
        for op_name in ("soft_rank", "soft_sort"):
            for reg in ("l2", "kl"):
                for eps in (0.01, 0.1, 1.0):
                    op = getattr(G, op_name)
                    cands = {"gradsmith": lambda x, op=op, r=reg, e=eps: op(x, r, e),
                             "gradsmith_torch_only": _torch_only(
                                 lambda x, op=op, r=reg, e=eps: op(x, r, e))}
                    if ts is not None:
                        ref = getattr(ts, op_name)
                        cands["torchsort"] = lambda x, ref=ref, r=reg, e=eps: ref(x, r, e)

                    def make(rows_=rows_, n=n):
                        g = torch.Generator().manual_seed(0)
                        return (torch.randn(rows_, n, generator=g).requires_grad_(),)

                    rows.append(_row(f"{op_name} {reg} eps={eps}", f"{rows_}x{n}", cands, make,
                                     repeat))
    return rows


def quant_rows(repeat: int, quick: bool):
    n = 4096 if quick else 4 * 1024 * 1024

    def make_lsq():
        g = torch.Generator().manual_seed(0)
        return (torch.randn(n, generator=g).requires_grad_(),
                torch.tensor([0.05], requires_grad=True))

    factor = 1 / math.sqrt(n * 127)
    lsq = {"gradsmith": lambda x, s: G.fake_quantize_lsq(x, s, 8),
           "torch_learnable": lambda x, s: torch._fake_quantize_learnable_per_tensor_affine(
               x, s, torch.zeros(1), -128, 127, factor),
           "plain_surrogate": lambda x, s: G.lsq_surrogate(x, s, 8)}

    def make_pact():
        g = torch.Generator().manual_seed(0)
        return (torch.randn(n, generator=g).mul(3).requires_grad_(),
                torch.tensor(4.0, requires_grad=True))

    pact = {"gradsmith": lambda x, a: G.pact(x, a, 8),
            "plain_surrogate": lambda x, a: G.pact_surrogate(x, a, 8)}
    size = f"{n} elements"
    return [_row("fake_quantize_lsq 8-bit", size, lsq, make_lsq, repeat),
            _row("pact 8-bit", size, pact, make_pact, repeat)]


def _markdown(rows):
    lines = ["| case | size | implementation | fwd+bwd ms (IQR) | saved |", "|---|---|---|---|---|"]
    for r in rows:
        for k in (k for k in r if k.endswith("_ms") and not k.endswith("_iqr_ms")):
            who = k[:-3]
            q1, q3 = r[f"{who}_iqr_ms"]
            saved = r[f"{who}_saved_bytes"] / 1024
            lines.append(f"| {r['case']} | {r['size']} | {who} | {r[k]:.3g} ({q1:.3g}-{q3:.3g})"
                         f" | {saved:.1f} KiB |")
    return "\n".join(lines)


def _ratio_table(rows):
    """The docs' table: gradsmith against torchsort (or the torch-only solver) per case."""
    has_ts = any("torchsort_ms" in r for r in rows)
    ref = "torchsort" if has_ts else "gradsmith_torch_only"
    lines = [f"| case | size | gradsmith ms | {ref} ms | ratio | torch-only solver ms "
             f"| saved, gradsmith / {ref} |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['case']} | {r['size']} | {r['gradsmith_ms']:.3g} | {r[ref + '_ms']:.3g} "
            f"| {r['gradsmith_ms'] / r[ref + '_ms']:.2f} | {r['gradsmith_torch_only_ms']:.3g} "
            f"| {r['gradsmith_saved_bytes'] / 1024:.0f} / {r[ref + '_saved_bytes'] / 1024:.0f} KiB |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch intra-op threads (default: torch's own choice)")
    args = parser.parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    sort, quant = sort_rows(args.repeat, args.quick), quant_rows(args.repeat, args.quick)
    env = environment()
    stem = "sort_quant_sweep_quick" if args.quick else "sort_quant_sweep"
    if args.threads is not None:
        stem += f"_t{args.threads}"
    md = (f"# Soft sort and quantization sweep\n\nEnvironment: `{json.dumps(env)}`\n\n"
          f"Forward+backward median of {args.repeat} interleaved runs (ms), saved bytes.\n\n"
          f"## Soft sort / rank\n\n{_ratio_table(sort)}\n\n{_markdown(sort)}\n\n## Quantization\n\n{_markdown(quant)}\n")
    write_results({"environment": env, "repeat": args.repeat, "sort": sort, "quant": quant}, md,
                  RESULTS, stem)
    print(md)


if __name__ == "__main__":
    main()
