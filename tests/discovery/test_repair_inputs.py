"""Inputs repaired from forward's own error (issue 18, "Inputs from what the code means": 27 of 58
held-out Functions skipped, many with a message that says what was wrong with the inputs).

Reduced cases written here, one per message kind: forward raises on the synthesised arguments,
the repair changes what the message names, and forward runs. End to end, a correct Function
no layout fitted now gets inputs and PASSes, and its planted-wrong twin FAILs.
"""

import importlib

import pytest
import torch
from torch.autograd import Function

import gradsmith
from gradsmith.discovery.repair import BUDGET, repair
from gradsmith.discovery.synthesize import Synthesized, synthesize


def _repaired(forward, *args):
    """Repair ``args`` (named a, b, ...) for ``forward``; the repaired args and descriptions."""
    names = "abcdef"

    def build():
        fresh = [a.clone().requires_grad_() if isinstance(a, torch.Tensor) else a for a in args]
        return fresh, [f"{names[i]}: given" for i in range(len(args))]

    found = repair(forward, build, 0, [BUDGET])
    assert found is not None
    forward(*found.args)  # runs
    return found.args, found.parts


def _x(*shape):
    return torch.randn(*shape, dtype=torch.float64)


def test_a_per_channel_parameter_gets_the_size_the_mismatch_names():
    def per_channel(x, gain):
        return x * gain.view(1, -1)

    (x, gain), parts = _repaired(per_channel, _x(3, 8), _x(3))
    assert x.shape == (3, 8) and gain.shape == (8,)  # the input is left as it was
    assert "The size of tensor a (8) must match the size of tensor b (3)" in parts[1]


def test_a_number_forward_uses_as_a_tensor_becomes_one():
    def like(x, m):
        return x + torch.zeros_like(m)

    def shaped(x, w):
        return x * w.shape[-1]

    (_, m), parts = _repaired(like, _x(3, 4), 0.1)
    assert isinstance(m, torch.Tensor) and m.shape == (3, 4) and m.requires_grad
    assert "must be Tensor, not float" in parts[1]
    (_, w), parts = _repaired(shaped, _x(3, 4), 0.1)
    assert isinstance(w, torch.Tensor)
    assert "'float' object has no attribute 'shape'" in parts[1]


def test_an_expanded_tensor_gets_the_target_size():
    def rotations(x):
        return x.expand(3, 4, 4) @ torch.eye(4, dtype=x.dtype)

    (x,), parts = _repaired(rotations, _x(3, 8))
    assert x.shape == (3, 4, 4) and "expanded size of the tensor (4)" in parts[0]


def test_matrix_operands_get_the_inner_size_the_message_names():
    (x, w), parts = _repaired(lambda x, w: x @ w, _x(4, 8), _x(3, 5))
    assert x.shape == (4, 8) and w.shape == (8, 5)
    assert "mat1 and mat2 shapes cannot be multiplied (4x8 and 3x5)" in parts[1]
    (x, v), _ = _repaired(lambda x, v: torch.mv(x, v), _x(3, 4), _x(3))
    assert v.shape == (4,)


def test_a_view_gets_a_size_it_divides():
    (x,), parts = _repaired(lambda x: x.view(-1, 16), _x(3, 8))
    assert x.numel() % 16 == 0 and x.shape[0] == 3
    assert "shape '[-1, 16]' is invalid for input of size 24" in parts[0]


def _images(x):
    b, c, h, w = x.shape
    return x * h


def _batch_norm_like(x):
    if x.dim() != 4:
        raise ValueError(f"expected 4D input (got {x.dim()}D input)")
    return x - x.mean((0, 2, 3), keepdim=True)


@pytest.mark.parametrize(("forward", "ndim", "message"), [
    (lambda x: x.sum(2), 3, "Dimension out of range"),
    (_images, 4, "not enough values to unpack (expected 4, got 2)"),
    (lambda x: torch.nn.functional.conv2d(x, torch.ones(2, 2, 1, 1, dtype=x.dtype)), 4,
     "Expected 3D (unbatched) or 4D (batched) input"),
    (_batch_norm_like, 4, "expected 4D input (got 2D input)"),
    (lambda x: torch.nn.functional.max_pool2d(x, 1), 4, "3D or 4D (batch mode) tensor expected"),
    (lambda x: x[:, :, 0], 3, "too many indices for tensor of dimension 2"),
    (lambda x: x.permute(2, 0, 1), 3, "number of dimensions in the tensor input does not"),
])
def test_a_tensor_gets_the_number_of_dimensions_forward_wants(forward, ndim, message):
    (x,), parts = _repaired(forward, _x(3, 4))
    assert x.dim() == ndim and x.shape[-2:] == (3, 4)  # leading dimensions added
    assert message in parts[0]


def test_too_many_values_to_unpack_removes_leading_dimensions():
    def rows(x):
        n, d = x.shape
        return x * n

    (x,), parts = _repaired(rows, _x(2, 3, 4))
    assert x.shape == (3, 4)
    assert "too many values to unpack" in parts[0]


def test_integers_bools_and_index_tensors_where_forward_wants_them():
    (_, n), parts = _repaired(lambda x, n: x[:n], _x(3, 4), _x(3, 4))
    assert n == 2 and "only integer tensors of a single element" in parts[1]
    (_, n), _ = _repaired(lambda x, n: torch.stack([x] * len(range(n))), _x(3, 4), 0.1)
    assert type(n) is int
    (_, idx), parts = _repaired(lambda x, idx: x[idx], _x(3, 4), _x(3))
    assert idx.dtype == torch.int64 and idx.max() < 3 and "must be long" in parts[1]
    (_, _, upper), _ = _repaired(
        lambda a, b, upper: torch.linalg.solve_triangular(a.triu() + 4 * torch.eye(3), b,
                                                          upper=upper), _x(3, 3), _x(3, 2), 0.1)
    assert upper is False or upper is True


def test_a_number_forward_unpacks_as_keyword_arguments_becomes_a_mapping():
    def blocks(x, scale, kwargs):
        return torch.nn.functional.softplus(x, **kwargs) * scale

    (_, scale, kwargs), parts = _repaired(blocks, _x(3, 4), 0.1, 0.1)
    assert kwargs == {} and scale == 0.1 and "must be a mapping, not float" in parts[2]


def test_a_tensor_forward_uses_as_a_condition_becomes_a_boolean_mask():
    (_, mask), parts = _repaired(lambda x, mask: torch.where(mask, x, 0.0), _x(3, 4), _x(3, 4))
    assert mask.dtype == torch.bool and mask.shape == (3, 4)
    assert "expected condition to be a boolean tensor" in parts[1]


def _moded(x, mode):
    if mode == 0:
        return x * 2
    if mode == 1:
        return x * 3
    raise ValueError(f"unknown mode {mode}")


def test_a_tensor_forward_reads_as_one_number_becomes_0_d():
    (_, t), parts = _repaired(lambda x, t: x * float(t), _x(3, 4), _x(3, 4))
    assert t.dim() == 0 and "only one element tensors" in parts[1]
    (_, mode), parts = _repaired(_moded, _x(3, 4), _x(3, 4))
    assert mode == 0 and "the integer it is compared with" in parts[1]


def _nufft_like(points, values, output_shape):
    if not values.is_complex():
        raise TypeError("Values must have a dtype of torch.complex64 or torch.complex128")
    if not isinstance(output_shape, tuple) or len(output_shape) != points.shape[0]:
        raise ValueError(f"output_shape must be a tuple of length {points.shape[0]}")
    return values * points.sum()  # complex: forward runs, the probe accepts it


def test_complex_values_and_a_size_per_dimension():
    (_, values, shape), parts = _repaired(_nufft_like, _x(3, 4), _x(3, 4), 2)
    assert values.dtype == torch.complex128 and shape == (2, 2, 2)
    assert "dtype of torch.complex64" in parts[1] and "tuple of length 3" in parts[2]


def test_numbers_used_as_matrices_or_sequences_become_tensors():
    (_, a), _ = _repaired(lambda x, a: a @ x, _x(3, 4), 0.1)
    assert isinstance(a, torch.Tensor)
    (_, xs), parts = _repaired(lambda x, xs: x * len(xs), _x(3, 4), 0.1)
    assert isinstance(xs, torch.Tensor) and "has no len()" in parts[1]


def test_each_number_forward_uses_as_a_tensor_in_turn():
    def two(x, a, b):  # the same message twice, on two lines: the second is a step forward
        za = torch.zeros_like(a)
        zb = torch.zeros_like(b)
        return x + za + zb

    (_, a, b), parts = _repaired(two, _x(3, 4), 0.1, 0.1)
    assert isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)


class SavesItsFlag(Function):
    @staticmethod
    def forward(ctx, x, clip):
        ctx.save_for_backward(x, clip)
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return 2 * g, None


def test_a_flag_autograd_must_save_becomes_a_tensor():
    (_, clip), parts = _repaired(SavesItsFlag.apply, _x(3, 4), True)
    assert isinstance(clip, torch.Tensor) and clip.item() is True
    assert "save_for_backward can only save variables" in parts[1]


def test_repair_spends_at_most_its_budget_of_probes():
    calls = []

    def never(x):  # always a new message that names a fix: the repair keeps following it
        calls.append(1)
        raise RuntimeError(f"shape '[-1, {3 * len(calls) + 16}]' is invalid for input of size "
                           f"{x.numel()}")

    assert repair(never, lambda: ([_x(3, 8)], ["x: given"]), 0, [BUDGET]) is None
    assert len(calls) == BUDGET


class Patches(Function):
    """Rows of 12-value patches projected by ``w``: forward flattens ``x`` to (-1, 12) first,
    a size no synthesised layout has (every layout fails: before, a skip)."""

    @staticmethod
    def forward(ctx, x, w):
        flat = x.reshape(-1, 12)
        ctx.save_for_backward(flat, w)
        ctx.shape = x.shape
        return flat @ w

    @staticmethod
    def backward(ctx, g):
        flat, w = ctx.saved_tensors
        return (g @ w.T).reshape(ctx.shape), flat.T @ g


class PatchesWrongWeight(Patches):
    """The same, with a planted wrong gradient for ``w`` (the gradient of ``flat @ w.T``'s
    pattern, written for square weights only: 2x too large here)."""

    @staticmethod
    def backward(ctx, g):
        flat, w = ctx.saved_tensors
        return (g @ w.T).reshape(ctx.shape), 2 * flat.T @ g


def test_a_function_no_layout_fitted_gets_repaired_inputs_and_passes():
    found = synthesize(Patches)
    assert isinstance(found, Synthesized), found
    x, w = found.args
    assert x.shape[-1] == 12 and w.shape[0] == 12
    assert "(repaired: forward raised RuntimeError: mat1 and mat2 shapes cannot be " \
           "multiplied" in found.description
    torch.testing.assert_close(Patches.apply(x, w), x.reshape(-1, 12) @ w)  # the reference
    report = gradsmith.check(Patches, *found.args)
    assert report.passed, report


def test_its_planted_wrong_twin_fails():
    found = synthesize(PatchesWrongWeight)
    assert isinstance(found, Synthesized), found
    report = gradsmith.check(PatchesWrongWeight, *found.args)
    assert "gradient-mismatch" in report.codes("error"), report


class PatchesPerChannelOnly(Patches):
    """Backward written for a contract the repair cannot know (raises on these inputs)."""

    @staticmethod
    def backward(ctx, g):
        raise RuntimeError("shape '[4]' is invalid for input of size 12")


def test_a_backward_error_on_repaired_inputs_is_not_shown_to_be_the_functions():
    found = synthesize(PatchesPerChannelOnly)
    assert isinstance(found, Synthesized), found
    assert "forward ran only on inputs repaired from its own errors (w)" in found.doubt
    assert "shape '[4]' is invalid" in found.doubt  # the row is a skip with this reason
    # The check itself still reports what backward did: only the row's verdict follows doubt.
    report = gradsmith.check(PatchesPerChannelOnly, *found.args)
    assert report.codes("error") == {"backward-error"}, report


def test_a_function_whose_first_layout_runs_never_reaches_the_repair(monkeypatch):
    def untouchable(*args, **kwargs):
        raise AssertionError("repair ran for a Function whose first layout runs")

    monkeypatch.setattr(importlib.import_module("gradsmith.discovery.synthesize"), "repair_plans",
                        untouchable)
    found = synthesize(lambda x, w: x * w)
    assert found.description == "x: float64 (3, 4), w: float64 (3, 4)"
