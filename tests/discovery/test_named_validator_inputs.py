"""Inputs repaired from a library validator's message that names the parameter it rejects
(issue 18, corpus 10 held-out: a signature library's Functions skipped on ``time_aug must be of
type bool, got int instead``, ``dyadic_order must be an integer or a tuple of length 2``,
``path2.shape must have length 2 or 3, got length 1 instead.``).

Reduced cases written here: a helper library checks its arguments with its own messages; the
name is followed through the calls to forward's argument. A planted wrong backward still FAILs.
"""

import torch
from torch.autograd import Function

import gradsmith
from gradsmith.discovery.repair import BUDGET, repair
from gradsmith.discovery.synthesize import Synthesized, synthesize


def _check_type(value, name, kind):
    if not isinstance(value, kind):
        raise TypeError(f"{name} must be of type {kind.__name__}, got {type(value).__name__} "
                        "instead")


class _Paths:
    def __init__(self, path, name):
        if path.dim() not in (2, 3):
            raise ValueError(f"{name}.shape must have length 2 or 3, got length {path.dim()} "
                             "instead.")
        self.path = path


def _pair(path1, path2, order, centred=False, n_jobs=1):
    """sum over points of path1 times sum over points of path2, times ``order``."""
    if not isinstance(order, int):
        raise TypeError("order must be an integer or a tuple of length 2")
    _check_type(centred, "centred", bool)
    _check_type(n_jobs, "n_jobs", int)
    a, b = _Paths(path1, "path1").path, _Paths(path2, "path2").path
    return (a.sum(-2) * b.sum(-2)).sum(-1) * order


class Pair(Function):
    @staticmethod
    def forward(ctx, path1, path2, order, n_jobs):
        ctx.save_for_backward(path1, path2)
        ctx.order = order
        return _pair(path1, path2, order, False, n_jobs)

    @staticmethod
    def backward(ctx, g):
        path1, path2 = ctx.saved_tensors
        g = g[..., None, None] * ctx.order
        return (g * path2.sum(-2, keepdim=True)).expand_as(path1), \
            (g * path1.sum(-2, keepdim=True)).expand_as(path2), None, None


class PairWrong(Pair):
    """Planted: the gradient for ``path2`` forgets ``order``."""

    @staticmethod
    def backward(ctx, g):
        path1, path2 = ctx.saved_tensors
        g2 = g[..., None, None]
        g = g2 * ctx.order
        return (g * path2.sum(-2, keepdim=True)).expand_as(path1), \
            (g2 * path1.sum(-2, keepdim=True)).expand_as(path2), None, None


class Shifted(Function):
    """Passes its ``n_jobs`` where the helper's ``centred`` stands: an int always raises."""

    @staticmethod
    def forward(ctx, path1, path2, order, n_jobs):
        ctx.save_for_backward(path1, path2)
        ctx.order = order
        return _pair(path1, path2, order, n_jobs)

    backward = Pair.backward


class _Flat:
    """A helper's handler: checks a flat vector's length against one computed from ``size``."""

    def __init__(self, vec, size, name):
        self.vec = vec
        length = self.vec.shape[-1]
        if length != size * (size + 1):
            raise ValueError(f"{name} is of incorrect length. Expected {size * (size + 1)}, got "
                             f"{length}")


def _outer(a, b, size):
    _check_type(size, "size", int)
    _Flat(a, size, "a")
    return a * b


class Product(Function):
    """x * y, where ``x`` (by a length no layout has) must be ``size * (size + 1)`` long."""

    @staticmethod
    def forward(ctx, x, y, size):
        ctx.save_for_backward(x, y)
        return _outer(x, y, size)

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        return g * y, g * x, None


class ProductWrong(Product):
    """Planted: the gradient for ``y`` is ``g * y``."""

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        return g * y, g * y, None


def _both_ranks(path1, path2):
    if path1.dim() != 3 or path2.dim() != 3:
        raise ValueError("path1 and path2 must be 3D arrays.")
    return path1


def _same_ranks(path1, path2):
    if path1.dim() != path2.dim():
        raise ValueError("path1, path2 must all be 2d arrays or all 3d arrays")
    return path1


def _x(*shape):
    return torch.randn(*shape, dtype=torch.float64, requires_grad=True)


def _repaired(call, *args):
    found = repair(call, lambda: (list(args), [f"{n}: given" for n in "abcd"[:len(args)]]), 0,
                   [BUDGET])
    assert found is not None
    return found


def test_the_named_argument_gets_the_type_and_rank_its_validator_states():
    found = _repaired(Pair.apply, _x(3, 4), _x(4), 0.5, 1)
    path1, path2, order, n_jobs = found.args
    assert type(order) is int and path2.dim() == 2 and path1.shape == (3, 4) and n_jobs == 1
    assert "order must be an integer" in found.parts[2]
    assert "path2.shape must have length 2 or 3" in found.parts[1]
    expected = (path1.sum(-2) * path2.sum(-2)).sum(-1) * order  # the reference
    torch.testing.assert_close(Pair.apply(*found.args), expected)


def test_a_name_passed_positionally_is_followed_to_forwards_argument():
    found = _repaired(Shifted.apply, _x(3, 4), _x(3, 4), 2, 1)
    assert found.args[3] is False  # n_jobs, which forward passes as the helper's `centred`
    assert "centred must be of type bool, got int" in found.parts[3]
    assert "forward passes n_jobs where centred, a bool, stands" in found.parts[3]


def test_a_name_no_call_binds_to_an_argument_changes_nothing():
    def unrelated(x, k):
        _check_type(object(), "flag", bool)  # not one of the arguments

    assert repair(unrelated, lambda: ([_x(3), 2], ["x", "k"]), 0, [BUDGET]) is None


def test_end_to_end_a_correct_function_passes_and_its_planted_twin_fails():
    found = synthesize(Pair)
    assert isinstance(found, Synthesized), found
    assert gradsmith.check(Pair, *found.args).passed
    wrong = synthesize(PairWrong)
    assert isinstance(wrong, Synthesized), wrong
    report = gradsmith.check(PairWrong, *wrong.args)
    assert "gradient-mismatch" in report.codes("error"), report


def test_the_tensor_whose_length_the_raise_site_compares_gets_the_expected_length():
    found = _repaired(Product.apply, _x(3, 4), _x(3, 4), 2)
    x, y, size = found.args
    assert x.shape == (3, 6) and y.shape == (3, 6)  # y follows from the broadcast x * y
    assert "a is of incorrect length. Expected 6, got 4" in found.parts[0]
    torch.testing.assert_close(Product.apply(x, y, size), x * y)


def test_a_length_no_line_reads_from_an_argument_changes_nothing():
    def opaque(x):
        raise ValueError("bad input. Expected 6, got 4")

    assert repair(opaque, lambda: ([_x(3, 4)], ["x"]), 0, [BUDGET]) is None


def test_tensors_named_together_get_one_rank_the_message_allows():
    found = _repaired(_both_ranks, _x(3, 4), _x(2, 3, 4))
    assert found.args[0].dim() == 3 and found.args[1].shape == (2, 3, 4)
    found = _repaired(_same_ranks, _x(3, 4), _x(2, 3, 4))
    assert found.args[0].dim() == found.args[1].dim()


def test_end_to_end_a_length_checked_function_passes_and_its_planted_twin_fails():
    found = synthesize(Product)
    assert isinstance(found, Synthesized), found
    assert gradsmith.check(Product, *found.args).passed
    wrong = synthesize(ProductWrong)
    assert isinstance(wrong, Synthesized), wrong
    assert "gradient-mismatch" in gradsmith.check(ProductWrong, *wrong.args).codes("error")


class Grid(Function):
    """``_pair`` with an option: ``keep`` also saves the per-point products (same result)."""

    @staticmethod
    def forward(ctx, path1, path2, order, keep):
        ctx.save_for_backward(path1, path2)
        ctx.order = order
        ctx.keep = keep
        out = _pair(path1, path2, order)
        if keep:
            ctx.grid = path1.detach()[..., :, None, :] * path2.detach()[..., None, :, :]
        return out

    @staticmethod
    def backward(ctx, g):
        if ctx.keep and ctx.grid.dim() not in (3, 4):
            raise ValueError("grid.shape must have length 3 or 4")
        return Pair.backward(ctx, g)[:2] + (None, None)


class GridWrong(Grid):
    """Planted, as in the corpus: with ``keep`` forward returns a slice of the grid."""

    @staticmethod
    def forward(ctx, path1, path2, order, keep):
        ctx.save_for_backward(path1, path2)
        ctx.order = order
        ctx.keep = keep
        out = _pair(path1, path2, order)
        if keep:
            ctx.grid = path1.detach()[..., :, None, :] * path2.detach()[..., None, :, :]
            out = ctx.grid.sum(-1)[..., -1, :]
        return out


def test_repaired_inputs_come_with_each_flag_flipped():
    found = synthesize(Grid)
    assert isinstance(found, Synthesized), found
    assert [v.change for v in found.variants] == ["keep=True"]
    path1, path2, order, _ = found.variants[0].args
    torch.testing.assert_close(Grid.apply(path1, path2, order, True),
                               (path1.sum(-2) * path2.sum(-2)).sum(-1) * order)
    for args in (found.args, found.variants[0].args):
        assert gradsmith.check(Grid, *args).passed


def test_a_defect_only_a_flag_shows_fails():
    found = synthesize(GridWrong)
    assert isinstance(found, Synthesized), found
    assert gradsmith.check(GridWrong, *found.args).passed  # the default hides it
    assert [v.change for v in found.variants] == ["keep=True"]
    report = gradsmith.check(GridWrong, *found.variants[0].args)
    assert not report.passed and report.codes("error"), report
