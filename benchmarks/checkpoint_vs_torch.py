"""gradsmith checkpoint_sequential vs torch.utils.checkpoint (use_reentrant=False): time, memory.

Both checkpoint the same segments of the same layers (torch's own ``checkpoint_sequential``
leaves the last segment un-checkpointed, so the reference wraps every segment in
``torch.utils.checkpoint.checkpoint`` instead). Time: median and interquartile spread of
interleaved forward+backward runs after warm-up. Memory: from the profiler's allocation events
(``profile_memory=True``): bytes still held when the forward returns (what checkpointing saves)
and the peak over forward+backward, both relative to the start. A plain run (no checkpoint) is
shown for scale.

    python benchmarks/checkpoint_vs_torch.py            # writes results/checkpoint_vs_torch.*
    python benchmarks/checkpoint_vs_torch.py --repeats 5 --no-write
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile
from torch.utils.checkpoint import checkpoint

from gradsmith.bench import environment, interleaved
from gradsmith.bench.report import write_results
from gradsmith.functional import checkpoint_sequential
from gradsmith.ops._checkpoint import _split

RESULTS = Path(__file__).parent / "results"


def make_layers(width=512, hidden=2048, blocks=4):
    torch.manual_seed(0)
    layers = []
    for _ in range(blocks):
        layers += [nn.Linear(width, hidden), nn.GELU(), nn.Dropout(0.1), nn.Linear(hidden, width),
                   nn.LayerNorm(width)]
    return layers


def torch_checkpointed(layers, x, segments):
    for group in _split(layers, segments):
        x = checkpoint(nn.Sequential(*group), x, use_reentrant=False)
    return x


def plain(layers, x, segments):
    for layer in layers:
        x = layer(x)
    return x


def _zero_grads(layers, x):
    x.grad = None
    for layer in layers:
        layer.zero_grad(set_to_none=True)


def memory(fn, layers, x, segments) -> dict:
    """Bytes held after forward and peak bytes over forward+backward, relative to the start."""
    _zero_grads(layers, x)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        out = fn(layers, x, segments)
        fwd_end = time.time_ns()
        out.sum().backward()
        del out
    events = sorted((e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events()
                    if e.name() == "[memory]")
    # kineto timestamps are wall-clock ns on this host, like time.time_ns()
    current = peak = after_forward = 0
    for t, nbytes in events:
        current += nbytes
        peak = max(peak, current)
        if t <= fwd_end:
            after_forward = current
    return {"after_forward_bytes": after_forward, "peak_bytes": peak}


def case(segments, repeats, shape=(8, 128, 512)):
    layers = make_layers()
    x = torch.randn(*shape, requires_grad=True)
    fns = {"ours": checkpoint_sequential_fn, "torch": torch_checkpointed, "plain": plain}

    def fresh():
        _zero_grads(layers, x)
        return layers, x, segments

    stats = interleaved({name: (fn, fresh) for name, fn in fns.items()}, repeat=repeats,
                        warmup=2, alternate=True)
    mem = {name: memory(fn, layers, x, segments) for name, fn in fns.items()}
    row = {"segments": segments, "shape": list(shape), "layers": len(layers)}
    for name in fns:
        row[name] = {"time_s": stats[name].to_dict("s"), **mem[name]}
    row["time_ratio"] = stats["ours"].median / stats["torch"].median
    row["peak_ratio"] = mem["ours"]["peak_bytes"] / mem["torch"]["peak_bytes"]
    row["after_forward_ratio"] = (mem["ours"]["after_forward_bytes"]
                                  / mem["torch"]["after_forward_bytes"])
    return row


def checkpoint_sequential_fn(layers, x, segments):
    return checkpoint_sequential(layers, x, segments)


def to_markdown(rows, env) -> str:
    mib = 2**20
    lines = [
        "# checkpoint_sequential vs torch.utils.checkpoint (use_reentrant=False)", "",
        "20 layers (4 x Linear 512->2048, GELU, Dropout 0.1, Linear 2048->512, LayerNorm), "
        "x (8, 128, 512) fp32, forward+backward.", "",
        "| segments | ours median s [IQR] | torch median s [IQR] | plain s | time ratio | "
        "held after fwd MiB ours / torch / plain | peak MiB ours / torch / plain | "
        "peak ratio |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        o, t, p = r["ours"], r["torch"], r["plain"]
        lines.append(
            f"| {r['segments']} | {o['time_s']['median']:.3f} [{o['time_s']['q1']:.3f}, "
            f"{o['time_s']['q3']:.3f}] | {t['time_s']['median']:.3f} [{t['time_s']['q1']:.3f}, "
            f"{t['time_s']['q3']:.3f}] | {p['time_s']['median']:.3f} | {r['time_ratio']:.2f} | "
            f"{o['after_forward_bytes'] / mib:.1f} / {t['after_forward_bytes'] / mib:.1f} / "
            f"{p['after_forward_bytes'] / mib:.1f} | {o['peak_bytes'] / mib:.1f} / "
            f"{t['peak_bytes'] / mib:.1f} / {p['peak_bytes'] / mib:.1f} | "
            f"{r['peak_ratio']:.3f} |")
    lines += ["", "Environment: " + ", ".join(f"{k}={v}" for k, v in env.items()), ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--no-write", action="store_true")
    ns = parser.parse_args(argv)
    env = environment()
    rows = []
    for segments in (1, 2, 4):
        rows.append(case(segments, ns.repeats))
        print(json.dumps(rows[-1]), flush=True)
    md = to_markdown(rows, env)
    print(md)
    if not ns.no_write:
        write_results({"environment": env, "rows": rows}, md, RESULTS, "checkpoint_vs_torch")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
