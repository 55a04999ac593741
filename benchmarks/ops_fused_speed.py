"""Forward + backward time of the fused part-1 ops against the plain compositions.

"Fused" here means fused *for memory* (one autograd node saving a mask); on CPU the forward
still runs the same ATen kernels, so this measures what the saving costs or gains in time.
Method (``gradsmith.bench.interleaved``): ``WARMUP`` untimed rounds, then ``REPEATS`` rounds;
in each round every variant runs once (interleaved, so drift hits all alike); we report the
median and the interquartile range per variant.

Usage: ``python benchmarks/ops_fused_speed.py`` (writes benchmarks/results/ops_fused_speed.{md,json}).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

import gradsmith.functional as G
from gradsmith.bench import environment, interleaved
from gradsmith.bench.report import write_results

ROWS, COLS = 512, 1024
WARMUP, REPEATS = 5, 31
RESULTS = Path(__file__).resolve().parent / "results"


def _leaf(*shape: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen).requires_grad_()


def _step(fn: Callable[..., torch.Tensor], args: list[torch.Tensor]) -> Callable[[], None]:
    def run() -> None:
        out = fn(*args)
        torch.autograd.grad(out, args, torch.ones_like(out))
    return run


def cases() -> list[tuple[str, Callable[[], None], Callable[[], None]]]:
    x, y = _leaf(ROWS, COLS, seed=0), _leaf(ROWS, COLS, seed=1)
    w1, b1 = _leaf(COLS, COLS, seed=2), _leaf(COLS, seed=3)
    w2, b2 = _leaf(COLS, COLS, seed=4), _leaf(COLS, seed=5)
    return [
        ("fused_add_relu vs F.relu(x + y)",
         _step(G.fused_add_relu, [x, y]), _step(lambda a, b: F.relu(a + b), [x, y])),
        ("fused_linear_relu vs F.relu(F.linear)",
         _step(G.fused_linear_relu, [x, w1, b1]),
         _step(lambda a, w, b: F.relu(F.linear(a, w, b)), [x, w1, b1])),
        ("Linear -> ReLU -> Linear chain",
         _step(lambda a, w, b, v, c: F.linear(G.fused_linear_relu(a, w, b), v, c),
               [x, w1, b1, w2, b2]),
         _step(lambda a, w, b, v, c: F.linear(F.relu(F.linear(a, w, b)), v, c),
               [x, w1, b1, w2, b2])),
        ("clipped_relu vs torch.clamp",
         _step(lambda a: G.clipped_relu(a, 1.0), [x]),
         _step(lambda a: torch.clamp(a, 0.0, 1.0), [x])),
    ]


def measure() -> dict:
    torch.set_num_threads(os.cpu_count() or 1)
    rows = []
    for name, ours, plain in cases():
        # each step runs its own backward and returns None, so exactly the step is timed
        t = interleaved({"gradsmith": (ours, tuple), "plain": (plain, tuple)}, repeat=REPEATS,
                        warmup=WARMUP)
        rows.append({"case": name, "gradsmith": t["gradsmith"].to_dict(),
                     "plain": t["plain"].to_dict(),
                     "ratio": t["gradsmith"].median / t["plain"].median})
    return {"shape": [ROWS, COLS], "dtype": "float32", "warmup": WARMUP, "repeats": REPEATS,
            "time_unit": "ms", "rows": rows,
            "environment": environment()}  # after the runs: its load average is the end's


def to_markdown(res: dict) -> str:
    env = res["environment"]
    lines = [
        "# Forward + backward time: fused part-1 ops vs plain compositions",
        "",
        f"Input {res['shape'][0]} x {res['shape'][1]} float32 (weights {res['shape'][1]}^2), "
        f"{res['warmup']} warm-up runs, then {res['repeats']} interleaved rounds; median and "
        f"interquartile range in ms (`python benchmarks/ops_fused_speed.py`). Environment: "
        f"torch {env['torch']}, Python {env['python']}, {env['platform']}, {env['cpu']}, "
        f"{env['cpu_count']} CPUs, {env['torch_threads']} threads, recorded {env['date_utc']}, "
        f"1-minute load average {env['load_average_1min']} at the end (above about 1, other "
        f"jobs shared the CPUs: compare the ratio, not the absolute times).",
        "",
        "| case | gradsmith ms (IQR) | plain ms (IQR) | ratio |",
        "|---|---:|---:|---:|",
    ]
    for r in res["rows"]:
        g, p = r["gradsmith"], r["plain"]
        lines.append(
            f"| {r['case']} | {g['median']:.2f} ({g['q1']:.2f}-{g['q3']:.2f}) | "
            f"{p['median']:.2f} ({p['q1']:.2f}-{p['q3']:.2f}) | {r['ratio']:.2f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    res = measure()
    md = to_markdown(res)
    write_results(res, md, RESULTS, "ops_fused_speed")
    print(md)


if __name__ == "__main__":
    main()
