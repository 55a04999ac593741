"""A backward whose sums run in a different order each time (a GPU's atomic adds) differs
between runs in its last bits only: not a wrong gradient, so not an error; a backward that
really changes between runs (state on ctx, fresh noise) still is."""

import torch
from torch.autograd import Function

import gradsmith
from gradsmith.checker.tensors import rounding_only


def _shuffled_sum(t: torch.Tensor) -> torch.Tensor:
    # float32 sum in an order drawn from torch's generator: as atomic adds land in any order
    order = torch.randperm(t.numel())
    out = torch.zeros((), dtype=torch.float32)
    for v in t.reshape(-1)[order].float():
        out = out + v
    return out


class AtomicDot(Function):
    """y = sum(x * w), everything computed in float32 (a kernel's precision)."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return (x.float() * w.float()).sum().to(x.dtype)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        gx = (g.float() * w.float()).expand(x.shape).to(x.dtype)
        # w's gradient summed over the rows, in a random order each call
        gw = torch.stack([_shuffled_sum(g.float() * x[:, j]) for j in range(x.shape[1])])
        return gx, gw.to(w.dtype)


class Drifting(Function):
    """A backward that changes between identical runs by far more than rounding."""

    calls = 0

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        Drifting.calls += 1
        return g * (2 + 1e-3 * Drifting.calls)


def _inputs():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(64, 3, generator=gen).float().double().requires_grad_()
    w = torch.randn(3, generator=gen).float().double().requires_grad_()
    return x, w


def test_rounding_only_is_last_bits_relative_to_the_largest_entry():
    a = torch.tensor([1.0, 1e-9, -2.0], dtype=torch.float64)
    eps = torch.finfo(torch.float32).eps
    assert rounding_only(a, a + 50 * eps, eps)          # tiny entries judged by the largest
    assert not rounding_only(a, a + 1e-2, eps)
    assert not rounding_only(a, None, eps) and rounding_only(None, None, eps)


def test_atomic_order_backward_is_not_an_error():
    x, w = _inputs()
    # Independent check: the gradient is right up to float32 rounding, and two runs differ.
    gx, gw = torch.autograd.grad(AtomicDot.apply(x, w), (x, w))
    torch.testing.assert_close(gw, x.detach().sum(0), rtol=1e-5, atol=1e-5)
    torch.manual_seed(1)
    a = torch.autograd.grad(AtomicDot.apply(x, w), w)[0]
    torch.manual_seed(2)
    b = torch.autograd.grad(AtomicDot.apply(x, w), w)[0]
    assert not torch.equal(a, b)
    report = gradsmith.check(AtomicDot, x, w, checks=["gradients", "robustness", "randomness"])
    errors = [f for f in report.findings if f.is_error]
    assert errors == [], errors
    assert "fresh-noise-in-backward" not in report.codes()


def test_a_backward_that_drifts_is_still_an_error():
    x = torch.randn(5, dtype=torch.float64, requires_grad=True)
    report = gradsmith.check(Drifting, x, checks=["robustness"])
    bad = [f for f in report.findings if f.is_error and f.code == "nondeterministic-backward"]
    assert bad, report.findings
