"""A Function forward-only by design is INCOMPLETE "nothing to check", not a backward error
(corpus 12c held-out: graph-export nodes with an ONNX ``symbolic`` and no backward were FAIL
backward-error). Differentiating one still raises (loud, never silently wrong): the row says
there is nothing to check. A Function that evidently means a backward keeps the error: a
misspelt ``backwards``, a forward that saves tensors for a backward it never defines. Reduced
cases written here; references are autograd of the same expression.
"""

from __future__ import annotations

import pytest
import torch
from torch.autograd import Function

import gradsmith


class ExportNode(Function):
    """A graph node made for export: forward and ``symbolic``, no backward."""

    @staticmethod
    def forward(ctx, g, preact):
        return g * (preact > 0).to(g.dtype)

    @staticmethod
    def symbolic(graph, g, preact):
        return graph.op("custom::ReluGrad", g, preact)


class PlainForward(Function):
    """Forward saves nothing and there is no backward at all."""

    @staticmethod
    def forward(ctx, x):
        return 1 - torch.tanh(x) ** 2


class MisspeltBackward(Function):
    """Planted: the backward is spelt ``backwards``; autograd never calls it."""

    @staticmethod
    def forward(ctx, x):
        return x * 3

    @staticmethod
    def backwards(ctx, g):
        return g * 3


class SavesButNoBackward(Function):
    """Planted: forward saves its input for a backward that was never written."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x


class ExportNodeWrongBackward(ExportNode):
    """Planted: an export node that does define a backward, a wrong one (2x the ReLU mask)."""

    @staticmethod
    def forward(ctx, g, preact):
        ctx.save_for_backward(preact)
        return g * (preact > 0).to(g.dtype)

    @staticmethod
    def backward(ctx, grad):
        (preact,) = ctx.saved_tensors
        return 2 * grad * (preact > 0).to(grad.dtype), None


def _x(*shape, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen, dtype=torch.float64, requires_grad=True)


@pytest.mark.parametrize("fn, args", [
    (ExportNode, lambda: (_x(3, 4), _x(3, 4, seed=1))),
    (PlainForward, lambda: (_x(3, 4),)),
], ids=["symbolic", "saves-nothing"])
def test_forward_only_is_incomplete_nothing_to_check(fn, args):
    inputs = args()
    # still loud when differentiated: autograd raises, nothing is silently wrong
    with pytest.raises(NotImplementedError, match="backward or vjp"):
        fn.apply(*inputs).sum().backward()
    report = gradsmith.check(fn, *inputs, compat=False)
    assert report.verdict == "INCOMPLETE" and not report.passed, report
    assert not report.errors
    (only,) = report.incomplete
    assert only.code == "forward-only" and "nothing to check" in only.message


@pytest.mark.parametrize("fn", [MisspeltBackward, SavesButNoBackward],
                         ids=["misspelt-backwards", "saves-for-a-backward"])
def test_an_intended_backward_keeps_the_error(fn):
    report = gradsmith.check(fn, _x(3, 4), compat=False)
    assert report.verdict == "FAILED"
    assert "backward-error" in report.codes("error")
    assert "forward-only" not in report.codes()


def test_an_export_node_with_a_wrong_backward_fails():
    g, preact = _x(3, 4), _x(3, 4, seed=1)
    want, = torch.autograd.grad((g * (preact > 0).to(g.dtype)).sum(), g)
    got, = torch.autograd.grad(ExportNodeWrongBackward.apply(g, preact).sum(), g)
    assert not torch.allclose(got, want)  # the plant is wrong against autograd
    report = gradsmith.check(ExportNodeWrongBackward, g, preact, compat=False)
    assert report.verdict == "FAILED" and "gradient-mismatch" in report.codes("error")
