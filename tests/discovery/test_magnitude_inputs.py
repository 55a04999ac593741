"""A forward written for physical magnitudes (a wavelength in nm inside a table's range) is flat,
with a zero backward, at standard-normal values; its inputs are then tried at larger positive
magnitudes, and the row says so (corpus 11a dev: torcwa's ``aSiH`` clamps to the table's end
values outside [192, 999] nm and was "never exercised" although its backward is twice the true
gradient inside). Functions with a non-zero backward keep their inputs, and a Function flat
everywhere is never moved. Reduced cases written here; the reference is autograd of the same
clamp-and-scale expression.
"""

from __future__ import annotations

import torch
from torch.autograd import Function

import gradsmith
from gradsmith.discovery.synthesize import synthesize


def _inside(x):
    return ((x >= 200) & (x <= 900)).to(x.dtype)


class TableIndex(Function):
    """A refractive index linear in the wavelength over a table [200, 900] nm, clamped to the
    end values outside."""

    @staticmethod
    def forward(ctx, wavelength):
        ctx.save_for_backward(wavelength)
        return 1.5 + 1e-3 * wavelength.clamp(200, 900)

    @staticmethod
    def backward(ctx, g):
        (wavelength,) = ctx.saved_tensors
        return 1e-3 * g * _inside(wavelength)


class TableIndexDoubled(TableIndex):
    @staticmethod
    def backward(ctx, g):
        (wavelength,) = ctx.saved_tensors
        return 2e-3 * g * _inside(wavelength)


class Flat(Function):
    """Constant everywhere: no magnitude makes it move."""

    @staticmethod
    def forward(ctx, x):
        return torch.ones_like(x)

    @staticmethod
    def backward(ctx, g):
        return torch.zeros_like(g)


class Square(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


def test_a_flat_table_lookup_is_checked_where_it_moves():
    found = synthesize(TableIndex)
    assert "|x| * " in found.description, found.description
    (x,) = found.args
    assert bool(_inside(x).any())  # some wavelengths inside the table
    (got,) = torch.autograd.grad(TableIndex.apply(x).sum(), x)
    y = x.detach().clone().requires_grad_(True)
    (want,) = torch.autograd.grad((1.5 + 1e-3 * y.clamp(200, 900)).sum(), y)
    torch.testing.assert_close(got, want)
    report = gradsmith.check(TableIndex, *found.args, compat=False)
    assert report.passed and "not-exercised" not in report.codes("warning"), report


def test_a_planted_wrong_backward_fails_there():
    found = synthesize(TableIndexDoubled)
    report = gradsmith.check(TableIndexDoubled, *found.args, compat=False)
    assert "gradient-mismatch" in report.codes("error"), report


def test_inputs_stay_where_backward_is_not_zero_or_nothing_moves():
    for fn in (Square, Flat):
        found = synthesize(fn)
        assert "|x| * " not in found.description, (fn.__name__, found.description)
    report = gradsmith.check(Flat, *synthesize(Flat).args, compat=False)
    assert not report.passed  # never exercised: not a plain PASS, as before
