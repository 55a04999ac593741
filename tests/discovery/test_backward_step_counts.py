"""A mapping entry only backward reads, bound to a local name and used as a loop count
(``steps = ctx.cfg['steps']; for i in range(1, steps)``), is the int 1 (issue 18, corpus 14:
understanding-spigot's estimators were skipped, "'float' object cannot be interpreted as an
integer", their step count given as 1.0; each extra step calls a decoder nothing describes).
Reduced cases written here: a scaled gradient refined by extra steps through a callable, its
planted wrong backward that must FAIL, and a piecewise-constant forward (an estimator)."""

from __future__ import annotations

import importlib.util
import textwrap

import pytest
import torch

import gradsmith
from gradsmith.discovery import Synthesized, synthesize
from gradsmith.discovery.uses import argument_uses

CASE = '''
import torch


class Stepped(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, refine, cfg):
        ctx.refine, ctx.cfg = refine, cfg
        return x * 3.0

    @staticmethod
    def backward(ctx, grad):
        rate = ctx.cfg["rate"]
        steps = ctx.cfg["steps"]
        out = grad * 3.0
        for _ in range(1, steps):
            out = out - rate * ctx.refine(out)
        return out, None, None


class SteppedWrong(Stepped):
    @staticmethod
    def backward(ctx, grad):
        steps = ctx.cfg["steps"]
        out = grad
        for _ in range(1, steps):
            out = ctx.refine(out)
        return out, None, None


class SteppedArgmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, s, refine, cfg):
        ctx.refine, ctx.cfg = refine, cfg
        return torch.nn.functional.one_hot(s.argmax(-1), s.shape[-1]).to(s.dtype)

    @staticmethod
    def backward(ctx, grad):
        steps = ctx.cfg["steps"]
        best = -ctx.cfg["rate"] * grad
        for _ in range(1, steps):
            best = best - ctx.refine(best)
        return -best, None, None
'''


@pytest.fixture(scope="module")
def module(tmp_path_factory):
    path = tmp_path_factory.mktemp("stepped") / "stepped_case.py"
    path.write_text(textwrap.dedent(CASE))
    spec = importlib.util.spec_from_file_location("stepped_case", path)
    found = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(found)  # source must be readable: the hints parse it
    return found


def test_a_local_bound_to_an_entry_is_used_as_the_entry(module):
    uses = argument_uses(module.Stepped, ["x", "refine", "cfg"])
    assert uses["cfg"].keys == {"rate": "neutral", "steps": "neutral-int"}


def test_one_step_the_estimator_itself_and_a_wrong_backward_fails(module):
    found = synthesize(module.Stepped)
    assert isinstance(found, Synthesized), found
    x, refine, cfg = found.args
    assert cfg == {"rate": 1.0, "steps": 1} and type(cfg["steps"]) is int
    # Independent reference: autograd of x * 3
    leaf = x.detach().clone().requires_grad_(True)
    (want,) = torch.autograd.grad((leaf * 3.0).sum(), leaf)
    leaf = x.detach().clone().requires_grad_(True)
    (got,) = torch.autograd.grad(module.Stepped.apply(leaf, refine, cfg).sum(), leaf)
    torch.testing.assert_close(got, want)
    assert gradsmith.check(module.Stepped, x.detach(), refine, cfg).passed
    wrong = gradsmith.check(module.SteppedWrong, x.detach(), refine, cfg)
    assert "gradient-mismatch" in wrong.codes("error"), str(wrong)


def test_an_argmax_with_a_stepped_backward_is_an_estimator(module):
    found = synthesize(module.SteppedArgmax)
    assert isinstance(found, Synthesized), found
    report = gradsmith.check(module.SteppedArgmax, *(a.detach() if torch.is_tensor(a) else a
                                                     for a in found.args))
    assert report.codes("error") == {"undeclared-estimator"}, str(report)


def test_another_int_use_keeps_the_usual_value():
    """A bit width backward shifts by keeps its usual value (1 bit would be degenerate); only
    a loop count is 1."""
    import ast

    from gradsmith.discovery.keyed import read_keys

    found: dict = {}
    read_keys(ast.parse("b = ctx.c['num_bits']\ny = g >> b\nn = ctx.c['steps']\n"
                        "for i in range(n):\n    pass"), found, [], {"c": "cfg"})
    assert found == {"cfg": {"num_bits": "int", "steps": "count"}}
