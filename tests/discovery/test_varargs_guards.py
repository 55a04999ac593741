"""``*args`` sized by the raising guards on its length (issue 18, corpus 13 development half).

phytorch's ``Roots.forward(ctx, force_numeric=False, *coeffs)`` sets ``n = len(coeffs)`` and
raises for ``n == 0`` and ``n == 1``; synthesis passed one coefficient and every layout failed
on ``NotImplementedError``. The guards say which counts forward refuses: synthesis now passes
the fewest items none of them refuses. The reduced case below is a monic quadratic's roots
(real, distinct: ``c0 = -(r0 + r1)``, ``c1 = r0 r1``); its backward inverts Vieta's Jacobian
and is compared with autograd of the same closed form. A planted wrong backward still FAILs.
"""

from __future__ import annotations

import inspect

import pytest
import torch
from source_cases import check_rows, error_codes, load_source

from gradsmith.discovery.varargs import counted_by_guards

CASES = '''
import torch


def _roots(c0, c1):
    disc = torch.sqrt(c0 * c0 - 4 * c1 + 1e-12)
    return (-c0 - disc) / 2, (-c0 + disc) / 2


class QuadRoots(torch.autograd.Function):
    """Roots of x^2 + c0 x + c1 (coefficients in *coeffs, leading one omitted)."""

    @staticmethod
    def forward(ctx, force_numeric=False, *coeffs):
        n = len(coeffs)
        if n == 0:
            raise ValueError("At least 2 coefficients are needed.")
        if n == 1:
            raise NotImplementedError("You already have the answer...")
        assert len(coeffs) <= 2, "only quadratics here"
        c0 = coeffs[0] + 4.0  # shifted so the discriminant is positive: distinct real roots
        c1 = coeffs[1] * 0.1
        r0, r1 = _roots(c0, c1)
        ctx.save_for_backward(r0, r1)
        return r0, r1

    @staticmethod
    def backward(ctx, g0, g1):
        r0, r1 = ctx.saved_tensors
        # c0 = -(r0 + r1), c1 = r0 r1: dr/dc = inverse of [[-1, -1], [r1, r0]]
        det = r1 - r0
        dr0_dc0, dr0_dc1 = r0 / det, 1 / det
        dr1_dc0, dr1_dc1 = -r1 / det, -1 / det
        gc0 = g0 * dr0_dc0 + g1 * dr1_dc0
        gc1 = (g0 * dr0_dc1 + g1 * dr1_dc1) * 0.1
        return None, gc0, gc1


class QuadRootsSwapped(torch.autograd.Function):
    """QuadRoots with a planted wrong backward: the roots' gradients swapped."""

    @staticmethod
    def forward(ctx, force_numeric=False, *coeffs):
        n = len(coeffs)
        if n < 2:
            raise ValueError("At least 2 coefficients are needed.")
        c0 = coeffs[0] + 4.0
        c1 = coeffs[1] * 0.1
        r0, r1 = _roots(c0, c1)
        ctx.save_for_backward(r0, r1)
        return r0, r1

    @staticmethod
    def backward(ctx, g0, g1):
        r0, r1 = ctx.saved_tensors
        det = r1 - r0
        gc0 = g1 * r0 / det - g0 * r1 / det
        gc1 = (g1 / det - g0 / det) * 0.1
        return None, gc0, gc1
'''


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    path = tmp_path_factory.mktemp("varargs_guards") / "quad_roots.py"
    return check_rows(path, CASES), path


def test_the_fewest_items_the_guards_accept(rows):
    _, path = rows
    module = load_source(path, "varargs_guards_quad")
    params = list(inspect.signature(module.QuadRoots.forward).parameters.values())[1:]
    sized = counted_by_guards(module.QuadRoots.forward, params)
    assert [p.name for p in sized] == ["force_numeric", "coeffs_0", "coeffs_1"]
    # a lower bound reads the same way; no guard on the length: nothing changes
    params = list(inspect.signature(module.QuadRootsSwapped.forward).parameters.values())[1:]
    assert len(counted_by_guards(module.QuadRootsSwapped.forward, params)) == 3

    def unguarded(ctx, *xs):
        return sum(xs)

    assert counted_by_guards(unguarded, list(inspect.signature(unguarded).parameters.values())
                             [1:]) is None


def test_the_backward_matches_autograd_of_the_closed_form(rows):
    _, path = rows
    module = load_source(path, "varargs_guards_ref")
    c = [torch.randn(3, dtype=torch.float64, requires_grad=True) for _ in range(2)]
    got = torch.autograd.grad(sum(r.sum() * (i + 1) for i, r in
                                  enumerate(module.QuadRoots.apply(False, *c))), c)
    r0, r1 = module._roots(c[0] + 4.0, c[1] * 0.1)
    want = torch.autograd.grad(r0.sum() + 2 * r1.sum(), c)
    assert all(torch.allclose(a, b) for a, b in zip(got, want))


def test_a_correct_backward_passes_and_a_planted_one_fails(rows):
    by_name, _ = rows
    assert by_name["QuadRoots"]["verdict"] == "pass", by_name["QuadRoots"].get("reason")
    planted = by_name["QuadRootsSwapped"]
    assert planted["verdict"] == "fail", planted.get("reason")
    assert "gradient-mismatch" in error_codes(planted)
