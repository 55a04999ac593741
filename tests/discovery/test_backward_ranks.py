"""The rank backward unpacks from a shape, carried back to forward's input (issue 18, corpus 8a).

``bsz, length, d_out = grad.shape`` in backward needs an output of rank 3; forward's ``z @ w``
has the rank of ``z``. Synthesis read such unpacking in forward only: ``z`` got a (4, 3)
matrix, backward raised ``not enough values to unpack (expected 3, got 2)`` on every layout
forward accepted, and a correct Function FAILed with ``backward-error`` (mdeq's
gradient-injection ``Backward`` unpacks three sizes of its gradient the same way).
"""

from __future__ import annotations

import pytest
import torch
from source_cases import check_rows, error_codes, load_source

from gradsmith.discovery import Synthesized, synthesize
from gradsmith.discovery.hints import forward_hints

CASES = '''
import torch


class TokenLinear(torch.autograd.Function):
    """Tokens (batch, length, d_in) times a weight (d_in, d_out)."""

    @staticmethod
    def forward(ctx, z, w):
        ctx.save_for_backward(z, w)
        return z @ w

    @staticmethod
    def backward(ctx, grad):
        z, w = ctx.saved_tensors
        bsz, length, d_out = grad.shape
        gz = grad @ w.t()
        gw = z.reshape(bsz * length, -1).t() @ grad.reshape(bsz * length, d_out)
        return gz, gw


class TokenLinearFirstItem(torch.autograd.Function):
    """TokenLinear with a planted wrong backward: the weight's gradient of the first item only."""

    @staticmethod
    def forward(ctx, z, w):
        ctx.save_for_backward(z, w)
        return z @ w

    @staticmethod
    def backward(ctx, grad):
        z, w = ctx.saved_tensors
        bsz, length, d_out = grad.shape
        gz = grad @ w.t()
        gw = z[0].t() @ grad[0]
        return gz, gw


class SavedSizes(torch.autograd.Function):
    """Backward unpacks four sizes of a saved input and three of one kept on ctx."""

    @staticmethod
    def forward(ctx, x, y, k):
        ctx.save_for_backward(x)
        ctx.y = y
        return x.sum() + y.sum() * k

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        y = ctx.y
        n, c, h, w = x.size()
        b, *rest = ctx.y.shape
        t, l, d = y.shape
        return g.expand(n, c, h, w), g.expand(t, l, d), None
'''


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    path = tmp_path_factory.mktemp("backward_ranks") / "ranks.py"
    rows = check_rows(path, CASES)
    return load_source(path, "ranks_case"), rows


def test_a_rank_unpacked_from_the_gradient_reaches_the_input(cases):
    module, rows = cases
    found = synthesize(module.TokenLinear)
    assert isinstance(found, Synthesized), found
    z, w = found.args
    assert z.dim() == 3 and w.dim() == 2, found.description
    # Independent of gradsmith: autograd of the plain matmul.
    zs, ws = z.detach().requires_grad_(), w.detach().requires_grad_()
    g = torch.randn(z.shape[0], z.shape[1], w.shape[1], dtype=torch.float64)
    want = torch.autograd.grad(zs @ ws, (zs, ws), g)
    got = torch.autograd.grad(module.TokenLinear.apply(z, w), (z, w), g)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)
    assert rows["TokenLinear"]["verdict"] == "pass", rows["TokenLinear"]["text"]


def test_a_wrong_backward_of_the_same_shape_still_fails(cases):
    _, rows = cases
    wrong = rows["TokenLinearFirstItem"]
    assert wrong["verdict"] == "fail", wrong["text"]
    assert error_codes(wrong) == {"gradient-mismatch"}, wrong["text"]


def test_ranks_unpacked_from_saved_and_kept_tensors(cases):
    module, _ = cases
    hints = forward_hints(module.SavedSizes.forward, ["x", "y", "k"], owner=module.SavedSizes)
    # four names for x's saved copy, three for y kept on ctx (the starred unpacking only
    # says at least one), nothing for k
    assert (hints["x"].rank_min, hints["y"].rank_min, hints["k"].rank_min) == (4, 3, 0)
