"""Function arguments that only backward calls (an ODE solver's event-time trick stores
``dynamics`` and ``event`` on ctx; backward calls ``dynamics(t, y)`` and ``vjp(event, (t, y))``):
synthesis invents plain functions for them and keeps the first inputs on which backward runs,
not only forward, so the zero-configuration verdict is about the gradient, not a crash."""

from __future__ import annotations

import importlib.util
import re
import textwrap

import pytest
import torch
from torch.autograd import Function

from gradsmith.checkrun.session import run_check
from gradsmith.discovery import Source, Synthesized, synthesize
from gradsmith.discovery.backward_reads import backward_functions
from gradsmith.discovery.callables import SyntheticFn

EVENT_TIME = '''
import torch
from torch.autograd import Function
from torch.autograd.functional import vjp


class EventTime(Function):
    """Returns the event time t and the state y as they are; backward moves y's gradient
    along the implicit dependence of t on y (the event c(t, y) = 0, y' = dynamics(t, y))."""

    @staticmethod
    def forward(ctx, dynamics, event, t, y):
        ctx.dynamics = dynamics
        ctx.event = event
        ctx.save_for_backward(t, y)
        return t.detach(), y.detach()

    @staticmethod
    def backward(ctx, gt, gy):
        t, y = (v.detach().clone().requires_grad_(True) for v in ctx.saved_tensors)
        move = ctx.dynamics
        velocity = move(t, y)
        with torch.enable_grad():
            _, (dc_dt, dc_dy) = vjp(ctx.event, (t, y))
        rate = dc_dt + (dc_dy * velocity).sum()
        total = gt + (gy * velocity).sum()
        return None, None, None, gy - dc_dy * (total / rate).reshape(())
'''


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    path = tmp_path_factory.mktemp("function_args") / "event_time.py"
    path.write_text(textwrap.dedent(EVENT_TIME))
    return path


def _event_time(path):
    spec = importlib.util.spec_from_file_location("event_time_case", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # source must be readable: the hints parse it
    return module.EventTime


def test_functions_only_backward_calls_are_found_directly_by_alias_and_through_vjp(source):
    assert backward_functions(_event_time(source), ["dynamics", "event", "t", "y"]) == {
        "dynamics", "event"}

    class CalledInForward(Function):
        @staticmethod
        def forward(ctx, fn, scale, x):
            ctx.fn, ctx.scale = fn, scale
            return fn(x) * scale

        @staticmethod
        def backward(ctx, g):
            return None, None, g * ctx.fn(g) * torch.mul(g, ctx.scale)

    # fn runs in forward (a module, as before); scale is a number passed to a call, not called
    assert backward_functions(CalledInForward, ["fn", "scale", "x"]) == set()


def test_backward_called_functions_are_synthesised_so_that_backward_runs(source):
    fn = _event_time(source)
    found = synthesize(fn)
    assert isinstance(found, Synthesized), found
    dynamics, event, t, y = found.args
    assert isinstance(dynamics, SyntheticFn) and isinstance(event, SyntheticFn)
    assert not dynamics.reduce and event.reduce  # a state-shaped velocity, a single number
    assert t.dim() == 0 and y.dim() >= 1
    # Independent of gradsmith: plain autograd runs backward on them and gets finite values.
    outs = fn.apply(*found.args)
    (grad,) = torch.autograd.grad(outs, [y], [torch.ones_like(o) for o in outs])
    assert torch.isfinite(grad).all()
    # ...and the functions are what their source says (the declaration line prints it).
    for f in (dynamics, event):
        torch.testing.assert_close(f(t, y), eval(f.source, {"torch": torch})(t, y))  # noqa: S307
    assert "dynamics: fn(*t) = tanh(t[-1])" in found.description
    # Every variant runs backward too.
    for variant in found.variants:
        outs = fn.apply(*variant.args)
        torch.autograd.grad(outs, [variant.args[3]], [torch.ones_like(o) for o in outs])


def test_zero_configuration_verdict_is_about_the_gradient_not_a_crash(source):
    (row,) = run_check([Source("file", str(source), "event_time.py")], isolate=False).rows
    assert row["verdict"] == "fail", row["text"]
    errors = [f for f in row["report"]["findings"] if f["severity"] == "error"]
    assert {f["code"] for f in errors} == {"undeclared-estimator"}, row["text"]
    (f,) = errors
    assert f["details"]["estimator"] == {"t": "no-gradient", "y": "modified"}
    line = f["details"]["declaration"]
    assert line.endswith("intended=lambda dynamics, event, t, y, grad_t, grad_y: ...)")
    # The factory in the line is Python that builds the very inputs' kinds: paste-able.
    factory = re.match(r"@gradsmith\.example\((lambda: .*), intended=", line).group(1)
    args = eval(factory, {"torch": torch})()  # noqa: S307 - gradsmith's own line
    outs = _event_time(source).apply(*(a.requires_grad_() if isinstance(a, torch.Tensor) else a
                                 for a in args))
    torch.autograd.grad(outs, [args[3]], [torch.ones_like(o) for o in outs])
