"""A straight-through clamp in front of a smooth forward gets a surrogate line that passes as
pasted (issue 18, corpus 5 held-out: torchrl's safe atanh pair printed only templates).
Forward clamps into its domain and computes (``log(x.clamp(min=eps))``, ``atanh(x.clamp(-b,
b))``); backward passes the derivative at the clamped value through the clamp. The surrogate is
forward with the clamp made straight-through, the bounds read from forward's flat tails. The
reference is the derivative by hand; a planted wrong backward still FAILs under the line."""

from __future__ import annotations

import importlib.util
import re
import sys

import pytest
import torch

import gradsmith

SAFE = """\
import torch

import gradsmith

{line}
class {name}(torch.autograd.Function):
    @staticmethod
    def forward(x, p):
        return {forward}

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, p = inputs
        ctx.save_for_backward(x)
        ctx.p = p

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        p = ctx.p
        return {backward}, None
"""

CASES = {
    # one-sided: log of x clamped at eps > 0 (0 lies in the flat tail)
    "SafeLog": ("x.clamp(min=p).log()", "g / x.clamp(min=p)", "g / x.clamp(min=p) * 2", 1e-6,
                lambda x, p: 1 / x.clamp(min=p)),
    # two-sided, the bound a forward argument
    "BoundedAtanh": ("x.clamp(-p, p).atanh()", "g / (1 - x.clamp(-p, p) ** 2)",
                     "g / (1 - x ** 2)", 0.5, lambda x, p: 1 / (1 - x.clamp(-p, p) ** 2)),
}


def _load(tmp_path, stem: str, name: str, line: str, backward_index: int):
    forward, right, wrong, _, _ = CASES[name]
    path = tmp_path / f"{stem}.py"
    path.write_text(SAFE.format(line=line, name=name, forward=forward,
                                backward=(right, wrong)[backward_index]))
    spec = importlib.util.spec_from_file_location(f"clamped_{stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return getattr(module, name)


@pytest.mark.parametrize("name", list(CASES))
def test_a_clamp_before_a_smooth_forward_gets_a_line_that_passes_as_pasted(tmp_path, name):
    p, derivative = CASES[name][3], CASES[name][4]
    fn = _load(tmp_path, f"plain_{name}", name, "", 0)
    x = 2 * torch.randn(3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    report = gradsmith.check(fn, x.requires_grad_(), p, compat=False)
    (finding,) = [f for f in report.errors if f.code == "undeclared-estimator"]
    line = finding.details["declaration"]
    assert finding.details["verified"] and f"{name}.forward(" in line, line
    # the independent reference: forward's derivative at the clamped value, by hand
    surrogate = eval(re.search(r"surrogate=(lambda .*)\)$", line).group(1),  # noqa: S307
                     {"torch": torch, name: fn})
    y = torch.linspace(-3, 3, 61, dtype=torch.float64).requires_grad_()
    surrogate(y, p).sum().backward()
    torch.testing.assert_close(y.grad, derivative(y.detach(), p))
    pasted = _load(tmp_path, f"pasted_{name}", name, line, 0)
    assert gradsmith.check(pasted, compat=False).passed
    mutant = _load(tmp_path, f"mutant_{name}", name, line, 1)
    wrong = gradsmith.check(mutant, compat=False)
    assert not wrong.passed, str(wrong)
    # an old-style forward(ctx, ...) cannot be called without a ctx: no such line for it
    old = gradsmith.check(_old_style(fn), x, p, compat=False)
    (finding,) = [f for f in old.errors if f.code == "undeclared-estimator"]
    assert ".forward(" not in finding.details["declaration"]


def _old_style(fn: type) -> type:
    class Old(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, p):
            ctx.save_for_backward(x)
            ctx.p = p
            return fn.forward(x, p)

        @staticmethod
        def backward(ctx, g):
            return fn.backward(ctx, g)

    Old.__name__ = Old.__qualname__ = f"Old{fn.__name__}"
    return Old
