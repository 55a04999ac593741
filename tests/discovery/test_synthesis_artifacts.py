"""Zero-config inputs that made errors the code never meets with real inputs (issue 18, the
held-out reading's synthesis artifacts). Reduced cases, written here:

- a flag kept on ctx and tested in backward (``if ctx.accumulate:``) was a float tensor, so
  backward raised "Boolean value of Tensor with more than one value is ambiguous";
- a forward that unpacks ``n, t, c, h, w = x.size()`` got no inputs (every layout 2-D or 4-D).
"""

import pytest
import torch
from torch.autograd import Function

import gradsmith
from gradsmith.discovery.flags import truth_tested
from gradsmith.discovery.synthesize import Synthesized, synthesize


class Accumulating(Function):
    """x * w; the flag only says which branch of backward runs (both right here)."""

    @staticmethod
    def forward(ctx, x, w, accumulate):
        ctx.save_for_backward(x, w)
        ctx.accumulate = accumulate
        return x * w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        if ctx.accumulate:
            return (g * w).clone(), (g * x).clone(), None
        return g * w, g * x, None


class AccumulatingWrong(Function):
    """The same, with w's gradient doubled when the flag is set (a defect only True shows)."""

    @staticmethod
    def forward(ctx, x, w, accumulate):
        ctx.save_for_backward(x, w)
        ctx.accumulate = accumulate
        return x * w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        accumulate = ctx.accumulate
        if accumulate:
            return g * w, 2 * g * x, None
        return g * w, g * x, None


class TemporalShift(Function):
    """Shift the first ``fold`` channels one step back in time: (n, t, c, h, w) video."""

    @staticmethod
    def forward(ctx, x, fold):
        n, t, c, h, w = x.size()
        ctx.fold = fold
        out = x.clone()
        out[:, :-1, :fold] = x[:, 1:, :fold]
        out[:, -1, :fold] = 0
        return out

    @staticmethod
    def backward(ctx, g):
        fold = ctx.fold
        gx = g.clone()
        gx[:, 1:, :fold] = g[:, :-1, :fold]
        gx[:, 0, :fold] = 0
        return gx, None


def _shift_reference(x, fold):
    """The same shift from differentiable torch ops (cat of slices), for autograd."""
    moved = torch.cat([x[:, 1:, :fold], torch.zeros_like(x[:, :1, :fold])], 1)
    return torch.cat([moved, x[:, :, fold:]], 2)


def _found(fn) -> Synthesized:
    found = synthesize(fn)
    assert isinstance(found, Synthesized), found
    return found


def test_a_flag_tested_in_backward_is_a_bool_tried_both_ways_and_a_correct_function_passes():
    found = _found(Accumulating)
    x, w, accumulate = found.args
    assert accumulate is False
    (other,) = [v for v in found.variants if v.change == "accumulate=True"]
    assert other.args[2] is True
    for args in (found.args, other.args):
        got = torch.autograd.grad(Accumulating.apply(*args).sum(), args[:2])
        reference = torch.autograd.grad((args[0] * args[1]).sum(), args[:2])
        torch.testing.assert_close(got, reference)
        report = gradsmith.check(Accumulating, *args)
        assert report.passed, report
        assert "backward-error" not in {f.code for f in report.findings}


def test_a_defect_only_the_other_flag_value_shows_is_caught_on_the_variant():
    found = _found(AccumulatingWrong)
    (other,) = [v for v in found.variants if v.change == "accumulate=True"]
    x, w, _ = other.args
    _, got = torch.autograd.grad(AccumulatingWrong.apply(*other.args).sum(), (x, w))
    _, reference = torch.autograd.grad((x * w).sum(), (x, w))
    assert not torch.allclose(got, reference)
    assert gradsmith.check(AccumulatingWrong, *found.args).passed  # False: right
    report = gradsmith.check(AccumulatingWrong, *other.args)
    assert "gradient-mismatch" in report.codes("error")


def test_only_an_argument_every_use_of_which_is_a_truth_test_is_a_flag():
    class Mixed(Function):
        @staticmethod
        def forward(ctx, x, gate, hard, scale):
            ctx.hard = hard
            ctx.scale = scale
            y = x * gate if gate is not None and not hard else x
            return y * scale if scale else y

        @staticmethod
        def backward(ctx, g):
            return g, None, None, None

    # gate is multiplied, scale too: values, not flags; hard is only tested
    assert truth_tested(Mixed, ["x", "gate", "hard", "scale"]) == {"hard"}
    found = _found(Mixed)
    assert found.args[2] is False and isinstance(found.args[3], float)
    assert "hard=True" in [v.change for v in found.variants]


def test_a_five_dimensional_unpack_gets_a_five_dimensional_input_and_a_correct_shift_passes():
    found = _found(TemporalShift)
    x, fold = found.args
    assert x.dim() == 5 and isinstance(fold, int) and 0 < fold <= x.shape[2]
    g = torch.randn_like(x)
    (got,) = torch.autograd.grad(TemporalShift.apply(x, fold), x, g)
    (reference,) = torch.autograd.grad(_shift_reference(x, fold), x, g)
    torch.testing.assert_close(TemporalShift.apply(x, fold), _shift_reference(x, fold))
    torch.testing.assert_close(got, reference)
    report = gradsmith.check(TemporalShift, *found.args)
    assert report.passed, report


def test_a_starred_unpack_asks_for_at_least_the_named_dimensions():
    class Channels(Function):
        @staticmethod
        def forward(ctx, x):
            n, t, c, h, w, *rest = x.shape
            return x * c

        @staticmethod
        def backward(ctx, g):
            return g * g.shape[2]  # c

    x, = _found(Channels).args
    assert x.dim() >= 5


def test_a_float32_only_forward_whose_backward_raises_on_a_guess_says_why_in_words():
    class Float32Lookup(Function):
        @staticmethod
        def forward(ctx, x, table):
            assert x.dtype == torch.float32  # every float64 layout fails: float32 is tried
            ctx.table = table
            return x * 2

        @staticmethod
        def backward(ctx, g):  # a list of mappings? nothing the code says (a plain
            return g * 2 * ctx.table[0]["unit"], None  # mapping is read, see keyed.py)

    found = _found(Float32Lookup)
    assert found.args[0].dtype == torch.float32
    # the reason a row is skipped for, with the decorator to register: not backward's raw error
    assert found.doubt.startswith("no registered example and the synthesised inputs are not")
    assert "what table is" in found.doubt and "@gradsmith.example" in found.doubt
    with pytest.raises((TypeError, IndexError)):  # by hand, the same inputs
        Float32Lookup.apply(*found.args).sum().backward()
