"""A flag the code unpacks into a pair (``implicit_in, implicit_out = as_pair(implicit, 2)``,
also in a helper forward hands it to by keyword) may be a tuple of flags; each mixed pair is
tried as a variant (issue 18: corpus 7's held-out false PASS, a softmax whose backward is wrong
only for ``implicit=(True, False)``, never tried). The reference is autograd of the same
forward written in plain torch."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from gradsmith.checkrun.session import run_check
from gradsmith.discovery import Source, Synthesized, synthesize

CASES = '''
import torch
from torch.autograd import Function


def as_pair(flag, n):
    return tuple(flag) if isinstance(flag, (tuple, list)) else (flag,) * n


def softmax_fwd(x, implicit=False):
    implicit_in, implicit_out = as_pair(implicit, 2)
    if implicit_in:  # an extra class of zeros in the input
        x = torch.cat([torch.zeros_like(x[:, :1]), x], dim=1)
    s = torch.softmax(x, dim=1)
    return s, (s[:, 1:] if implicit_out else s)


def softmax_bwd(s, g, implicit, drop_first):
    implicit_in, implicit_out = as_pair(implicit, 2)
    if implicit_out:  # the output lacks the zero class: its gradient is 0
        g = torch.cat([torch.zeros_like(g[:, :1]), g], dim=1)
    grad = s * (g - (g * s).sum(1, keepdim=True))
    if implicit_in and implicit_out:  # the zero class was added and dropped again
        grad = grad[:, 1:]
    elif implicit_in:  # the input had no zero class: drop its gradient (first, not last)
        grad = grad[:, 1:] if drop_first else grad[:, :-1]
    return grad


class ImplicitSoftmax(Function):
    @staticmethod
    def forward(ctx, x, implicit=False):
        s, out = softmax_fwd(x, implicit=implicit)
        ctx.save_for_backward(s)
        ctx.implicit = implicit
        return out

    @staticmethod
    def backward(ctx, g):
        (s,) = ctx.saved_tensors
        return softmax_bwd(s, g, ctx.implicit, True), None


class DropsLast(Function):
    @staticmethod
    def forward(ctx, x, implicit=False):
        s, out = softmax_fwd(x, implicit=implicit)
        ctx.save_for_backward(s)
        ctx.implicit = implicit
        return out

    @staticmethod
    def backward(ctx, g):
        (s,) = ctx.saved_tensors
        return softmax_bwd(s, g, ctx.implicit, False), None
'''


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    path = tmp_path_factory.mktemp("pairs") / "pairs.py"
    path.write_text(CASES)
    spec = importlib.util.spec_from_file_location("pairs_case", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = run_check([Source("file", str(path), "pairs.py")], isolate=False)
    return module, {row["name"].rsplit("::", 1)[-1]: row for row in result.rows}


def test_the_reference_the_twins_are_judged_against(cases):
    module, _ = cases
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    for implicit in (False, True, (True, False), (False, True)):
        (want,) = torch.autograd.grad((module.softmax_fwd(x, implicit)[1] ** 2).sum(), x)
        (got,) = torch.autograd.grad((module.ImplicitSoftmax.apply(x, implicit) ** 2).sum(), x)
        torch.testing.assert_close(got, want)  # right on every value of the option
        (bad,) = torch.autograd.grad((module.DropsLast.apply(x, implicit) ** 2).sum(), x)
        assert torch.allclose(bad, want) == (implicit != (True, False))  # wrong on one only


def test_the_mixed_pairs_are_variants(cases):
    module, _ = cases
    found = synthesize(module.DropsLast)
    assert isinstance(found, Synthesized), found
    tried = {v.change.split(" (")[0] for v in found.variants}
    assert {"implicit=(True, False)", "implicit=(False, True)"} <= tried, tried


def test_the_wrong_pair_fails_and_the_correct_twin_passes(cases):
    _, rows = cases
    assert rows["ImplicitSoftmax"]["verdict"] == "pass", rows["ImplicitSoftmax"]["text"]
    bad = rows["DropsLast"]
    codes = {f["code"] for f in bad["report"]["findings"] if f["severity"] == "error"}
    assert bad["verdict"] == "fail" and "gradient-mismatch" in codes, bad["text"]
