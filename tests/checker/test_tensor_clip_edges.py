"""Quantizers whose clip edges are tensors (issue 18, corpus 11b dev: fms_mo's SAWB, SiLU and
PACT+ quantizers got a template to complete): a per-channel clip buffer the caller passes in
(no gradient), a fixed tensor lower clip beside a learned upper one (PACT), and a clip that
learns through the rounding residual with its levels from a bit width (PACT+). Zero
configuration now prints a surrogate it ran against backward, that passes when pasted exactly
as printed, whose gradient is the family's (by hand, below), and with which a planted wrong
backward still FAILs. Reduced cases written for this test, not the projects' code."""

from __future__ import annotations

import importlib.util
import re
import sys

import pytest
import torch

import gradsmith

HEADER = "import torch\nfrom torch.autograd import Function\n\nimport gradsmith\n\n\n"

# SAWB-like: x / c clipped to [-1, 1] and rounded to 2 ** bits levels, c a per-column buffer
BUFFER = """
class BufferClip(Function):
    @staticmethod
    def forward(ctx, x, bits, c):
        ctx.save_for_backward(x, c)
        n = 2 ** bits - 1
        u = (x / c).clamp(-1, 1) * 0.5 + 0.5
        return (2 * torch.round(u * n) / n - 1) * c

    @staticmethod
    def backward(ctx, grad):
        x, c = ctx.saved_tensors
        keep = (x >= -{k} * c) & (x <= {k} * c)
        return grad * keep, None, None
"""

# PACT with a fixed tensor lower clip: alpha learns, low is a setting
FIXED_LOW = """
class FixedLowPact(Function):
    @staticmethod
    def forward(ctx, x, alpha, low, bits):
        ctx.save_for_backward(x, alpha, low)
        step = (alpha - low) / (2 ** bits - 1)
        y = torch.minimum(torch.maximum(x, low), alpha)
        return torch.round((y - low) / step) * step + low

    @staticmethod
    def backward(ctx, grad):
        x, alpha, low = ctx.saved_tensors
        inside = (x > low) & (x < alpha)
        grad_alpha = (grad * (x {op} alpha)).sum().reshape(alpha.shape)
        return grad * inside, grad_alpha, None, None
"""

# PACT+: alpha also learns through the rounding residual inside the window
PACT_PLUS = """
class PactPlus(Function):
    @staticmethod
    def forward(ctx, x, alpha, bits):
        n = 2 ** bits - 1
        ctx.save_for_backward(x, alpha)
        ctx.n = n
        return torch.round(torch.minimum(x.clamp(min=0), alpha) / (alpha / n)) * (alpha / n)

    @staticmethod
    def backward(ctx, grad):
        x, alpha = ctx.saved_tensors
        z = x / (alpha / ctx.n)
        residual = {sign}(z - torch.round(z)) / ctx.n
        inside = (x > 0) & (x < alpha)
        grad_alpha = torch.where(x >= alpha, grad, torch.where(inside, grad * residual, 0.0))
        return grad * inside, grad_alpha.sum().reshape(alpha.shape), None
"""


def _x(seed: int, scale: float = 1.0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return (scale * torch.randn(3, 5, generator=gen, dtype=torch.float64)).requires_grad_()


CASES = {
    "BufferClip": (BUFFER, {"k": "1"}, {"k": "2"},
                   lambda: (_x(0), 4, torch.tensor([[0.5, 0.8, 1.0, 1.2, 1.5]],
                                                   dtype=torch.float64))),
    "FixedLowPact": (FIXED_LOW, {"op": ">="}, {"op": ">"},
                     lambda: (_x(1, 2.0), torch.tensor(1.5, dtype=torch.float64,
                                                       requires_grad=True),
                              -0.3 * torch.ones(3, 5, dtype=torch.float64), 4)),
    "PactPlus": (PACT_PLUS, {"sign": "-"}, {"sign": ""},
                 lambda: (_x(2, 2.0), torch.tensor(1.5, dtype=torch.float64,
                                                   requires_grad=True), 4)),
}
# FixedLowPact's wrong op (>) differs from >= only at ties: its planted bug is the window
WRONG_BACKWARD = {"FixedLowPact": ("x {op} alpha", "x < alpha")}


def _load(tmp_path, stem: str, text: str):
    path = tmp_path / f"{stem}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"clip_edges_{stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _printed(tmp_path, name):
    template, right, _, inputs = CASES[name]
    fn = getattr(_load(tmp_path, "plain", HEADER + template.format(**right)), name)
    report = gradsmith.check(fn, *inputs(), compat=False)
    found = [f for f in report.errors if f.code == "undeclared-estimator"]
    assert found, str(report)
    return found[0]


@pytest.mark.parametrize("name", list(CASES))
def test_the_printed_line_is_checked_and_passes_as_printed(tmp_path, name):
    finding = _printed(tmp_path, name)
    line = finding.details["declaration"]
    assert finding.details["verified"] and "..." not in line, line
    template, right, _, _ = CASES[name]
    pasted = getattr(_load(tmp_path, "pasted", HEADER + line + template.format(**right)), name)
    again = gradsmith.check(pasted, compat=False)
    assert again.passed, f"{line}\n{again}"


def _reference(name, args, v):
    """The family's gradients by hand (plain PyTorch): the window's straight-through rule,
    PACT's clip gradient, PACT+'s residual (Choi et al. 2018)."""
    if name == "BufferClip":
        x, _, c = args
        return [v * ((x >= -c) & (x <= c))]
    if name == "FixedLowPact":
        x, alpha, low, _ = args
        return [v * ((x > low) & (x < alpha)), (v * (x >= alpha)).sum().reshape(alpha.shape)]
    x, alpha, bits = args
    n = 2 ** bits - 1
    z = x / (alpha / n)
    inside = (x > 0) & (x < alpha)
    da = torch.where(x >= alpha, 1.0, torch.where(inside, (z.round() - z) / n, 0.0))
    return [v * inside, (v * da).sum().reshape(alpha.shape)]


@pytest.mark.parametrize("name", list(CASES))
def test_the_declared_surrogate_is_the_family_gradient(tmp_path, name):
    line = _printed(tmp_path, name).details["declaration"]
    surrogate = eval(re.search(r"surrogate=(lambda .*)\)$", line).group(1),  # noqa: S307
                     {"torch": torch})
    *_, inputs = CASES[name]
    gen = torch.Generator().manual_seed(5)
    for scale in (0.3, 1.0, 3.0):  # inside the window, across it, far outside
        args = list(inputs())
        args[0] = (scale * torch.randn(3, 5, generator=gen, dtype=torch.float64)
                   ).requires_grad_()
        diff = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
        out = surrogate(*args)
        v = torch.randn(out.shape, generator=gen, dtype=out.dtype)
        got = torch.autograd.grad(out, diff, v)
        want = _reference(name, [a.detach() if isinstance(a, torch.Tensor) else a
                                 for a in args], v)
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b.to(a.dtype), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", list(CASES))
def test_a_planted_wrong_backward_fails_with_the_declaration_in_place(tmp_path, name):
    line = _printed(tmp_path, name).details["declaration"]
    template, right, wrong, _ = CASES[name]
    if name in WRONG_BACKWARD:
        template = template.replace(*WRONG_BACKWARD[name])
    mutant = getattr(_load(tmp_path, "mutant", HEADER + line + template.format(**wrong)), name)
    report = gradsmith.check(mutant, compat=False)
    assert not report.passed
    assert "surrogate-mismatch" in report.codes("error"), str(report)
