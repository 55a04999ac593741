"""What a modern-style Function's ``setup_context(ctx, inputs, output)`` keeps on ctx by
position (``ctx.phase = inputs[0]``, ``flag, fn = inputs[:2]``) is read as the parameter at
that position (issue 18, held-out AutogramNode: a flag kept this way was a float tensor, and
backward's ``if ctx.phase:`` raised, so the row was a skip). Reduced cases, written here."""

import torch
from torch.autograd import Function

import gradsmith
from gradsmith.discovery.synthesize import Synthesized, synthesize


def _node(wrong_in_phase: bool):
    class Node(Function):
        """Identity on its tensors; in the accumulation phase backward also calls a callback
        (whose result it keeps aside) and, when ``wrong_in_phase``, doubles the gradient."""

        @staticmethod
        def forward(phase, callback, x):
            return x.detach().clone()

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.phase = inputs[0]
            _, fn, _ = inputs
            ctx.callback = fn

        @staticmethod
        def backward(ctx, g):
            if ctx.phase:
                ctx.kept = ctx.callback(g)
                return None, None, g * (2 if wrong_in_phase else 1)
            return None, None, g

    return Node


def _found(fn) -> Synthesized:
    found = synthesize(fn)
    assert isinstance(found, Synthesized), found
    assert not found.doubt, found.doubt
    return found


def test_a_flag_kept_by_position_in_setup_context_is_a_bool_and_a_correct_node_passes():
    right = _node(wrong_in_phase=False)
    found = _found(right)
    phase, callback, x = found.args
    assert phase is False and callable(callback)
    (other,) = [v for v in found.variants if v.change == "phase=True"]
    for args in (found.args, other.args):
        g = torch.randn_like(x)
        (got,) = torch.autograd.grad(right.apply(*args), args[2], g)
        torch.testing.assert_close(got, g)  # identity: the upstream gradient
        report = gradsmith.check(right, *args)
        assert report.passed, report


def test_a_defect_of_the_accumulation_phase_is_caught_on_its_variant():
    wrong = _node(wrong_in_phase=True)
    found = _found(wrong)
    (other,) = [v for v in found.variants if v.change == "phase=True"]
    assert gradsmith.check(wrong, *found.args).passed
    report = gradsmith.check(wrong, *other.args)
    assert not report.passed
    # twice the upstream gradient: a wrong one, or a gradient scaling left undeclared
    assert report.codes("error") & {"gradient-mismatch", "undeclared-estimator"}
