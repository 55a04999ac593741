"""A quantised layer's weight handed over as a callable or an object (issue 18, corpus 11b
held-out, spent: a quantisation library's three matmul Functions).

- ``mm(x, transpose=True)`` in forward and ``ctx.mm(g, transpose=False)`` in backward: one
  callable that is a linear map and its adjoint, told apart by a flag. It got ``tanh`` (a
  false gradient-mismatch); now a seeded matrix ``M``: ``x @ M.T`` under forward's flag,
  ``y @ M`` under the other.
- ``x @ dequantize().t()``: a callable called with nothing, giving the weight. It got a
  function of tensors, which raised on no tensors (a skip, IndexError); now it gives ``M``.
- ``x @ layer.dequantize().t()``: an object asked for its weight. It got a float tensor (a
  tensor has ``.dequantize()``, the identity on floats), and backward's ``grad_weight = None``
  (a name only ever ``None``) was not read as declaring it not differentiable, so a
  gradient backward leaves out by design was compared (a false gradient-mismatch). Now the
  name counts as ``None`` and the layer is an object whose ``.dequantize()`` gives ``M``.

Right backwards PASS and agree with autograd of the same product; backwards using ``M.T``
where ``M`` belongs still FAIL. Reduced cases written here.
"""

from __future__ import annotations

import pytest
import torch
from source_cases import check_rows, error_codes, load_source

from gradsmith.discovery import Synthesized, synthesize
from gradsmith.discovery.backward_reads import no_gradient_positions
from gradsmith.discovery.matrix_maps import flagged_maps, matrix_givers

FLAGGED = '''
import torch


class FlagMul(torch.autograd.Function):
    @staticmethod
    def forward(x, mm, bias):
        out = mm(x, transpose=True)
        if bias is not None:
            out += bias
        return out

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, mm, bias = inputs
        ctx.save_for_backward(bias)
        ctx.mm = mm

    @staticmethod
    def backward(ctx, grad_output):
        (bias,) = ctx.saved_tensors
        grad_x = grad_mm = grad_bias = None
        if ctx.needs_input_grad[0]:
            grad_x = {grad}
        if bias is not None and ctx.needs_input_grad[2]:
            grad_bias = grad_output.sum(0)
        return grad_x, grad_mm, grad_bias
'''
FLAGGED_RIGHT = "ctx.mm(grad_output, transpose=False)"
FLAGGED_WRONG = {"the map where its adjoint belongs": "ctx.mm(grad_output, transpose=True)",
                 "twice the adjoint": "2 * ctx.mm(grad_output, transpose=False)"}

THUNK = '''
import torch


class ThunkMul(torch.autograd.Function):
    @staticmethod
    def forward(x, weight_of, bias):
        out = torch.matmul(x, weight_of().t())
        if bias is not None:
            out += bias
        return out

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, weight_of, bias = inputs
        ctx.save_for_backward(bias)
        ctx.weight_of = weight_of

    @staticmethod
    def backward(ctx, grad_output):
        (bias,) = ctx.saved_tensors
        grad_x = grad_w = grad_bias = None
        if ctx.needs_input_grad[0]:
            grad_x = {grad}
        if bias is not None and ctx.needs_input_grad[2]:
            grad_bias = grad_output.sum(0)
        return grad_x, grad_w, grad_bias
'''
THUNK_RIGHT = "torch.matmul(grad_output, ctx.weight_of())"
THUNK_WRONG = {"the transposed weight": "torch.matmul(grad_output, ctx.weight_of().t())"}

LAYER = '''
import torch


class LayerMul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, layer, bias):
        w = layer.dequantize()
        out = torch.matmul(x, w.t())
        if bias is not None:
            out += bias
        ctx.save_for_backward(bias, w)
        return out

    @staticmethod
    def backward(ctx, grad_output):
        bias, w = ctx.saved_tensors
        grad_x = grad_layer = grad_bias = None
        if ctx.needs_input_grad[0]:
            grad_x = {grad}
        if bias is not None and ctx.needs_input_grad[2]:
            grad_bias = grad_output.sum(0)
        return grad_x, grad_layer, grad_bias
'''
LAYER_RIGHT = "torch.matmul(grad_output, w)"
LAYER_WRONG = {"the transposed weight": "torch.matmul(grad_output, w.t())"}

CASES = {"FlagMul": (FLAGGED, FLAGGED_RIGHT, FLAGGED_WRONG),
         "ThunkMul": (THUNK, THUNK_RIGHT, THUNK_WRONG),
         "LayerMul": (LAYER, LAYER_RIGHT, LAYER_WRONG)}
WRONG = [(name, mistake) for name, (_, _, wrong) in CASES.items() for mistake in sorted(wrong)]


def _module(tmp_path, name: str, grad: str):
    source = CASES[name][0]
    path = tmp_path / f"{name.lower()}_{abs(hash(grad)) % 10 ** 6}.py"
    path.write_text(source.format(grad=grad))
    return getattr(load_source(path, path.stem), name)


def _weight(fn, args) -> torch.Tensor:
    """The matrix ``W`` the invented argument stands for (forward is ``x @ W.T``), read off
    the identity through the stand-in alone."""
    _, stand_in, _ = args
    if fn.__name__ == "FlagMul":
        return stand_in(torch.eye(args[0].shape[-1], dtype=torch.float64), transpose=True).mT
    return stand_in() if fn.__name__ == "ThunkMul" else stand_in.dequantize()


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_weight_is_a_seeded_non_symmetric_matrix_and_backward_agrees_with_autograd(
        tmp_path, name):
    fn = _module(tmp_path, name, CASES[name][1])
    found = synthesize(fn)
    assert isinstance(found, Synthesized)
    x, stand_in, bias = found.args
    assert bias is None and not isinstance(stand_in, torch.Tensor)
    w = _weight(fn, found.args)
    assert w.shape == (x.shape[-1], x.shape[-1]) and w.dtype == x.dtype
    assert not torch.allclose(w, w.mT)  # M and M.T differ: a swapped backward is seen
    g = torch.randn(x.shape[:-1] + (w.shape[0],), dtype=torch.float64)
    (got,) = torch.autograd.grad(fn.apply(x, stand_in, None), x, g)
    y = x.detach().clone().requires_grad_()
    (want,) = torch.autograd.grad(y @ w.mT, y, g)  # autograd of the same product
    torch.testing.assert_close(got, want)


def test_the_flagged_callable_is_the_map_under_forwards_flag_and_its_adjoint_otherwise(
        tmp_path):
    fn = _module(tmp_path, "FlagMul", FLAGGED_RIGHT)
    (op,) = flagged_maps(fn, ["x", "mm", "bias"]).values()
    assert (op.flag, op.flag_map) == ("transpose", True)
    found = synthesize(fn)
    _, mm, _ = found.args
    a, b = torch.randn(2, 4, dtype=torch.float64), torch.randn(2, 4, dtype=torch.float64)
    # <A a, b> = <a, A* b>: the two flags are a map and its adjoint
    torch.testing.assert_close((mm(a, transpose=True) * b).sum(),
                               (a * mm(b, transpose=False)).sum())
    assert "transpose=True" in found.description and "adjoint" in found.description


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_right_backward_passes_where_it_was_a_false_alarm_or_a_skip(tmp_path, name):
    source, right, _ = CASES[name]
    row = check_rows(tmp_path / f"{name.lower()}_right.py", source.format(grad=right))[name]
    assert row["verdict"] == "pass", row.get("reason") or row.get("text")
    assert not error_codes(row)


@pytest.mark.parametrize(("name", "mistake"), WRONG)
def test_a_wrong_backward_still_fails(tmp_path, name, mistake):
    source, _, wrong = CASES[name]
    row = check_rows(tmp_path / f"{name.lower()}_wrong.py",
                     source.format(grad=wrong[mistake]))[name]
    assert row["verdict"] == "fail", row.get("reason")
    assert "gradient-mismatch" in error_codes(row)


def test_a_name_only_ever_none_is_a_declared_none_and_a_reassigned_one_is_not(tmp_path):
    fn = _module(tmp_path, "LayerMul", LAYER_RIGHT)
    assert no_gradient_positions(fn) == {1}  # grad_layer; grad_bias is set under a test
    source = LAYER.replace("return grad_x, grad_layer, grad_bias",
                           "grad_layer = grad_x\n        return grad_x, grad_layer, grad_bias")
    path = tmp_path / "reassigned.py"
    path.write_text(source.format(grad=LAYER_RIGHT))
    assert no_gradient_positions(load_source(path, "reassigned").LayerMul) == set()


def test_an_argument_with_a_gradient_or_used_as_a_tensor_is_not_a_weight_source(tmp_path):
    fn = _module(tmp_path, "LayerMul", LAYER_RIGHT)
    names = ["x", "layer", "bias"]
    assert set(matrix_givers(fn, names, {"layer"})) == {"layer"}
    assert matrix_givers(fn, names, set()) == {}  # backward gives it a gradient: not frozen
    source = LAYER.replace("layer.dequantize()", "layer.float()")  # a tensor's own method
    path = tmp_path / "float_method.py"
    path.write_text(source.format(grad=LAYER_RIGHT))
    assert matrix_givers(load_source(path, "float_method").LayerMul, names, {"layer"}) == {}
    source = LAYER.replace("w = layer.dequantize()", "w = layer.dequantize() + layer")
    path = tmp_path / "also_a_tensor.py"
    path.write_text(source.format(grad=LAYER_RIGHT))
    assert matrix_givers(load_source(path, "also_a_tensor").LayerMul, names, {"layer"}) == {}
