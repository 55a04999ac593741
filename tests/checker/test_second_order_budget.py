"""Second order's cost bounded by the Function's measured cost (issue 18, task m): a Function
whose one evaluation of backward-with-graph is slow (a semi-Markov CRF scan, 200 Sinkhorn
iterations) spent 50 s comparing second order element by element and the row timed out.
Where the screen does not pass and the element-wise comparison would exceed the budget,
every input is probed along random directions instead, and the report says so. Reduced cases
written here; slowness is simulated by a zero budget (the decision), and the measurement is
tested on its own with a forward that sleeps."""

from __future__ import annotations

import time

import torch

import gradsmith
from gradsmith.checker import costly, numerics


class DetachedCube(torch.autograd.Function):
    """x ** 3 whose backward detaches one factor: first order right, its derivative in x is
    3 x g instead of 6 x g (a planted wrong double backward)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x * x.detach()


class Cube(DetachedCube):
    """The same with a differentiable backward: second order right."""

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x * x


class DetachedProduct(torch.autograd.Function):
    """x * y ** 2 whose backward for x detaches y: wrong derivative of grad_x in y."""

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x * y ** 2

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        return g * y.detach() ** 2, g * 2 * x * y


def _x(*shape):
    return torch.rand(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(0)) + 0.5


def _second_order(report):
    return {f.code: f for f in report.findings if f.check == "second_order"}


def test_a_cheap_function_is_compared_element_by_element_as_before():
    found = _second_order(gradsmith.check(DetachedCube, _x(8, 8)))
    assert "second-order-probed" not in found
    assert found["double-backward-unsupported"].details["partial"] == ["x"]


def test_a_slow_wrong_double_backward_is_still_found_by_probes(monkeypatch):
    calls = [0]
    real = numerics.judge_element

    def counted(*args, **kwargs):
        calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(costly, "BUDGET_S", 0.0)
    monkeypatch.setattr(numerics, "judge_element", counted)
    report = gradsmith.check(DetachedCube, _x(8, 8))
    found = _second_order(report)
    # the same warning as element by element (test above), said to come from probes
    assert found["double-backward-unsupported"].details["partial"] == ["x"]
    probed = found["second-order-probed"]
    assert probed.severity == "info" and probed.details["elements"] == 128  # x and grad_out
    # x disagreed; the incoming gradient's input is left out, and said
    assert probed.details["not_compared"] == ["grad_out"] and "grad_out" in probed.message
    assert calls[0] <= costly.ENOUGH  # re-judging stops once the mismatch is demonstrated


def test_inputs_left_out_after_a_disagreement_are_named(monkeypatch):
    monkeypatch.setattr(costly, "BUDGET_S", 0.0)
    found = _second_order(gradsmith.check(DetachedProduct, _x(3, 4), _x(3, 4) + 1))
    assert "double-backward-unsupported" in found  # never a verified second order
    rest = found["second-order-probed"].details.get("not_compared", [])
    assert rest and all(label in found["second-order-probed"].message for label in rest)


def test_a_slow_right_double_backward_passes_with_nothing_to_say(monkeypatch):
    monkeypatch.setattr(costly, "BUDGET_S", 0.0)
    report = gradsmith.check(Cube, _x(8, 8))
    assert report.passed and not _second_order(report), str(report)
    assert "second_order" in report.checks


class _Sleeping:
    """A problem whose one evaluation takes ``seconds``."""

    xs = [torch.zeros(3)]

    def __init__(self, seconds):
        self.seconds = seconds

    def value(self):
        time.sleep(self.seconds)
        return torch.zeros(3)


def test_the_budget_follows_the_measured_evaluation():
    slow = costly.over_budget(_Sleeping(0.01), 500)
    assert slow is not None and slow["per_evaluation_s"] >= 0.01
    assert slow["estimated_s"] >= 0.01 * 2 * 500
    assert costly.over_budget(_Sleeping(0.0), 10) is None
