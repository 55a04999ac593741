"""Measure what each part-1 catalog op saves for backward, against the plain composition.

Counting: every tensor handed to autograd for backward passes through
``torch.autograd.graph.saved_tensors_hooks``; we sum the bytes of the distinct storages among
them, leaving out leaves (the network input and the parameters, which live anyway). An op's own
input activation is produced by a node that saves nothing, so it counts only if something saves
it, exactly as in a network where it would otherwise be freed.

Usage: ``python benchmarks/ops_saved_bytes.py`` (writes benchmarks/results/ops_saved_bytes.{md,json}).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

import gradsmith.functional as G
from gradsmith.bench import environment, saved_bytes
from gradsmith.bench.report import write_results

ROWS, COLS = 256, 1024  # one float32 activation = 1 MiB
RESULTS = Path(__file__).resolve().parent / "results"


def saved(build: Callable[[], tuple[list[torch.Tensor], Callable[[], torch.Tensor]]]) -> int:
    """Bytes of distinct non-leaf storages saved for backward by ``run()``."""
    leaves, run = build()
    return saved_bytes(run, (), exclude=leaves)


def _leaf(*shape: int, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen).requires_grad_()


def unary(op: Callable[[torch.Tensor], torch.Tensor]):
    """``op`` applied to an intermediate activation produced by a node that saves nothing."""
    def build():
        x = _leaf(ROWS, COLS)
        return [x], lambda: op(x + 0.0)
    return build


def binary(op: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]):
    def build():
        x, y = _leaf(ROWS, COLS), _leaf(ROWS, COLS, seed=1)
        return [x, y], lambda: op(x + 0.0, y + 0.0)
    return build


def linear(op: Callable):
    """``op(x, W, b)`` on an intermediate activation ``x`` with leaf parameters."""
    def build():
        x, w, b = _leaf(ROWS, COLS), _leaf(COLS, COLS, seed=1), _leaf(COLS, seed=2)
        return [x, w, b], lambda: op(x + 0.0, w, b)
    return build


def chain(first: Callable, middle: Callable | None = None):
    """x -> first(x, W1, b1) -> middle -> Linear(W2, b2): a two-layer MLP block."""
    def build():
        x, w1, b1 = _leaf(ROWS, COLS), _leaf(COLS, COLS, seed=1), _leaf(COLS, seed=2)
        w2, b2 = _leaf(COLS, COLS, seed=3), _leaf(COLS, seed=4)

        def run():
            torch.manual_seed(0)
            h = first(x + 0.0, w1, b1)
            h = middle(h) if middle is not None else h
            return F.linear(h, w2, b2)

        return [x, w1, b1, w2, b2], run
    return build


def _dropout(h):
    return F.dropout(h, 0.1, training=True)


def _plain_linear_relu(x, w, b):
    return F.relu(F.linear(x, w, b))


C = 6.0
# (op, what the op saves, op build, plain composition, plain build)
ISOLATED = [
    ("clipped_relu", "bool mask", unary(lambda h: G.clipped_relu(h, C)),
     "torch.clamp(x, 0, c)", unary(lambda h: torch.clamp(h, 0.0, C))),
    ("swish", "x", unary(lambda h: G.swish(h, 1.5)),
     "x * sigmoid(b x)", unary(lambda h: h * torch.sigmoid(1.5 * h))),
    ("scaled_sigmoid", "output", unary(lambda h: G.scaled_sigmoid(h, 2.0)),
     "s * sigmoid(x)", unary(lambda h: 2.0 * torch.sigmoid(h))),
    ("soft_round", "x", unary(lambda h: G.soft_round(h, 5.0)),
     "paper formula", unary(lambda h: torch.floor(h) + 0.5 + torch.tanh(
         5.0 * (h - torch.floor(h) - 0.5)) / (2 * torch.tanh(torch.tensor(2.5))))),
    ("soft_threshold", "bool mask", unary(lambda h: G.soft_threshold(h, 0.5)),
     "sign(x) * relu(|x| - t)", unary(lambda h: torch.sign(h) * torch.relu(h.abs() - 0.5))),
    ("sign_ste", "nothing", unary(G.sign_ste),
     "x + (sign(x) - x).detach()", unary(lambda h: h + (torch.sign(h) - h).detach())),
    ("sign_ste(clip=1)", "bool mask", unary(lambda h: G.sign_ste(h, 1.0)),
     "clamp(x) + (sign(x) - clamp(x)).detach()",
     unary(lambda h: (lambda c: c + (torch.sign(h) - c).detach())(h.clamp(-1.0, 1.0)))),
    ("round_ste", "nothing", unary(G.round_ste),
     "x + (round(x) - x).detach()", unary(lambda h: h + (torch.round(h) - h).detach())),
    ("gumbel_softmax", "output", unary(lambda h: G.gumbel_softmax(h, 0.5)),
     "F.gumbel_softmax", unary(lambda h: F.gumbel_softmax(h, 0.5))),
    ("gumbel_softmax(hard)", "logits + noise", unary(lambda h: G.gumbel_softmax(h, 0.5, True)),
     "F.gumbel_softmax(hard)", unary(lambda h: F.gumbel_softmax(h, 0.5, True))),
    ("grad_scale / grad_reverse", "nothing", unary(lambda h: G.grad_scale(h, 0.5)),
     "a x + (1 - a) x.detach()", unary(lambda h: 0.5 * h + 0.5 * h.detach())),
    ("fused_add_relu", "bit-packed mask", binary(G.fused_add_relu),
     "F.relu(x + y)", binary(lambda a, b: F.relu(a + b))),
    ("fused_linear_relu", "x + bit-packed mask", linear(G.fused_linear_relu),
     "F.relu(F.linear(x, W, b))", linear(_plain_linear_relu)),
    ("logsumexp(dim=1)", "x + output", unary(lambda h: G.logsumexp(h, 1)),
     "torch.logsumexp", unary(lambda h: torch.logsumexp(h, 1))),
]

CHAINS = [
    ("Linear -> ReLU -> Linear", chain(G.fused_linear_relu), chain(_plain_linear_relu)),
    ("Linear -> ClippedReLU -> Linear",
     chain(lambda x, w, b: G.clipped_relu(F.linear(x, w, b), C)),
     chain(lambda x, w, b: torch.clamp(F.linear(x, w, b), 0.0, C))),
    ("Linear -> ReLU -> Dropout -> Linear", chain(G.fused_linear_relu, _dropout),
     chain(_plain_linear_relu, _dropout)),
]


def _mib(n: int) -> str:
    return f"{n / 2**20:.2f}"


def measure() -> dict:
    rows = []
    for name, saves, op_build, plain_name, plain_build in ISOLATED:
        op_b, plain_b = saved(op_build), saved(plain_build)
        rows.append({"op": name, "op_saves": saves, "op_bytes": op_b, "plain": plain_name,
                     "plain_bytes": plain_b})
    chains = [{"chain": n, "fused_bytes": saved(f), "plain_bytes": saved(p)}
              for n, f, p in CHAINS]
    return {"shape": [ROWS, COLS], "dtype": "float32", "isolated": rows, "chains": chains,
            "environment": environment()}


def to_markdown(res: dict) -> str:
    env = res["environment"]
    lines = [
        "# Saved-for-backward bytes: part-1 ops vs the plain composition",
        "",
        f"Input activation {res['shape'][0]} x {res['shape'][1]} {res['dtype']} "
        f"(1 MiB per activation). Bytes of distinct non-leaf storages saved for backward, "
        f"measured with `saved_tensors_hooks` through `gradsmith.bench.saved_bytes` "
        f"(`python benchmarks/ops_saved_bytes.py`). Environment: torch {env['torch']}, "
        f"Python {env['python']}, {env['platform']}, {env['cpu_count']} CPUs, "
        f"recorded {env['date_utc']}.",
        "",
        "Rows with a Linear (fused_linear_relu and the chains) include the Linear's saved "
        "input activation; the chains also include what the layers after the op save.",
        "",
        "| op | op saves | op MiB | plain composition | plain MiB |",
        "|---|---|---:|---|---:|",
    ]
    for r in res["isolated"]:
        lines.append(f"| `{r['op']}` | {r['op_saves']} | {_mib(r['op_bytes'])} | "
                     f"`{r['plain']}` | {_mib(r['plain_bytes'])} |")
    lines += ["", "| chain | with gradsmith op MiB | plain MiB | difference MiB |",
              "|---|---:|---:|---:|"]
    for c in res["chains"]:
        diff = c["fused_bytes"] - c["plain_bytes"]
        lines.append(f"| {c['chain']} | {_mib(c['fused_bytes'])} | {_mib(c['plain_bytes'])} | "
                     f"{diff / 2**20:+.2f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    res = measure()
    md = to_markdown(res)
    write_results(res, md, RESULTS, "ops_saved_bytes")
    print(md)


if __name__ == "__main__":
    main()
