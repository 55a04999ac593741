"""Synthesised inputs must not hide bugs: each planted bug below is right on the first input
set and wrong on a variant (a hyperparameter at a non-default value, an optional tensor
present, other shapes, a size-1 dimension); its correct twin must pass on every set."""

from __future__ import annotations

import textwrap

import pytest
import torch

from gradsmith.checkrun.session import run_check
from gradsmith.discovery import Source, Synthesized, synthesize

FUNCTIONS = '''
import torch
import torch.nn.functional as F
from torch.autograd import Function


class SoftplusIgnoresBeta(Function):
    @staticmethod
    def forward(ctx, x, beta=1.0, threshold=20.0):
        ctx.save_for_backward(x)
        ctx.beta = beta
        return F.softplus(x, beta, threshold)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * torch.sigmoid(x), None, None          # bug: sigmoid(beta * x)


class Softplus(Function):
    @staticmethod
    def forward(ctx, x, beta=1.0, threshold=20.0):
        ctx.save_for_backward(x)
        ctx.beta = beta
        return F.softplus(x, beta, threshold)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * torch.sigmoid(ctx.beta * x), None, None


class LinearBadBias(Function):
    @staticmethod
    def forward(ctx, x, w, bias=None):
        ctx.save_for_backward(x, w)
        ctx.has_bias = bias is not None
        return F.linear(x, w, bias)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        gb = g.sum(1) if ctx.has_bias else None           # bug: sum over the batch (dim 0)
        return g @ w, g.t() @ x, gb


class Linear(Function):
    @staticmethod
    def forward(ctx, x, w, bias=None):
        ctx.save_for_backward(x, w)
        ctx.has_bias = bias is not None
        return F.linear(x, w, bias)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g @ w, g.t() @ x, g.sum(0) if ctx.has_bias else None


class HardCodedShape(Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return (2 * g).reshape(3, 4)                      # bug: only the first shape works


class SqueezesGrad(Function):
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x * y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        gy = (g * x).sum(0, keepdim=True).squeeze()       # bug: squeezes a size-1 dim away
        return g * y, gy if y.shape[0] == 1 else g * x


class Mul(Function):
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x * y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        gy = g * x
        if y.shape[0] == 1:
            gy = gy.sum(0, keepdim=True)
        return g * y, gy


class ReleasesInputChunk(Function):
    """memcnn-style: frees a chunk of the input with set_(); with a batch of 1 the chunk is a
    view of the input, so the input's version counter moves."""

    @staticmethod
    def forward(ctx, x):
        with torch.no_grad():
            first, second = torch.chunk(x.detach(), 2, dim=1)
            first, second = first.contiguous(), second.contiguous()
            y = torch.cat([first * 2, second], dim=1)
            first.set_()
        ctx.save_for_backward(x)
        return y

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        a, b = g.chunk(2, dim=1)
        return torch.cat([2 * a, b], dim=1)
'''


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    path = tmp_path_factory.mktemp("variants") / "variant_ops.py"
    path.write_text(textwrap.dedent(FUNCTIONS))
    result = run_check([Source("file", str(path), "variant_ops.py")], isolate=False)
    return {r["name"].split("::")[1]: r for r in result.rows}


@pytest.mark.parametrize("bad, good, change", [
    ("SoftplusIgnoresBeta", "Softplus", "beta=1.5"),
    ("LinearBadBias", "Linear", "bias given"),
    ("HardCodedShape", None, "other shapes"),
    ("SqueezesGrad", "Mul", "size-1 dimension"),
    ("ReleasesInputChunk", None, "size-1 dimension"),   # memcnn: set_() on a view of x
])
def test_a_bug_hidden_by_the_first_inputs_is_found_on_a_variant(rows, bad, good, change):
    row = rows[bad]
    assert row["verdict"] == "fail", row["text"]
    errors = [f for f in row["report"]["findings"] if f["severity"] == "error"]
    # The first input set passes: every error comes from a variant, which the message names.
    assert errors and all(f["details"].get("input_set", 0) >= 1 for f in errors)
    assert any(change in f["details"]["inputs"] and change in f["message"] for f in errors)
    assert change in row["inputs"]
    # ...and the variant's exact inputs travel with the row, for --repro.
    sets = row["repro"]["sets"]
    assert len(sets) >= 2 and sets[errors[0]["details"]["input_set"]]["label"].startswith(
        change.split(" ")[0])
    if good is not None:
        assert rows[good]["verdict"] == "pass", rows[good]["text"]
        assert change in rows[good]["inputs"]


def test_variants_keep_the_first_set_and_change_one_thing():
    def softplus(x, beta=1.0, threshold=20.0):
        return torch.nn.functional.softplus(x, beta, threshold)

    found = synthesize(softplus)
    assert isinstance(found, Synthesized)
    assert found.args[1:] == (1.0, 20.0)
    changes = {v.change: v for v in found.variants}
    hyper = changes["beta=1.5, threshold=30.0"]  # a threshold of 20 is a branch, not a tolerance
    assert hyper.args[1:] == (1.5, 30.0) and torch.equal(hyper.args[0], found.args[0])
    shapes = sorted(tuple(v.args[0].shape) for v in found.variants if "shape" in v.change
                    or "size-1" in v.change)
    assert shapes == [(1, 4), (2, 5)]


def test_variants_that_the_forward_rejects_are_dropped():
    def needs_3_by_4(x):
        if x.shape != (3, 4):
            raise ValueError("only (3, 4)")
        return x * 2

    found = synthesize(needs_3_by_4)
    assert isinstance(found, Synthesized)  # only the same shape at a wider scale is kept
    assert [v.change for v in found.variants] == ["values 3 * randn: x"]


def test_matmul_shapes_stay_consistent_in_the_resized_variant():
    found = synthesize(lambda a, b: a @ b)
    resized = next(v for v in found.variants if v.change.startswith("other shapes"))
    a, b = resized.args
    assert a.shape[1] == b.shape[0] and (a.shape, b.shape) != (found.args[0].shape,
                                                               found.args[1].shape)


def test_size1_variant_keeps_attention_keys_and_values_alike():
    def attention(q, k, v):
        return (q @ k.transpose(-1, -2)).softmax(-1) @ v

    found = synthesize(attention)
    variant = next(v for v in found.variants if v.change.startswith("size-1"))
    q, k, v = variant.args
    assert k.shape == v.shape and k.shape[0] == 1 and q.shape == found.args[0].shape
