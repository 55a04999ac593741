"""A callable forward hands to a helper that calls it (``Owner.rule(f, a, b, n)`` ...
``f(nodes)``) is a callable, whatever its annotation's first word: ``Callable[[Tensor],
Tensor]`` made it a tensor, and corpus 7's zuko ``GaussLegendre`` was skipped (``deg must be
an integer``, after every plan with ``f`` a tensor failed). References: the fundamental
theorem of calculus by hand (``d/db = f(b)``, ``d/da = -f(a)``) and autograd of the same
quadrature written in plain torch."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from gradsmith.checkrun.session import run_check
from gradsmith.discovery import Source, Synthesized, synthesize

CASES = '''
from typing import Callable

import torch
from torch import Tensor
from torch.autograd import Function
from torch.autograd.function import once_differentiable


def midpoints(f, a, b, n):
    x = (torch.arange(n, dtype=a.dtype) + 0.5) / n
    nodes = torch.lerp(a[..., None], b[..., None], x).movedim(-1, 0)
    return (b - a) * f(nodes).mean(0)


class Area(Function):
    @staticmethod
    def forward(ctx, f: Callable[[Tensor], Tensor], a: Tensor, b: Tensor, n: int, *phi):
        ctx.f, ctx.n = f, n
        ctx.save_for_backward(a, b, *phi)
        return midpoints(f, a, b, n)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        f, n = ctx.f, ctx.n
        a, b, *phi = ctx.saved_tensors
        grad_a = -f(a) * grad if ctx.needs_input_grad[1] else None
        grad_b = f(b) * grad if ctx.needs_input_grad[2] else None
        return (None, grad_a, grad_b, None, *Area.of_phi(f, a, b, n, phi, grad))

    @staticmethod
    def of_phi(f, a, b, n, phi, grad):
        wanted = [p for p in phi if p.requires_grad]
        if not wanted:
            return [None] * len(phi)
        with torch.enable_grad():
            grads = iter(torch.autograd.grad(midpoints(f, a, b, n), wanted, grad))
        return [next(grads) if p.requires_grad else None for p in phi]


class AreaSignSlip(Area):
    """Planted: the upper limit's gradient with the lower limit's sign."""

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        f, n = ctx.f, ctx.n
        a, b, *phi = ctx.saved_tensors
        grad_a = -f(a) * grad if ctx.needs_input_grad[1] else None
        grad_b = -f(b) * grad if ctx.needs_input_grad[2] else None
        return (None, grad_a, grad_b, None, *Area.of_phi(f, a, b, n, phi, grad))


def area(f, a, b, n=4096, phi=()):
    return Area.apply(f, a, b, n, *phi)


def area_sign_slip(f, a, b, n=4096, phi=()):
    return AreaSignSlip.apply(f, a, b, n, *phi)
'''


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    path = tmp_path_factory.mktemp("helpers") / "helpers.py"
    path.write_text(CASES)
    spec = importlib.util.spec_from_file_location("helpers_case", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = run_check([Source("file", str(path), "helpers.py")], isolate=False)
    return module, {row["name"].rsplit("::", 1)[-1]: row for row in result.rows}


def test_the_reference_is_the_fundamental_theorem(cases):
    module, _ = cases
    w = torch.tensor(0.75, dtype=torch.float64, requires_grad=True)
    a = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    b = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    f = lambda t: w * torch.tanh(t)  # noqa: E731
    ga, gb, gw = torch.autograd.grad(module.area(f, a, b, phi=(w,)).sum(), (a, b, w))
    torch.testing.assert_close(ga, -f(a).detach())
    torch.testing.assert_close(gb, f(b).detach())
    # w * (log cosh b - log cosh a): the antiderivative by hand
    want = (torch.log(torch.cosh(b)) - torch.log(torch.cosh(a))).sum().detach()
    torch.testing.assert_close(gw, want, rtol=1e-6, atol=1e-6)


def test_the_callable_is_synthesised_as_one(cases):
    module, _ = cases
    found = synthesize(module.Area)
    assert isinstance(found, Synthesized), found
    assert callable(found.args[0]) and not isinstance(found.args[0], torch.Tensor)
    assert found.args[3] == 4096  # the wrapper's default count, an int


def test_correct_area_passes_and_planted_sign_slip_fails(cases):
    _, rows = cases
    assert rows["Area"]["verdict"] == "pass", rows["Area"]["text"]
    bad = rows["AreaSignSlip"]
    codes = {f["code"] for f in bad["report"]["findings"] if f["severity"] == "error"}
    assert bad["verdict"] == "fail" and "gradient-mismatch" in codes, bad["text"]
