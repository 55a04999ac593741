"""A further input set does not explain again what an earlier set already reported (issue 18,
the eager verdict's time): the merge keeps only its new (code, input) pairs, so the estimator
declaration fitted for an already-reported ``undeclared-estimator`` (a third of corpus 3's
eager seconds) and the Jacobian block of an already-reported ``gradient-mismatch`` were
computed and thrown away. Reduced cases written here; the reference is the same merge with
the skip switched off (every set explained in full), which must give the same report."""

from __future__ import annotations

import pytest
import torch

from gradsmith.checker import gradients, reported, suggest
from gradsmith.checkrun.sets import check_sets


class RoundSTE(torch.autograd.Function):
    """round(x) with a straight-through backward: an undeclared estimator on every set."""

    @staticmethod
    def forward(ctx, x):
        return torch.round(x)

    @staticmethod
    def backward(ctx, g):
        return g


class WrongAboveTwo(torch.autograd.Function):
    """x ** 3 whose backward is 3 x^2 except above 2, where it is 3.3 x^2: a bug only large
    inputs show (the first set is below 1)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x ** 2 * torch.where(x > 2, 1.1, 1.0)


class OffByTenPercent(torch.autograd.Function):
    """x ** 3 with backward 3.3 x^2 everywhere: the same mismatch on every set."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3.3 * x ** 2


def _sets(*scales: float) -> list[tuple[str, tuple]]:
    gen = torch.Generator().manual_seed(0)
    base = torch.rand(3, 4, dtype=torch.float64, generator=gen) * 0.8 + 0.1
    return [(f"x * {s}", (base * s,)) for s in scales]


def _merged(cls: type, sets: list) -> object:
    report, *_ = check_sets(cls, cls.__name__, None, {"compat": False}, sets[0][0], sets,
                            synthesised=False)
    return report


def _said(report) -> list[tuple]:
    return [(f.code, f.severity, f.input, f.message, f.hint, f.details.get("declaration"))
            for f in report.findings]


def _counting(monkeypatch, module, name: str) -> list[int]:
    calls = [0]
    real = getattr(module, name)

    def counted(*args, **kwargs):
        calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def _in_full(monkeypatch) -> None:
    """The reference: every set explained as if it were the first."""
    monkeypatch.setattr(reported, "known", lambda code, label: False)


@pytest.mark.parametrize("skip", [True, False], ids=["skip", "in-full"])
def test_an_estimator_already_reported_gets_its_declaration_fitted_once(monkeypatch, skip):
    if not skip:
        _in_full(monkeypatch)
    calls = _counting(monkeypatch, suggest, "declaration")
    report = _merged(RoundSTE, _sets(1.0, 3.0, 7.0))
    assert report.codes("error") == {"undeclared-estimator"}
    # three sets, each an undeclared estimator on x: fitted on the first only
    assert calls[0] == (1 if skip else 3)


def test_skipping_the_repeated_explanations_changes_nothing_reported(monkeypatch):
    for cls in (RoundSTE, OffByTenPercent):
        sets = _sets(1.0, 3.0, 7.0)
        skipped = _said(_merged(cls, sets))
        with monkeypatch.context() as m:
            _in_full(m)
            full = _said(_merged(cls, sets))
        assert skipped == full
        assert skipped  # the comparison is not vacuous: each has an error to say


def test_a_mismatch_already_reported_gets_no_second_jacobian_block(monkeypatch):
    calls = _counting(monkeypatch, gradients, "_block")
    report = _merged(OffByTenPercent, _sets(1.0, 3.0))
    assert "gradient-mismatch" in report.codes("error")
    assert calls[0] == 1
    assert "Jacobian entry" in next(f.message for f in report.findings
                                    if f.code == "gradient-mismatch")


def test_what_only_a_further_set_finds_is_still_explained(monkeypatch):
    calls = _counting(monkeypatch, gradients, "_block")
    report = _merged(WrongAboveTwo, _sets(1.0, 3.0))
    found = [f for f in report.findings if f.code == "gradient-mismatch"]
    assert len(found) == 1 and found[0].details.get("input_set") == 1
    # explained in full: the heatmap block and the worst Jacobian entry, whose analytic
    # value is 1.1 times the numerical one (3.3 x^2 against 3 x^2)
    assert calls[0] == 1 and "Jacobian entry" in found[0].message
    worst = max(found[0].details["elements"], key=lambda e: abs(e[1] - e[2]))
    assert worst[1] == pytest.approx(1.1 * worst[2], rel=1e-4)


class DetachedCube(torch.autograd.Function):
    """x ** 3 whose backward detaches one factor x: first order right, double backward 3 x g
    in x instead of 6 x g (autograd sees part of it: one double-backward-unsupported
    warning naming x as partial)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x * x.detach()


def test_a_second_order_warning_already_reported_is_not_re_judged(monkeypatch):
    from gradsmith.checker import numerics

    sets = _sets(1.0, 3.0, 7.0)
    with monkeypatch.context() as m:
        _in_full(m)
        in_full = _counting(m, numerics, "judge_element")
        full = _merged(DetachedCube, sets)
    calls = _counting(monkeypatch, numerics, "judge_element")
    skipped = _merged(DetachedCube, sets)
    (f,) = [f for f in skipped.findings if f.code == "double-backward-unsupported"]
    assert f.details["partial"] == ["x"] and not skipped.codes("error")
    assert _said(skipped) == _said(full)
    # the elements of x disagree on each set: re-judged on the first set only (as many as
    # second order re-judges, gradients.SECOND_ORDER_ENOUGH)
    assert in_full[0] == 3 * calls[0] and calls[0] >= 8
