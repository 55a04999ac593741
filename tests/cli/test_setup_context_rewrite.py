"""The ``setup_context`` rewrite gradsmith suggests (func-needs-setup-context) is code that
runs: executed, it gives the original's gradients, and torch.func accepts it. A tensor kept
as a ctx attribute (``ctx.x = x``) is saved with ``save_for_backward`` in the rewrite, and
backward reads it back from ``ctx.saved_tensors``."""

from __future__ import annotations

import textwrap

import torch
from torch.autograd import Function

import gradsmith


class StoresOnCtx(Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.x = x
        ctx.save_for_backward(w)
        ctx.scale = 2.0
        return x * w * 2.0

    @staticmethod
    def backward(ctx, g):
        (w,) = ctx.saved_tensors
        return g * w * ctx.scale, g * ctx.x * ctx.scale


class OnlyOnCtx(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.x = x
        return x * x

    @staticmethod
    def backward(ctx, grad):
        return 2 * grad * ctx.x


def _rewritten(rewrite: str, name: str) -> type:
    """The suggested class body, executed (as a user would paste it)."""
    source = f"class {name}(Function):\n{textwrap.indent(textwrap.dedent(rewrite), '    ')}"
    scope = {"torch": torch, "Function": Function}
    exec(compile(source, f"<rewrite of {name}>", "exec"), scope)  # noqa: S102 - the test
    return scope[name]


def _inputs(*shapes):
    gen = torch.Generator().manual_seed(0)
    return [torch.randn(s, generator=gen, dtype=torch.float64, requires_grad=True)
            for s in shapes]


def _rewrite_of(cls, *args) -> str:
    report = gradsmith.check(cls, *args, compat=True)
    (finding,) = [f for f in report.findings if f.code == "func-needs-setup-context"]
    assert any(f.code == "tensor-on-ctx" for f in report.findings)
    return finding.details["rewrite"]


def test_rewrite_saves_tensor_attributes_and_keeps_the_gradients() -> None:
    x, w = _inputs((3, 4), (3, 4))
    rewrite = _rewrite_of(StoresOnCtx, x, w)
    assert "ctx.x = x" not in rewrite and "ctx.save_for_backward(w, x)" in rewrite
    assert "ctx.scale = 2.0" in rewrite  # a number stays an attribute
    new = _rewritten(rewrite, "StoresOnCtx")
    want = torch.autograd.grad((x * w * 2.0).sum(), (x, w))  # autograd of the same expression
    got = torch.autograd.grad(new.apply(x, w).sum(), (x, w))
    torch.testing.assert_close(got, want)
    # the point of the rewrite: torch.func.grad accepts it and agrees
    func_grad = torch.func.grad(lambda a: new.apply(a, w.detach()).sum())(x.detach())
    torch.testing.assert_close(func_grad, want[0])


def test_rewrite_of_a_function_that_saves_nothing_else() -> None:
    (x,) = _inputs((5,))
    rewrite = _rewrite_of(OnlyOnCtx, x)
    assert "ctx.x = x" not in rewrite and "ctx.save_for_backward(x)" in rewrite
    new = _rewritten(rewrite, "OnlyOnCtx")
    (want,) = torch.autograd.grad((x * x).sum(), x)
    torch.testing.assert_close(torch.autograd.grad(new.apply(x).sum(), x)[0], want)
    torch.testing.assert_close(torch.func.grad(lambda a: new.apply(a).sum())(x.detach()), want)
