"""The compile check pays for each Dynamo trace once (issue 18: the verdict under 0.5 s per
Function) and still reports what it reported before.

A Function with graph breaks used to be traced three times: the ``fullgraph=True`` attempt,
``torch._dynamo.explain`` to list the further breaks, and a compile with breaks allowed to
compare its results with eager. The breaks are now recorded by that last compile itself, so
the Function is traced twice; every break is still named with its line and reason, and a
difference that exists only in the compiled code is still a ``compile-mismatch``. Dynamo's
guard-latency measurement (a cache flush per compile, for its metrics only) is skipped while
gradsmith compiles, and put back afterwards.
"""

from __future__ import annotations

import inspect
import logging

import pytest
import torch
from torch.autograd import Function

from gradsmith.checker import check

_log = logging.getLogger("gradsmith.tests.traces")


def _x() -> torch.Tensor:
    return torch.linspace(-1.0, 1.5, 12, dtype=torch.float64).reshape(3, 4).requires_grad_()


class TwoBreaks(Function):
    """Correct (``2 * sin(x)``), with code Dynamo cannot trace on two lines."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        _log.debug("first %s", tuple(x.shape))  # break 1
        y = torch.sin(x)
        if float(y.abs().max()) > 100.0:  # break 2: a Python branch on a tensor value
            y = y.clamp(-100, 100)
        return 2 * y

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * torch.cos(x) * g


class BreakThenCompiledOnlyBug(Function):
    """A graph break, then a path taken only while Dynamo traces that forgets a factor: right in
    eager, wrong in the compiled graph after the break (planted)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        _log.debug("shape %s", tuple(x.shape))  # the graph break
        if torch.compiler.is_dynamo_compiling():
            return x + x * 0.5  # should be 2 * x
        return 2 * x

    @staticmethod
    def backward(ctx, g):
        return 2 * g


@pytest.fixture
def traces(monkeypatch):
    """How many times the compile check hands the Function to Dynamo (``torch.compile`` and
    ``torch._dynamo.explain`` calls), counted around the real ones."""
    import torch._dynamo

    count = {"compile": 0, "explain": 0}
    real_compile, real_explain = torch.compile, torch._dynamo.explain

    def counted_compile(*args, **kwargs):
        count["compile"] += 1
        return real_compile(*args, **kwargs)

    def counted_explain(*args, **kwargs):
        count["explain"] += 1
        return real_explain(*args, **kwargs)

    monkeypatch.setattr(torch, "compile", counted_compile)
    monkeypatch.setattr(torch._dynamo, "explain", counted_explain)
    return count


def test_graph_breaks_are_listed_from_the_one_compile_that_allows_them(traces):
    x = _x()
    # Independent reference: the breaks torch._dynamo.explain sees, by user line.
    import torch._dynamo

    seen = torch._dynamo.explain(TwoBreaks.apply)(x.detach().clone().requires_grad_())
    explained = {b.user_stack[-1].lineno for b in seen.break_reasons if b.user_stack}
    source, start = inspect.getsourcelines(TwoBreaks.forward)
    lines = {start + i for i, text in enumerate(source) if "# break" in text}
    # fullgraph fails at the first line; explain, allowed to break there, finds the second
    assert explained and explained <= lines and len(lines) == 2
    traces["explain"] = 0

    report = check(TwoBreaks, x, checks=["compile"])

    assert traces == {"compile": 2, "explain": 0}  # fullgraph, then with breaks allowed
    breaks = [f for f in report.findings if f.code == "compile-graph-break"]
    assert {f.details["where"]["line"] for f in breaks} == lines, [f.message for f in breaks]
    assert all(f.details["reason"] for f in breaks)
    assert report.compat["compile"]["codes"] == ["compile-graph-break"]
    assert not report.codes("error")


def test_a_compiled_only_bug_behind_a_graph_break_is_still_a_mismatch(traces):
    x = _x()
    # Independent reference: eager doubles, the compiled code (breaks allowed) does not.
    torch._dynamo.reset()
    compiled = torch.compile(BreakThenCompiledOnlyBug.apply, backend="aot_eager")
    assert not torch.allclose(compiled(x.detach()), 2 * x.detach())
    torch._dynamo.reset()
    traces["compile"] = 0

    report = check(BreakThenCompiledOnlyBug, x, checks=["compile"])

    assert traces == {"compile": 2, "explain": 0}
    assert {"compile-graph-break", "compile-mismatch"} <= report.codes()
    (f,) = [f for f in report.findings if f.code == "compile-mismatch"]
    assert "with graph breaks" in f.message
    assert not report.passed


def test_dynamo_guard_latency_is_not_measured_while_gradsmith_compiles(monkeypatch):
    import torch._dynamo.guards as guards

    calls = []
    real = guards.profile_guard_manager

    def counted(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(guards, "profile_guard_manager", counted)
    report = check(TwoBreaks, _x(), checks=["compile", "export"])

    assert calls == []
    assert guards.profile_guard_manager is counted  # put back as it was
    assert "compile" in report.checks and "export" in report.checks
    # Outside gradsmith's compile, Dynamo measures as before.
    torch._dynamo.reset()
    torch.compile(torch.sin, backend="eager")(torch.ones(2))
    torch._dynamo.reset()
    assert calls
