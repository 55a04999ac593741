"""gradsmith attention vs torch.nn.functional.scaled_dot_product_attention: time and saved bytes.

Forward+backward time: median (and interquartile spread) of interleaved runs in one process,
after warm-up, alternating which op goes first. Saved bytes: every tensor autograd packs for
backward (``saved_tensors_hooks``), each storage counted once.

    python benchmarks/attention_vs_sdpa.py                 # the issue's targets, writes results/
    python benchmarks/attention_vs_sdpa.py --tune          # key-block sweep
    python benchmarks/attention_vs_sdpa.py --repeats 5 --no-write   # quick look

Rows say which path ran: "fused" (PyTorch's CPU flash kernel inside our Function: no mask, bias
or dropout) or "blockwise" (the Python kernels); one extra no-bias row forces the blockwise path
to show what the fused path buys.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from gradsmith.bench import environment, interleaved, saved_bytes
from gradsmith.bench.report import write_json, write_results
from gradsmith.functional import attention
from gradsmith.ops._attention import _AttentionFn
from gradsmith.ops._attention_fused import use_fused
from gradsmith.ops._attention_kernels import DEFAULT_BLOCK

RESULTS = Path(__file__).parent / "results"


def compare(ours, ref, inputs, repeats: int, warmup: int = 2, clock=time.perf_counter) -> dict:
    """Interleaved forward+backward timing (alternating which goes first) and saved bytes of
    two closures over the leaves ``inputs``; ratios are ours / ref, times in seconds."""

    def fresh():
        for t in inputs:
            t.grad = None
        return ()

    stats = interleaved({"ours": (ours, fresh), "ref": (ref, fresh)}, repeat=repeats,
                        warmup=warmup, alternate=True, clock=clock)
    b_ours, b_ref = saved_bytes(ours, ()), saved_bytes(ref, ())
    return {
        "ours_s": stats["ours"].to_dict("s"), "ref_s": stats["ref"].to_dict("s"),
        "time_ratio": stats["ours"].median / stats["ref"].median,
        "ours_saved_bytes": b_ours, "ref_saved_bytes": b_ref,
        "saved_ratio": b_ours / b_ref,
    }


def make_inputs(batch, heads, length, dim, with_bias, seed=0):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(batch, heads, length, dim, generator=g, requires_grad=True)
               for _ in range(3))
    bias = (torch.randn(heads, length, length, generator=g, requires_grad=True)
            if with_bias else None)
    return q, k, v, bias


def make_rel(heads, L, S, seed=1):
    """A compact relative bias leaf (H, L+S-1) and the dense (H, L, S) leaf with its values."""
    rel = torch.randn(heads, L + S - 1, generator=torch.Generator().manual_seed(seed))
    dense = rel[:, torch.arange(S) - torch.arange(L)[:, None] + L - 1]
    return rel.requires_grad_(), dense.contiguous().requires_grad_()


def case(batch, heads, length, dim, bias, repeats, causal=False, blockwise=False,
         clock=time.perf_counter):
    """One row; ``bias`` is None, "dense" (H, L, S) or "rel" (ours (H, L+S-1), SDPA dense)."""
    q, k, v, _ = make_inputs(batch, heads, length, dim, False)
    rel, dense = make_rel(heads, length, length) if bias else (None, None)
    ours_bias = dense if bias == "dense" else None
    ours_rel = rel if bias == "rel" else None
    inputs = [t for t in (q, k, v, ours_bias, ours_rel, dense) if t is not None]
    fused = use_fused(q, k, v, None, dense, 0.0) and not blockwise

    def ours():
        if blockwise:  # the Python kernels, as attention() runs them when the fused path is off
            return _AttentionFn.apply(q, k, v, None, ours_bias, ours_rel, None, causal,
                                      dim ** -0.5, 0.0, 0, DEFAULT_BLOCK, False)[0]
        return attention(q, k, v, bias=ours_bias, is_causal=causal, rel_bias=ours_rel)

    def ref():
        return F.scaled_dot_product_attention(q, k, v, attn_mask=dense, is_causal=causal)

    row = compare(ours, ref, inputs, repeats, clock=clock)
    row.update(batch=batch, heads=heads, length=length, dim=dim, bias=bias or "none",
               causal=causal, path="fused" if fused else "blockwise")
    return row


def _block_case(with_bias, block, repeats, clock):
    q, k, v, bias = make_inputs(4, 4, 1024, 64, with_bias)
    inputs = [t for t in (q, k, v, bias) if t is not None]

    def ours():
        return _AttentionFn.apply(q, k, v, None, bias, None, None, False, 0.125, 0.0, 0, block,
                                  False)[0]

    def ref():
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias)

    r = compare(ours, ref, inputs, repeats, clock=clock)
    return {"bias": with_bias, "block": block, "time_ratio": r["time_ratio"],
            "ours_median_s": r["ours_s"]["median"], "sdpa_median_s": r["ref_s"]["median"]}


def tune(repeats, clock=time.perf_counter):
    """Key-block sweep: the time of each block size relative to SDPA."""
    rows = []
    for with_bias in (False, True):
        for block in (128, 256, 512, 1024):
            rows.append(_block_case(with_bias, block, repeats, clock))
            print(rows[-1], flush=True)
    return rows


def to_markdown(rows, env) -> str:
    lines = [
        "# attention vs F.scaled_dot_product_attention (fp32, forward+backward)", "",
        "| B | H | L | d | bias (grad; SDPA always dense (H,L,S)) | causal | path | ours median s [IQR] "
        "| SDPA median s [IQR] | time ratio | saved MiB ours / SDPA | saved ratio |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        o, s = r["ours_s"], r["ref_s"]
        lines.append(
            f"| {r['batch']} | {r['heads']} | {r['length']} | {r['dim']} | {r['bias']} | "
            f"{r['causal']} | {r['path']} | {o['median']:.3f} [{o['q1']:.3f}, {o['q3']:.3f}] | "
            f"{s['median']:.3f} [{s['q1']:.3f}, {s['q3']:.3f}] | {r['time_ratio']:.2f} | "
            f"{r['ours_saved_bytes'] / 2**20:.1f} / {r['ref_saved_bytes'] / 2**20:.1f} | "
            f"{r['saved_ratio']:.2f} |")
    lines += ["", "Environment: " + ", ".join(f"{k}={v}" for k, v in env.items()), ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--tune", action="store_true")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--batch", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--only-bias", action="store_true",
                        help="only the rows at --batch (no causal / forced-blockwise rows)")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="cpu: this thread's CPU time, robust to a busy machine; needs "
                             "--threads 1 (all work then runs on the calling thread)")
    ns = parser.parse_args(argv)
    if ns.threads:
        torch.set_num_threads(ns.threads)
    if ns.clock == "cpu" and torch.get_num_threads() != 1:
        parser.error("--clock cpu needs --threads 1")
    clock = time.thread_time if ns.clock == "cpu" else time.perf_counter
    torch.manual_seed(0)
    env = environment()
    env["clock"] = ns.clock
    suffix = "" if ns.clock == "wall" and not ns.threads else f"_{ns.clock}_t{ns.threads}"
    if ns.tune:
        rows = tune(ns.repeats, clock)
        if not ns.no_write:
            write_json({"environment": env, "rows": rows},
                       RESULTS / f"attention_block_tuning{suffix}.json")
        return 0
    rows = []
    for batch in ns.batch:
        for bias in (None, "dense", "rel"):
            rows.append(case(batch, 4, 1024, 64, bias, ns.repeats, clock=clock))
            print(json.dumps(rows[-1]), flush=True)
    if not ns.only_bias:
        rows.append(case(4, 4, 1024, 64, None, ns.repeats, causal=True, clock=clock))
        print(json.dumps(rows[-1]), flush=True)
        rows.append(case(4, 4, 1024, 64, None, ns.repeats, blockwise=True, clock=clock))
        print(json.dumps(rows[-1]), flush=True)
    md = to_markdown(rows, env)
    print(md)
    if not ns.no_write:
        write_results({"environment": env, "rows": rows}, md, RESULTS, f"attention_vs_sdpa{suffix}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
