"""Zero-config inputs shaped by how forward reads them (issue 18, corpus 5 dev half, "not
done"): a last axis read only at constant indices (a complex number as (real, imag)) gets
exactly that many columns, and an argument used as a 0/1 mask gets 0/1 values. Reduced cases,
written here; each is checked against autograd of the same expression."""

import torch
from torch.autograd import Function

import gradsmith
from gradsmith.discovery.synthesize import Synthesized, synthesize


def _modulus(wrong: bool):
    class Modulus(Function):
        """|z| for z stored as (real, imag) in the last axis."""

        @staticmethod
        def forward(ctx, z):
            out = torch.sqrt(z[..., 0] ** 2 + z[..., 1] ** 2)
            ctx.save_for_backward(z, out)
            return out

        @staticmethod
        def backward(ctx, g):
            z, out = ctx.saved_tensors
            scale = (2.0 if wrong else 1.0) * g / out
            return torch.stack((scale * z[..., 0], scale * z[..., 1]), -1)

    return Modulus


def _masked(wrong: bool):
    class MaskedScale(Function):
        """x * mask * 3, where mask is 0/1; its gradient is not asked for."""

        @staticmethod
        def forward(ctx, x, mask):
            keep = mask.bool()
            ctx.save_for_backward(keep)
            return torch.where(keep, 3 * x, torch.zeros_like(x))

        @staticmethod
        def backward(ctx, g):
            (keep,) = ctx.saved_tensors
            return (g * 3 if wrong else torch.where(keep, 3 * g, torch.zeros_like(g))), None

    return MaskedScale


def _check(fn):
    found = synthesize(fn)
    assert isinstance(found, Synthesized), found
    return found, gradsmith.check(fn, *found.args)


def test_constant_index_reads_give_the_last_axis_that_many_columns():
    found, report = _check(_modulus(False))
    (z,) = found.args
    assert z.shape[-1] == 2
    ref = z.detach().clone().requires_grad_()
    (expected,) = torch.autograd.grad(ref.norm(dim=-1).sum(), ref)  # independent reference
    assert torch.allclose(_modulus(False).backward(_Ctx(z, z.norm(dim=-1)),
                                                   torch.ones(z.shape[:-1], dtype=z.dtype)),
                          expected)
    assert report.passed, report


def test_constant_index_reads_still_catch_a_wrong_backward():
    found, report = _check(_modulus(True))
    assert "z: float64 (3, 2)" in found.description
    assert not report.passed
    assert [f.code for f in report.findings if f.severity == "error"] == ["gradient-mismatch"]


def test_mask_argument_is_synthesised_as_zeros_and_ones():
    found, report = _check(_masked(False))
    mask = found.args[1]
    assert set(mask.flatten().tolist()) == {0.0, 1.0}
    x = found.args[0].detach().clone().requires_grad_()
    (expected,) = torch.autograd.grad((x * mask * 3).sum(), x)  # independent reference
    assert torch.equal(expected, torch.where(mask.bool(), 3.0, 0.0).to(x.dtype))
    assert report.passed, report


def test_mask_argument_still_catches_a_wrong_backward():
    _, report = _check(_masked(True))
    assert not report.passed


class _Gated(Function):
    """x * (mask != 0) with a (zero) gradient returned for mask: a finite-difference step
    across 0 would flip the gate, so a mask whose gradient is checked keeps Gaussian values."""

    @staticmethod
    def forward(ctx, x, mask):
        gate = mask.bool().to(x.dtype)
        ctx.save_for_backward(gate)
        return x * gate

    @staticmethod
    def backward(ctx, g):
        (gate,) = ctx.saved_tensors
        return g * gate, torch.zeros_like(g)


def test_a_thresholded_mask_whose_gradient_is_checked_is_not_put_on_its_threshold():
    found, report = _check(_Gated)
    assert 0.0 not in found.args[1].flatten().tolist()
    assert report.passed, report


class _Ctx:
    def __init__(self, *saved):
        self.saved_tensors = saved
