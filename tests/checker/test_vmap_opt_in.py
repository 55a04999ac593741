"""Severity under vmap follows the Function's own opt-in (issue 18, corpus 9a held-out: a
measurement operator with ``generate_vmap_rule = True`` whose backward unwraps the batched
gradient and reshapes it to the per-sample shape saved in setup_context).

torch refuses vmap over a ``setup_context``-style Function that defines neither a ``vmap``
staticmethod nor ``generate_vmap_rule = True``, by design: that is a warning, the Function does
not support vmap (and how to add it). A Function that opts in and crashes under vmap, or gives
values other than a loop over the batch, breaks what it offers: an error naming the opt-in.
References are a Python loop over the batch and torch's own refusal.
"""

from __future__ import annotations

import pytest
import torch

from gradsmith import check


def _x(*shape):
    return torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(0),
                       requires_grad=True)


class _Scale(torch.autograd.Function):
    @staticmethod
    def forward(x):
        return 3 * x

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.shape = inputs[0].shape


class NoRule(_Scale):
    """Correct, with no vmap opt-in: vmap refuses it."""

    @staticmethod
    def backward(ctx, g):
        return 3 * g


class UnwrapsBatch(_Scale):
    """Opts in; backward leaves vmap (a kernel that does not batch) and reshapes to the
    per-sample shape: right eagerly, a crash under vmap."""

    generate_vmap_rule = True

    @staticmethod
    def backward(ctx, g):
        from torch._C import _functorch as ft

        while ft.is_gradtrackingtensor(g) or ft.is_batchedtensor(g):  # out of every transform
            g = (ft._unwrap_for_grad(g, ft.maybe_get_level(g)) if ft.is_gradtrackingtensor(g)
                 else ft.get_unwrapped(g))
        return (3 * g).reshape(ctx.shape)


class WrongRule(_Scale):
    """Opts in with a vmap staticmethod that returns other values than forward."""

    @staticmethod
    def backward(ctx, g):
        return 3 * g

    @staticmethod
    def vmap(info, in_dims, x):
        return 2 * x, in_dims[0]


def test_torch_refuses_a_function_without_opt_in_and_runs_one_with_it():
    batch = _x(2, 3, 4).detach()
    with pytest.raises(RuntimeError, match="generate_vmap_rule"):
        torch.func.vmap(NoRule.apply)(batch)
    with pytest.raises(RuntimeError, match="is invalid for input of size 24"):
        torch.func.vmap(torch.func.grad(lambda x: UnwrapsBatch.apply(x).sum()))(batch)
    # the same backward is right outside vmap: autograd of 3 * x
    x = _x(3, 4)
    (got,) = torch.autograd.grad(UnwrapsBatch.apply(x).sum(), x)
    torch.testing.assert_close(got, torch.full_like(x, 3.0))


def test_no_opt_in_is_a_warning_saying_how_to_add_vmap():
    report = check(NoRule, _x(3, 4), checks=["vmap"], compat=True)
    (f,) = [f for f in report.findings if f.check == "vmap"]
    assert (f.code, f.severity) == ("vmap-no-rule", "warning")
    assert "generate_vmap_rule = True" in f.hint
    assert report.passed


def test_an_opted_in_crash_is_an_error_naming_the_opt_in():
    report = check(UnwrapsBatch, _x(3, 4), checks=["vmap"])
    (f,) = [f for f in report.findings if f.code == "vmap-error"]
    assert f.severity == "error" and not report.passed
    assert "opts in to vmap (generate_vmap_rule = True)" in f.message
    assert "per-sample shape (3, 4)" in f.hint


def test_opted_in_wrong_values_are_an_error():
    report = check(WrongRule, _x(3, 4), checks=["vmap"])
    (f,) = [f for f in report.findings if f.code == "vmap-mismatch"]
    assert f.severity == "error" and not report.passed
    assert f.message.startswith("the Function opts in to vmap (a vmap staticmethod)")
    # the reference: a loop over the batch gives 3 * x, the rule 2 * x
    batch = _x(2, 3, 4).detach()
    loop = torch.stack([WrongRule.apply(b) for b in batch])
    torch.testing.assert_close(loop, 3 * batch)
    assert not torch.allclose(torch.func.vmap(WrongRule.apply)(batch), loop)
