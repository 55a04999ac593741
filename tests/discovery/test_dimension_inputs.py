"""An argument that indexes a tensor's sizes is a dimension, not index tensor (issue 18, corpus
5: a scalar-bias Function of a translation toolkit).

``size = list(input.size()); size[dim] += 1`` makes ``dim`` a Python int below the rank; the
rule for ``features[y]`` (row indices of a tensor) made it an int64 tensor, and every layout
failed ("only integer tensors of a single element can be converted to an index"): a skip. Now a
subscript of a tensor's sizes marks an int, which the name table gives -1. Reduced case
written here; gradients compared with autograd of ``torch.cat`` (the same padding).
"""

from __future__ import annotations

import textwrap

import pytest
import torch

from gradsmith.checkrun.session import run_check
from gradsmith.discovery import Source, Synthesized, synthesize

FUNCTIONS = '''
import torch
from torch.autograd import Function


class PadFront(Function):
    @staticmethod
    def forward(ctx, input, dim, fill):
        size = list(input.size())
        size[dim] += 1
        output = input.new(*size).fill_(fill)
        output.narrow(dim, 1, size[dim] - 1).copy_(input)
        ctx.dim = dim
        return output

    @staticmethod
    def backward(ctx, grad):
        return grad.narrow(ctx.dim, 1, grad.size(ctx.dim) - 1), None, None


class PadFrontWrong(Function):
    @staticmethod
    def forward(ctx, input, dim, fill):
        size = list(input.size())
        size[dim] += 1
        output = input.new(*size).fill_(fill)
        output.narrow(dim, 1, size[dim] - 1).copy_(input)
        ctx.dim = dim
        return output

    @staticmethod
    def backward(ctx, grad):
        return grad.narrow(ctx.dim, 0, grad.size(ctx.dim) - 1), None, None  # planted: offset


def pad_front(input, dim, fill=0.0):
    return PadFront.apply(input, dim, fill)
'''


@pytest.fixture(scope="module")
def module(tmp_path_factory):
    path = tmp_path_factory.mktemp("dims") / "dim_ops.py"
    path.write_text(textwrap.dedent(FUNCTIONS))
    result = run_check([Source("file", str(path), "dim_ops.py")], isolate=False)
    import importlib.util

    spec = importlib.util.spec_from_file_location("dim_ops", path)
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded, {r["name"].split("::")[1]: r for r in result.rows}


def test_a_dimension_argument_is_an_int_and_the_correct_pad_passes(module):
    loaded, rows = module
    assert rows["PadFront"]["verdict"] == "pass", rows["PadFront"]["text"]
    found = synthesize(loaded.PadFront)
    assert isinstance(found, Synthesized) and type(found.args[1]) is int
    x = found.args[0].detach().clone().requires_grad_()
    dim, fill = found.args[1], found.args[2]
    g = torch.randn(loaded.PadFront.apply(x, dim, fill).shape, dtype=x.dtype,
                    generator=torch.Generator().manual_seed(0))
    got = torch.autograd.grad(loaded.PadFront.apply(x, dim, fill), x, g)[0]
    pad_shape = list(x.shape)
    pad_shape[dim] = 1
    expected = torch.autograd.grad(torch.cat([torch.full(pad_shape, float(fill),
                                                         dtype=x.dtype), x], dim), x, g)[0]
    torch.testing.assert_close(got, expected)


def test_a_backward_reading_the_wrong_slice_fails(module):
    _, rows = module
    row = rows["PadFrontWrong"]
    assert row["verdict"] == "fail" and "gradient-mismatch" in row["text"], row["text"]
