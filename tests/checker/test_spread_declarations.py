"""A declaration is compared with backward beyond the check's own inputs (issue 18): the
element-wise input spread over a grid of values. Corpus 4's micronet ``Round`` clips its
straight-through gradient to an observed ``[min, max]`` of ``[-0.86, 1.10]``; no element of
the synthesised ``randn`` input fell between -1 and -0.86 or between 1 and 1.10, so
``x.clamp(-1, 1)`` was printed as checked and failed when pasted."""

from __future__ import annotations

import importlib.util
import re
import sys

import torch

import gradsmith
from gradsmith.discovery import synthesize

OBSERVED = """\
import torch
from torch.autograd import Function

import gradsmith

{line}
class ObservedRound(Function):
    @staticmethod
    def forward(ctx, x, observed_min, observed_max, mode):
        if mode == 0:
            top = torch.max(torch.abs(observed_min), torch.abs(observed_max))
            bottom = -top
        else:
            top = observed_max
            bottom = observed_min
        ctx.save_for_backward(x, bottom, top)
        return torch.sign(x) * torch.floor(torch.abs(x) + 0.5)

    @staticmethod
    def backward(ctx, grad):
        x, bottom, top = ctx.saved_tensors
        g = grad.clone()
        g[x.gt(top)] = 0
        g[x.lt(bottom)] = 0
        return g, None, None, None
"""


def _load(tmp_path, stem: str, text: str):
    path = tmp_path / f"{stem}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"spread_{stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_a_window_between_round_numbers_is_declared_by_its_bounds(tmp_path):
    fn = _load(tmp_path, "plain", OBSERVED.format(line="")).ObservedRound
    args = list(synthesize(fn).args)
    # the window [-0.86, 1.10] that corpus 4's synthesis drew, and a mode that is not 0
    args[1:] = [torch.tensor(-0.8567, dtype=torch.float64),
                torch.tensor(1.1006, dtype=torch.float64), torch.tensor(-1.07)]
    gen = torch.Generator().manual_seed(5)
    while True:  # an input on which clamp(-1, 1) agrees: no element in the window's margins
        x = torch.randn(3, 4, generator=gen, dtype=torch.float64)
        if not bool((((x > -1) & (x < -0.8567)) | ((x > 1) & (x < 1.1006))).any()):
            break
    args[0] = x.requires_grad_()
    report = gradsmith.check(fn, *args, compat=False)
    (finding,) = [f for f in report.errors if f.code == "undeclared-estimator"]
    line = finding.details["declaration"]
    assert finding.details["verified"], line
    source = re.search(r"surrogate=(lambda .*)\)$", line).group(1)
    assert "clamp(-1, 1)" not in source, line
    # the independent reference: the surrogate's gradient is the mask of [min, max] by hand
    surrogate = eval(source, {"torch": torch})  # noqa: S307 - gradsmith's own suggestion
    grid = torch.linspace(-2, 2, 401, dtype=torch.float64).requires_grad_()
    (got,) = torch.autograd.grad(surrogate(grid, *args[1:]).sum(), grid)
    want = ((grid >= args[1]) & (grid <= args[2])).to(grid.dtype)
    torch.testing.assert_close(got, want)
    torch.manual_seed(0)
    pasted = _load(tmp_path, "pasted", OBSERVED.format(line=line)).ObservedRound
    assert gradsmith.check(pasted, compat=False).passed


CLIPPED = """\
import torch
from torch.autograd import Function

import gradsmith


@gradsmith.example(lambda: (0.5 * torch.randn(4, 5, dtype=torch.float64),),
                   surrogate=lambda x: x)
class ClippedAtThree(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.round()

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * (x.abs() <= 3).to(grad.dtype)
"""


def test_a_declaration_that_differs_only_outside_the_given_inputs_fails(tmp_path):
    # declared identity, backward clipped at 3; 0.5 * randn never reaches 3 (seeded)
    fn = _load(tmp_path, "clipped", CLIPPED).ClippedAtThree
    torch.manual_seed(0)
    report = gradsmith.check(fn, compat=False)
    assert not report.passed
    (finding,) = [f for f in report.errors if f.code == "surrogate-mismatch"]
    assert "spread" in finding.message
