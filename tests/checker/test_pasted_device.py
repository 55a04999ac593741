"""A printed declaration passes as pasted when forward takes a ``torch.device`` (issue 18,
corpus 5 held-out: DeepRobust's GradWhere). The example line wrote the device as ``...`` (its
repr ``device(type='cpu')`` is no source), so the pasted line called forward with Ellipsis and
failed although it was marked checked. A device, dtype or ``torch.Size`` is now written as its
constructor; with the line in place a planted wrong backward still FAILs."""

from __future__ import annotations

import importlib.util
import re
import sys

import pytest
import torch

import gradsmith
from gradsmith.checker.suggest import render_args

STEP = """\
import pytest
import torch

import gradsmith

{line}
class StepWhere(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, thrd, device):
        ctx.save_for_backward(x)
        return torch.where(x > thrd, torch.tensor(1.0, device=device, dtype=x.dtype),
                           torch.tensor(0.0, device=device, dtype=x.dtype))

    @staticmethod
    def backward(ctx, grad_output):
        return {factor}grad_output.clone(), None, None
"""


def _load(tmp_path, stem: str, text: str):
    path = tmp_path / f"{stem}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"pasted_device_{stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.StepWhere


def test_a_device_argument_is_printed_as_source_and_the_line_passes_as_pasted(tmp_path):
    fn = _load(tmp_path, "plain", STEP.format(line="", factor=""))
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(3, 4, dtype=torch.float64, generator=gen, requires_grad=True)
    thrd = torch.randn(3, 4, dtype=torch.float64, generator=gen)
    report = gradsmith.check(fn, x, thrd, torch.device("cpu"), compat=False)
    (finding,) = [f for f in report.errors if f.code == "undeclared-estimator"]
    line = finding.details["declaration"]
    assert finding.details["verified"] and "torch.device('cpu')" in line, line
    assert ", ...)" not in line, line
    # the independent reference: the straight-through rule by hand (identity's gradient)
    surrogate = eval(re.search(r"surrogate=(lambda .*)\)$", line).group(1),  # noqa: S307
                     {"torch": torch})
    y = x.detach().clone().requires_grad_()
    surrogate(y, thrd, torch.device("cpu")).sum().backward()
    torch.testing.assert_close(y.grad, torch.ones_like(y))
    pasted = _load(tmp_path, "pasted", STEP.format(line=line, factor=""))
    assert gradsmith.check(pasted, compat=False).passed
    mutant = _load(tmp_path, "mutant", STEP.format(line=line, factor="2 * "))
    wrong = gradsmith.check(mutant, compat=False)
    assert not wrong.passed and "surrogate-mismatch" in wrong.codes("error"), str(wrong)


def test_torch_values_without_a_literal_repr_are_written_as_constructors():
    text = render_args((torch.device("cpu"), torch.float16, torch.Size([3, 4])))
    assert text == "(torch.device('cpu'), torch.float16, torch.Size([3, 4]))"
    assert eval(text, {"torch": torch}) == (  # noqa: S307
        torch.device("cpu"), torch.float16, torch.Size([3, 4]))


class _Threshold:
    """A settings object: no source for it in a printed line."""

    thr = 0.25


class _StepAt(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, cfg):
        return (x > cfg.thr).to(x.dtype)

    @staticmethod
    def backward(ctx, g):
        return g, None


def test_a_line_with_an_argument_it_cannot_write_is_a_template_not_checked():
    x = torch.randn(3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0),
                    requires_grad=True)
    report = gradsmith.check(_StepAt, x, _Threshold(), compat=False)
    (finding,) = [f for f in report.errors if f.code == "undeclared-estimator"]
    line = finding.details["declaration"]
    assert ", ...)" in line, line  # the object has no literal: the example cannot run pasted
    with pytest.raises(AttributeError):  # forward on Ellipsis, as the pasted line would call it
        _StepAt.apply(x, ...)
    assert finding.details["verified"] is False
    assert "completing the `...` in its example" in finding.hint
    assert "declare it: `" not in finding.hint
