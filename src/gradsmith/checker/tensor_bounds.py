"""Clip windows whose edges are tensors: straight-through terms and learned-clip candidates.

Real quantizers take their clip range as tensor arguments, not numbers: SAWB's clip value is a
buffer the caller passes in (backward passes the gradient where ``-c <= x <= c`` and returns
no gradient for ``c``), a SiLU quantizer's lower clip is a fixed tensor while its upper clip
learns (PACT), and PACT+ learns its clip through the rounding residual, its step being the clip
divided by the number of levels that a bit-width argument gives (``2 ** bits - 1``). With the
edges only looked for among Python numbers, none of these got a declaration that passes (fms_mo,
corpus 11b dev: a template to complete for each).

Every string here is only a candidate: the caller runs it against backward, on the check's
inputs and on inputs spread over a grid, before printing it as checked.

References:
    Choi et al.: PACT: Parameterized Clipping Activation for Quantized Neural Networks,
    arXiv:1805.06085, 2018. Choi et al.: Accurate and Efficient 2-bit Quantized Neural
    Networks (SAWB), MLSys 2019.
"""

from __future__ import annotations

from collections.abc import Iterator


def fixed_edges(values, names: list[str], top: int) -> list[str]:
    """Floating tensor arguments (not differentiated) that broadcast against argument ``top``:
    each may be a clip edge, written ``name.detach()`` (a setting, not a parameter)."""
    x = values[top]
    if not _floating(x):
        return []
    return [f"{names[i]}.detach()" for i, c in enumerate(values)
            if i != top and _floating(c) and not c.requires_grad and _broadcasts(c, x)]


def terms(values, names: list[str], top: int,
          numbers: tuple[tuple[str, float], ...] = ()) -> list[str]:
    """Straight-through terms of argument ``top`` clipped by tensor edges: ``[-c, c]``,
    ``[0, c]``, ``[lo, hi]`` for two edges, and a tensor edge with a number (``numbers``, by
    name) on the other side.

    Example:
        >>> import torch
        >>> terms((torch.ones(3, requires_grad=True), 8, torch.ones(3)), ["x", "bits", "c"], 0)
        ['torch.maximum(torch.minimum(x, c.detach()), -c.detach())', 'torch.minimum(x.clamp(min=0), c.detach())']
    """
    x, edges = names[top], fixed_edges(values, names, top)
    out = []
    for c in edges:
        out += [f"torch.maximum(torch.minimum({x}, {c}), -{c})",
                f"torch.minimum({x}.clamp(min=0), {c})"]
    out += [f"torch.minimum(torch.maximum({x}, {lo}), {hi})"
            for lo in edges for hi in edges if lo != hi]
    for c in edges:
        for p, _ in numbers:
            out += [f"torch.maximum({x}, {c}).clamp(max={p})",
                    f"torch.minimum({x}, {c}).clamp(min={p})"]
    return out


def learned_clips(values, names: list[str], top: int, params: list[str],
                  numbers: list[tuple[str, float]]) -> Iterator[str]:
    """Learned-clip candidates for input ``top`` and small parameters ``params`` (names):
    PACT with a fixed tensor lower edge, two-sided PACT with two learned clips, and PACT+
    (the clip learns through the rounding residual too) with the levels from a bit width."""
    x = names[top]
    for a in params:
        for lo in fixed_edges(values, names, top):
            yield f"torch.minimum(torch.maximum({x}, {lo}), {a})"
    for lo in params:
        for hi in params:
            if lo != hi:
                yield f"torch.minimum(torch.maximum({x}, {lo}), {hi})"
    whole = {n for n, v in zip(names, values) if isinstance(v, int) and not isinstance(v, bool)}
    for n in levels([(b, value) for b, value in numbers if b in whole]):
        for a in params:
            yield _pact_plus(x, "0", a, n)
            yield _pact_plus(x, f"-{a}", a, n)
            for lo in params:
                if lo != a:
                    yield _pact_plus(x, lo, a, n)


def levels(numbers: list[tuple[str, float]]) -> list[str]:
    """The number of quantization steps a bit-width argument gives (an integer from 1 to 32):
    ``2 ** b - 1`` (unsigned), ``2 ** b - 2`` (symmetric, zero kept), ``2 ** (b - 1) - 1``.

    Example:
        >>> levels([("num_bits", 8.0), ("alpha", 0.5)])
        ['(2 ** num_bits - 1)', '(2 ** num_bits - 2)', '(2 ** (num_bits - 1) - 1)']
    """
    out = []
    for b, value in numbers:
        if value == int(value) and 1 <= value <= 32 and "[" not in b:
            out += [f"(2 ** {b} - 1)", f"(2 ** {b} - 2)", f"(2 ** ({b} - 1) - 1)"]
    return out


def _pact_plus(x: str, lo: str, hi: str, n: str) -> str:
    """``round((clamp(x, lo, hi) - lo) / s) * s + lo`` with ``s = (hi - lo) / n``, the
    rounding straight through: the clips get the residual inside and 1 beyond them (PACT+)."""
    if lo == "0":
        s, shifted, back = f"{hi} / {n}", f"torch.minimum({x}.clamp(min=0), {hi})", ""
    else:
        s = f"({hi} - {lo}) / {n}"
        shifted = f"(torch.minimum(torch.maximum({x}, {lo}), {hi}) - {lo})"
        back = f" + {lo}"
    q = f"({shifted} / ({s}))"
    return f"({q} + ({q}.round() - {q}).detach()) * ({s}){back}"


def _broadcasts(c, x) -> bool:
    """Whether ``c`` broadcasts to ``x``'s shape without growing it."""
    if c.dim() > x.dim():
        return False
    return all(a in (1, b) for a, b in zip(reversed(c.shape), reversed(x.shape)))


def _floating(value) -> bool:
    import torch

    return isinstance(value, torch.Tensor) and value.is_floating_point()
