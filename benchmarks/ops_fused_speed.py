"""Forward + backward time of the fused part-1 ops against the plain compositions.

"Fused" here means fused *for memory* (one autograd node saving a mask); on CPU the forward
still runs the same ATen kernels, so this measures what the saving costs or gains in time.
Method: warm-up, then ``REPEATS`` rounds; in each round every variant runs once (interleaved,
so drift hits all alike); we report the median and the interquartile range per variant.

Usage: ``python benchmarks/ops_fused_speed.py`` (writes benchmarks/results/ops_fused_speed.{md,json}).
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

import gradsmith.functional as G

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


def _timings(variants: dict[str, Callable[[], None]]) -> dict[str, list[float]]:
    for run in variants.values():
        for _ in range(WARMUP):
            run()
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(REPEATS):
        for name, run in variants.items():
            t0 = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - t0)
    return times


def _summary(samples: list[float]) -> dict[str, float]:
    q = statistics.quantiles(samples, n=4)
    return {"median_ms": 1e3 * statistics.median(samples), "q1_ms": 1e3 * q[0],
            "q3_ms": 1e3 * q[2]}


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
        t = _timings({"gradsmith": ours, "plain": plain})
        rows.append({"case": name, "gradsmith": _summary(t["gradsmith"]),
                     "plain": _summary(t["plain"])})
    return {"shape": [ROWS, COLS], "dtype": "float32", "warmup": WARMUP, "repeats": REPEATS,
            "rows": rows,
            "environment": {"torch": torch.__version__, "python": platform.python_version(),
                            "platform": platform.platform(), "cpus": os.cpu_count(),
                            "threads": torch.get_num_threads(),
                            "load_average_1min": round(os.getloadavg()[0], 2)}}


def to_markdown(res: dict) -> str:
    env = res["environment"]
    lines = [
        "# Forward + backward time: fused part-1 ops vs plain compositions",
        "",
        f"Input {res['shape'][0]} x {res['shape'][1]} float32 (weights {res['shape'][1]}^2), "
        f"{res['warmup']} warm-up runs, then {res['repeats']} interleaved rounds; median and "
        f"interquartile range in ms (`python benchmarks/ops_fused_speed.py`). Environment: "
        f"torch {env['torch']}, Python {env['python']}, {env['platform']}, {env['cpus']} CPUs, "
        f"{env['threads']} threads, 1-minute load average {env['load_average_1min']} at the end "
        f"(other jobs shared the CPUs: compare the ratio, not the absolute times).",
        "",
        "| case | gradsmith ms (IQR) | plain ms (IQR) | ratio |",
        "|---|---:|---:|---:|",
    ]
    for r in res["rows"]:
        g, p = r["gradsmith"], r["plain"]
        lines.append(
            f"| {r['case']} | {g['median_ms']:.2f} ({g['q1_ms']:.2f}-{g['q3_ms']:.2f}) | "
            f"{p['median_ms']:.2f} ({p['q1_ms']:.2f}-{p['q3_ms']:.2f}) | "
            f"{g['median_ms'] / p['median_ms']:.2f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    res = measure()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "ops_fused_speed.json").write_text(json.dumps(res, indent=2) + "\n")
    md = to_markdown(res)
    (RESULTS / "ops_fused_speed.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
