"""The seed tutorials' frozen-weight case: a gradient computed for a weight passed without
requires_grad. `gradsmith check` and `gradsmith lint` must both report it, and neither the
guarded version."""

import textwrap

import torch

import gradsmith

ALWAYS = textwrap.dedent('''
    import torch


    class AlwaysCompute(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, weight, bias):
            ctx.save_for_backward(x, weight)
            return x @ weight.t() + bias

        @staticmethod
        def backward(ctx, g):
            x, weight = ctx.saved_tensors
            return g @ weight, g.t() @ x, g.sum(0)
''')

GUARDED = textwrap.dedent('''
    import torch


    class Guarded(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, weight, bias):
            ctx.save_for_backward(x, weight)
            return x @ weight.t() + bias

        @staticmethod
        def backward(ctx, g):
            x, weight = ctx.saved_tensors
            gx = g @ weight if ctx.needs_input_grad[0] else None
            gw = g.t() @ x if ctx.needs_input_grad[1] else None
            gb = g.sum(0) if ctx.needs_input_grad[2] else None
            return gx, gw, gb
''')


def _load(source, name):
    namespace = {}
    exec(compile(source, f"<{name}>", "exec"), namespace)  # noqa: S102 - test fixture
    return namespace[name]


def _inputs():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(4, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(5, 3, generator=gen, dtype=torch.float64)  # frozen
    bias = torch.randn(5, generator=gen, dtype=torch.float64, requires_grad=True)
    return x, weight, bias


def test_frozen_weight_gradient_is_reported_by_check_and_lint():
    report = gradsmith.check(_load(ALWAYS, "AlwaysCompute"), *_inputs())
    unneeded = {f.input: f for f in report.findings if f.code == "unneeded-grad"}
    # The frozen weight as the user passed it; x and bias when each is switched off in turn.
    assert set(unneeded) == {"weight", "x", "bias"}, str(report)
    frozen = unneeded["weight"]
    assert frozen.details["frozen"] and "frozen" in frozen.message
    assert "needs_input_grad[1]" in frozen.hint
    assert report.passed  # wasted work, not a wrong gradient
    lint = gradsmith.lint(source=ALWAYS)
    assert "GS301" in {f.code for f in lint}


def test_guarded_backward_is_clean_for_check_and_lint():
    # compat=False: the eager hygiene verdict (an old-style Function is a torch.func warning)
    report = gradsmith.check(_load(GUARDED, "Guarded"), *_inputs(), compat=False)
    assert report.codes("warning") == set(), str(report)
    assert "GS301" not in {f.code for f in gradsmith.lint(source=GUARDED)}


def test_frozen_input_gradient_is_really_discarded_by_autograd():
    # The reference the finding relies on: autograd gives the frozen weight no gradient.
    x, weight, bias = _inputs()
    _load(ALWAYS, "AlwaysCompute").apply(x, weight, bias).sum().backward()
    assert weight.grad is None and x.grad is not None
