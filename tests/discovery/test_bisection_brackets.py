"""A forward that bisects ``[a, b]`` for ``f(x) = y`` needs ``f(a) <= y <= f(b)``: with
independent random ``a``, ``b`` and ``y`` the root is outside the bracket at most elements,
forward returns an end of it whatever ``y`` is, and a correct implicit-function backward was an
``undeclared-estimator`` FAIL (corpus 7's zuko ``Bisection``, judged correct). The bracket is
read from forward's body (the midpoint, the comparison, the ``torch.where`` updates) and the
target made ``f`` of a point inside it. References: the implicit function theorem by hand
(``dx/dy = 1 / f'(x)``, ``dx/dw = -(df/dw) / f'(x)``) for ``f = w * tanh``."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from gradsmith.checkrun.session import run_check
from gradsmith.discovery import Source, Synthesized, synthesize
from gradsmith.discovery.brackets import Bracket, bisection_bracket

CASES = '''
import torch
from torch.autograd import Function
from torch.autograd.function import once_differentiable


class RootOf(Function):
    @staticmethod
    def forward(ctx, f, y, a, b, n, *phi):
        for _ in range(n):
            c = (a + b) / 2
            mask = f(c) < y
            a = torch.where(mask, c, a)
            b = torch.where(mask, b, c)
        x = (a + b) / 2
        ctx.f = f
        ctx.save_for_backward(x, *phi)
        return x

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_x):
        f = ctx.f
        x, *phi = ctx.saved_tensors
        with torch.enable_grad():
            x = x.detach().requires_grad_()
            y = f(x)
        slope = torch.autograd.grad(y, x, torch.ones_like(y), retain_graph=bool(phi))[0]
        grad_y = grad_x / slope
        wanted = [p for p in phi if p.requires_grad]
        grads = iter(torch.autograd.grad(y, wanted, -grad_y) if wanted else ())
        grad_phi = [next(grads) if p.requires_grad else None for p in phi]
        return (None, grad_y, None, None, None, *grad_phi)


class RootOfTimesSlope(RootOf):
    """Planted: multiplies by f'(x) where the implicit function theorem divides."""

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_x):
        f = ctx.f
        x, *phi = ctx.saved_tensors
        with torch.enable_grad():
            x = x.detach().requires_grad_()
            y = f(x)
        slope = torch.autograd.grad(y, x, torch.ones_like(y), retain_graph=bool(phi))[0]
        grad_y = grad_x * slope
        wanted = [p for p in phi if p.requires_grad]
        grads = iter(torch.autograd.grad(y, wanted, -grad_y) if wanted else ())
        grad_phi = [next(grads) if p.requires_grad else None for p in phi]
        return (None, grad_y, None, None, None, *grad_phi)


def root_of(f, y, a, b, n=16, phi=()):
    return RootOf.apply(f, y, a, b, n, *phi)


def root_of_times_slope(f, y, a, b, n=16, phi=()):
    return RootOfTimesSlope.apply(f, y, a, b, n, *phi)
'''


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    path = tmp_path_factory.mktemp("bisect") / "bisect.py"
    path.write_text(CASES)
    spec = importlib.util.spec_from_file_location("bisect_case", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = run_check([Source("file", str(path), "bisect.py")], isolate=False)
    return module, {row["name"].rsplit("::", 1)[-1]: row for row in result.rows}


def test_the_bracket_is_read_from_the_code():
    def flipped(g, target, hi, lo, steps):  # the comparison written the other way round
        for _ in range(steps):
            mid = 0.5 * (lo + hi)
            above = target > g(mid)
            lo = torch.where(above, mid, lo)
            hi = torch.where(above, hi, mid)
        return mid

    assert bisection_bracket(flipped, ["g", "target", "hi", "lo", "steps"]) == Bracket(
        "g", "target", "lo", "hi")

    def averaged(x, y):  # a midpoint alone is no bisection
        return (x + y) / 2

    assert bisection_bracket(averaged, ["x", "y"]) is None


def test_the_reference_gradient_is_the_implicit_one(cases):
    module, _ = cases
    gen = torch.Generator().manual_seed(0)
    w = torch.tensor(0.75, dtype=torch.float64, requires_grad=True)
    a = torch.randn(3, 4, dtype=torch.float64, generator=gen)
    b = a + 1.5
    y = (0.75 * torch.tanh(a + 0.6)).requires_grad_()
    x = module.RootOf.apply(lambda t: w * torch.tanh(t), y, a, b, 30, w)
    gy, gw = torch.autograd.grad(x.sum(), (y, w))
    slope = w.detach() / torch.cosh(x.detach()) ** 2
    torch.testing.assert_close(gy, 1 / slope)
    torch.testing.assert_close(gw, (-torch.tanh(x.detach()) / slope).sum())


def test_the_target_is_made_inside_the_bracket(cases):
    module, _ = cases
    found = synthesize(module.RootOf)
    assert isinstance(found, Synthesized), found
    assert "so the root is inside" in found.description
    f, y, a, b = found.args[:4]
    with torch.no_grad():
        assert bool((f(a) <= y).all() and (y <= f(b)).all())
    for variant in found.variants:  # other shapes, 3 * randn: inside too
        f, y, a, b = variant.args[:4]
        with torch.no_grad():
            assert bool((f(a) <= y).all() and (y <= f(b)).all()), variant.change


def test_correct_bisection_passes_and_planted_wrong_one_fails(cases):
    _, rows = cases
    good = rows["RootOf"]
    assert good["verdict"] == "pass", good["text"]
    bad = rows["RootOfTimesSlope"]
    codes = {f["code"] for f in bad["report"]["findings"] if f["severity"] == "error"}
    assert bad["verdict"] == "fail" and codes & {"gradient-mismatch", "undeclared-estimator"}, \
        bad["text"]
