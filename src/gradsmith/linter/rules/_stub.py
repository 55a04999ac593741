"""GS247: a backward left as a stub (``pass``) in a Function that computes something and
takes several inputs, so any backward through it fails with a count error."""

from __future__ import annotations

import ast

from gradsmith.linter._facts import Facts
from gradsmith.linter._registry import Rule, checker
from gradsmith.linter.rules._common import trivial
from gradsmith.linter.rules._latent import int_inputs, no_gradient_outputs

_H = ("import torch\n\n\nclass Attention(torch.autograd.Function):\n    @staticmethod\n"
      "    def forward(ctx, q, k, v):\n        return torch.softmax(q @ k.T, -1) @ v\n\n"
      "    @staticmethod\n")
GS247 = Rule(
    "GS247", "stub-backward", "warning",
    "backward is a stub (only `pass`, `...` or a docstring) in a Function of several inputs",
    "backward returns None, which autograd reads as one gradient: any backward through the "
    "Function raises 'returned an incorrect number of gradients (expected N, got 1)', a "
    "message that does not say backward was never written. A warning: the Function may be "
    "used only where no gradient is needed. Not reported for a stub that raises, a "
    "one-input Function (None is a valid gradient there), a base class another class of "
    "the module derives from, or a forward whose outputs are all integer, bool or marked "
    "non-differentiable.",
    "implement backward, or `raise NotImplementedError(\"<Fn> has no backward yet\")` so "
    "that a user sees why it fails.",
    bad=_H + "    def backward(ctx, grad_output):  # GS247\n        pass\n",
    good=_H + "    def backward(ctx, grad_output):\n"
    "        raise NotImplementedError(\"Attention has no backward yet\")\n",
    brief="stub backward: count error when differentiated",
)


@checker(GS247)
def check_stub_backward(facts: Facts, report) -> None:
    backward, forward = facts.method("backward"), facts.method("forward")
    if backward is None or forward is None or facts.inputs is None:
        return
    if "backward" not in facts.fc.own or not _stub(backward.node.body):
        return
    if trivial(forward.node.body) or _subclassed(facts):
        return  # an abstract base: its subclasses supply both methods
    if any(isinstance(n, ast.Attribute) and n.attr == "mark_non_differentiable"
           for n in ast.walk(forward.node)):
        return  # outputs without gradients: backward may never run
    params, ndefault, vararg = facts.inputs
    required = len(params) - ndefault
    if required < 2:
        return  # one input: None is a valid (if empty) gradient
    ctx = facts.ctx_of(forward)
    if no_gradient_outputs(forward, ctx) or no_gradient_outputs(forward, ctx, int_inputs(facts)):
        return  # integer or bool outputs only: no gradient reaches backward
    report("GS247", backward.source, backward.node,
           f"returns None for {required}{' or more' if ndefault or vararg else ''} inputs")


def _stub(body: list[ast.stmt]) -> bool:
    """Only ``pass``, ``...`` and docstrings: no ``raise`` (that fails on purpose)."""
    return trivial(body) and not any(isinstance(s, ast.Raise) for s in body)


def _subclassed(facts: Facts) -> bool:
    """Another class of the module names this one as a base."""
    name = facts.fc.name
    return any(isinstance(n, ast.ClassDef) and any(
        (isinstance(b, ast.Name) and b.id == name) or (isinstance(b, ast.Attribute)
                                                       and b.attr == name) for b in n.bases)
               for n in ast.walk(facts.fc.source.tree))


__all__ = ["GS247"]
