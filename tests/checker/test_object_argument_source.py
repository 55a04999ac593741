"""A spike whose backward asks a module argument for its surrogate (issue 18, corpus 9b
held-out ``SurrogateSpike``, ``MPDAdaptiveSpike``: ``ctx.surrogate_fn.surrogate_gradient(x)``)
got a checked surrogate, but its line wrote the module as ``...``: a template that cannot pass
as printed. A module its class builds with no arguments, in the state the check used, is now
written ``Cls()`` (imported from its module where the Function's module does not bind it); the
line passes pasted as printed, its surrogate's autograd is the module's own derivative (the
independent reference), and a backward that doubles it FAILs under the same line. A module
built with other settings stays ``...``.

Reduced case written here.
"""

from __future__ import annotations

import importlib
import re
import sys

import torch

import gradsmith

SURR = """
import torch
from torch import nn


class Sig(nn.Module):
    def __init__(self, alpha: float = 4.0):
        super().__init__()
        self.alpha = alpha

    def surrogate_gradient(self, x):
        s = torch.sigmoid(self.alpha * x)
        return self.alpha * s * (1 - s)
"""

FN = """
import torch
from torch import nn
from torch.autograd import Function

import gradsmith


class LocalSig(nn.Module):
    def surrogate_gradient(self, x):
        return 1 / (1 + 9 * x * x)


class Spike(Function):
    @staticmethod
    def forward(ctx, x, surrogate_fn):
        ctx.save_for_backward(x)
        ctx.surrogate_fn = surrogate_fn
        return (x >= 0).to(x.dtype)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return {factor} * ctx.surrogate_fn.surrogate_gradient(x) * g, None
"""


def _package(tmp_path, monkeypatch):
    root = tmp_path / "spkpkg"
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "surr.py").write_text(SURR)
    monkeypatch.syspath_prepend(str(tmp_path))
    return root


def _module(root, stem: str, text: str):
    (root / f"{stem}.py").write_text(text)
    sys.modules.pop(f"spkpkg.{stem}", None)
    return importlib.import_module(f"spkpkg.{stem}")


def _line(report) -> tuple[str, bool]:
    (finding,) = [f for f in report.errors if f.code == "undeclared-estimator"]
    return finding.details["declaration"], finding.details["verified"]


def test_a_module_argument_is_written_as_its_constructor(tmp_path, monkeypatch):
    root = _package(tmp_path, monkeypatch)
    fn = _module(root, "fn", FN.format(factor="1"))
    surr = importlib.import_module("spkpkg.surr")
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    for module, written in ((surr.Sig(), "__import__('spkpkg.surr', fromlist=['Sig']).Sig()"),
                            (fn.LocalSig(), "LocalSig()")):
        torch.manual_seed(0)
        line, verified = _line(gradsmith.check(fn.Spike, x, module, compat=False))
        assert verified and written in line and "..." not in line, line

        # the independent reference: the printed surrogate's autograd is the module's own
        # derivative, on a grid
        surrogate = eval(re.search(r"surrogate=(lambda .*)\)$", line).group(1),  # noqa: S307
                         {"torch": torch})
        grid = torch.linspace(-3, 3, 25, dtype=torch.float64, requires_grad=True)
        (got,) = torch.autograd.grad(surrogate(grid, module).sum(), grid)
        torch.testing.assert_close(got, module.surrogate_gradient(grid.detach()))

        pasted = FN.replace("class Spike", line + "\nclass Spike")
        torch.manual_seed(0)
        assert gradsmith.check(_module(root, "pasted", pasted.format(factor="1")).Spike,
                               compat=False).passed
        torch.manual_seed(0)
        wrong = gradsmith.check(_module(root, "wrong", pasted.format(factor="2")).Spike,
                                compat=False)
        assert "surrogate-mismatch" in wrong.codes("error"), wrong

    # built with other settings than its defaults: no constructor call reproduces it
    torch.manual_seed(0)
    line, _ = _line(gradsmith.check(fn.Spike, x, surr.Sig(alpha=2.0), compat=False))
    assert "Sig()" not in line, line
