"""A forward that treats the elements equal to an argument specially (``x == magic_number``)
runs that path only where some element is that value: synthesis plants it (issue 18, corpus
4's false PASS). Reduced case written here: runs of a sentinel replaced by linear
interpolation between their non-sentinel neighbours."""

from __future__ import annotations

import textwrap

import pytest
import torch

from gradsmith.checkrun.session import run_check
from gradsmith.discovery import Source, Synthesized, synthesize
from gradsmith.discovery.sentinels import equality_sentinels, plant

FUNCTIONS = '''
import torch
from torch.autograd import Function
from torch.autograd.function import once_differentiable


def neighbours(x, mask):
    """Per sample: the nearest non-sentinel sample at or before it, at or after it, and the
    interpolation weight of the one after."""
    n = x.shape[-1]
    pos = torch.arange(n).expand_as(x)
    valid = ~mask
    left = torch.where(valid, pos, torch.zeros_like(pos)).cummax(-1).values
    right = torch.where(valid, pos, torch.full_like(pos, n - 1)).flip(-1).cummin(-1).values.flip(-1)
    w = ((pos - left) / (right - left).clamp(min=1)).to(x.dtype)
    return left, right, w


def fill(x, left, right, w):
    return x.gather(-1, left) * (1 - w) + x.gather(-1, right) * w


class FillSentinel(Function):
    @staticmethod
    def forward(ctx, x, magic_number):
        left, right, w = neighbours(x, x == magic_number)
        ctx.save_for_backward(left, right, w)
        return fill(x, left, right, w)

    @staticmethod
    def backward(ctx, g):
        left, right, w = ctx.saved_tensors
        gx = torch.zeros_like(g)
        gx.scatter_add_(-1, left, g * (1 - w))
        gx.scatter_add_(-1, right, g * w)
        return gx, None


class FillSentinelDropsNeighbours(Function):
    @staticmethod
    def forward(ctx, x, magic_number):
        mask = x == magic_number
        ctx.save_for_backward(mask)
        return fill(x, *neighbours(x, mask))

    @staticmethod
    def backward(ctx, g):
        (mask,) = ctx.saved_tensors
        return g * (~mask), None                 # bug: the neighbours' share is dropped


class Sinc(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.where(x == 0, torch.ones_like(x), torch.sin(x) / x)

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        safe = torch.where(x == 0, torch.ones_like(x), x)
        slope = (safe * torch.cos(safe) - torch.sin(safe)) / safe**2
        return g * torch.where(x == 0, torch.zeros_like(x), slope)


class SincNanAtZero(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.where(x == 0, torch.ones_like(x), torch.sin(x) / x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (x * torch.cos(x) - torch.sin(x)) / x**2     # bug: 0 / 0 at x == 0


class SavedSentinel(Function):
    """The sentinel kept as a tensor (saved for backward) and an early pass-through when no
    element is the sentinel: synthesis must keep it a tensor and still plant it."""

    @staticmethod
    def forward(ctx, x, magic_number):
        left, right, w = neighbours(x, x == magic_number)
        ctx.save_for_backward(x, magic_number, left, right, w)
        if torch.all(x != magic_number):
            return x
        return fill(x, left, right, w)

    @staticmethod
    def backward(ctx, g):
        x, magic_number, left, right, w = ctx.saved_tensors
        gx = torch.zeros_like(g)
        gx.scatter_add_(-1, left, g * (1 - w))
        gx.scatter_add_(-1, right, g * w)
        return gx, None


class SavedSentinelDropsNeighbours(Function):
    @staticmethod
    def forward(ctx, x, magic_number):
        ctx.save_for_backward(x, magic_number)
        if torch.all(x != magic_number):
            return x
        return fill(x, *neighbours(x, x == magic_number))

    @staticmethod
    def backward(ctx, g):
        x, magic_number = ctx.saved_tensors
        return g * (x != magic_number), None     # bug: the neighbours' share is dropped


def is_gap(t, value):
    return torch.eq(t, value)


def forward_with_helper(ctx, signal, fill, scale):
    return signal.masked_fill(is_gap(signal, fill), 0.0) * scale
'''


@pytest.fixture(scope="module")
def module(tmp_path_factory):
    path = tmp_path_factory.mktemp("sentinel") / "sentinel_ops.py"
    path.write_text(textwrap.dedent(FUNCTIONS))
    namespace: dict = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)  # noqa: S102 - our own text
    rows = run_check([Source("file", str(path), "sentinel_ops.py")], isolate=False).rows
    return namespace, {r["name"].split("::")[1]: r for r in rows}


def _planted_set(found: Synthesized):
    return next(v for v in found.variants if v.change.startswith("sentinel planted"))


def test_the_compared_argument_is_a_number_planted_in_the_tensor(module):
    namespace, _ = module
    found = synthesize(namespace["FillSentinel"])
    assert isinstance(found, Synthesized)
    assert found.args[1] == 0.5 and "magic_number=0.5" in found.description
    planted = _planted_set(found)
    x, magic = planted.args
    hits = (x == magic).reshape(-1, x.shape[-1])
    assert 0 < int(hits.sum()) < x.numel()
    assert not hits[:, 0].any() and not hits[:, -1].any()   # each run has neighbours
    assert hits.sum(-1).tolist() == [1, 2, 2]               # isolated and runs of 2
    assert "0.5 planted at 5 of 12 elements" in planted.description
    assert "compares it with magic_number" in planted.description


def test_the_correct_interpolation_passes_and_the_dropped_gradient_fails(module):
    namespace, rows = module
    assert rows["FillSentinel"]["verdict"] == "pass", rows["FillSentinel"]["text"]
    bad = rows["FillSentinelDropsNeighbours"]
    assert bad["verdict"] == "fail", bad["text"]
    errors = [f for f in bad["report"]["findings"] if f["severity"] == "error"]
    assert [f["code"] for f in errors] == ["gradient-mismatch"]
    assert "sentinel planted: x == magic_number" in errors[0]["details"]["inputs"]
    assert "sentinel planted: x == magic_number" in bad["inputs"]


def test_planted_gradients_match_autograd_of_the_plain_expression(module):
    namespace, _ = module
    x, magic = _planted_set(synthesize(namespace["FillSentinel"])).args
    left, right, w = namespace["neighbours"](x.detach(), x.detach() == magic)
    x_ref = x.detach().clone().requires_grad_()
    g = torch.randn(x.shape, dtype=x.dtype, generator=torch.Generator().manual_seed(1))
    (expected,) = torch.autograd.grad(namespace["fill"](x_ref, left, right, w), x_ref, g)
    for name, same in (("FillSentinel", True), ("FillSentinelDropsNeighbours", False)):
        x_in = x.detach().clone().requires_grad_()
        (got,) = torch.autograd.grad(namespace[name].apply(x_in, magic), x_in, g)
        assert torch.allclose(got, expected) is same, name


def test_a_literal_compared_for_equality_is_planted(module):
    namespace, rows = module
    planted = _planted_set(synthesize(namespace["Sinc"]))
    assert int((planted.args[0] == 0).sum()) == 5 and planted.change == "sentinel planted: x == 0.0"
    assert rows["Sinc"]["verdict"] == "pass", rows["Sinc"]["text"]
    bad = rows["SincNanAtZero"]
    assert bad["verdict"] == "fail" and "sentinel planted: x == 0.0" in bad["inputs"], bad["text"]
    x = planted.args[0].detach().clone().requires_grad_()
    reference = torch.autograd.grad(torch.sinc(x / torch.pi).sum(), x)[0]  # torch's own sinc
    assert torch.allclose(torch.autograd.grad(namespace["Sinc"].apply(x).sum(), x)[0], reference)


def test_comparisons_are_read_from_forward_and_its_helpers(module):
    namespace, _ = module
    forward = namespace["forward_with_helper"]
    assert equality_sentinels(forward, ["signal", "fill", "scale"]) == {
        "signal": "fill", "fill": "signal"}
    assert plant(torch.zeros(2), 1.0)[1] == 0       # no interior: nothing planted


def test_a_sentinel_kept_as_a_tensor_is_a_0d_tensor_planted_in_the_data(module):
    # corpus 4's false PASS saved the sentinel with save_for_backward: a tensor use, so it was
    # synthesised as a (3, 4) tensor no element ever equalled, and the special path never ran.
    namespace, rows = module
    found = synthesize(namespace["SavedSentinel"])
    x, magic = _planted_set(found).args
    assert isinstance(magic, torch.Tensor) and magic.dim() == 0
    assert 0 < int((x == magic).sum()) < x.numel()
    assert rows["SavedSentinel"]["verdict"] == "pass", rows["SavedSentinel"]["text"]
    bad = rows["SavedSentinelDropsNeighbours"]
    assert bad["verdict"] == "fail", bad["text"]
    assert "sentinel planted: x == magic_number" in bad["inputs"]
    left, right, w = namespace["neighbours"](x.detach(), x.detach() == magic)
    x_ref = x.detach().clone().requires_grad_()
    (expected,) = torch.autograd.grad(namespace["fill"](x_ref, left, right, w).sum(), x_ref)
    x_in = x.detach().clone().requires_grad_()
    (got,) = torch.autograd.grad(namespace["SavedSentinelDropsNeighbours"].apply(x_in, magic)
                                 .sum(), x_in)
    assert not torch.allclose(got, expected)          # the bug is real on the planted set
