"""Kolen-Pollack feedback alignment gets a printed ``intended=`` that passes as printed (issue
18, corpus 13b dev: deep_spike_learning_with_local_classifiers' ``LinearFAFunction``).

A linear layer ``x @ W.T`` sends the error back through a feedback matrix ``B`` (``g @ B``)
and gives ``B`` the same update as ``W`` (``g.T @ x``), although forward never reads ``B``.
The input's part (the substituted weight) and ``W``'s were found, ``B``'s was not: the user got
a template. Now an input forward never reads may also get a linear layer's weight update. The
reference is the hand-written ``(g @ B, g.T @ x, g.T @ x)`` at other values than the check's;
a planted wrong backward (``B``'s update halved) FAILs under the pasted line.

Reduced cases written here.
"""

from __future__ import annotations

import importlib.util
import re
import sys

import torch

import gradsmith

SOURCE = """import torch
from torch.autograd import Function
import gradsmith


class LinearKP(Function):
    @staticmethod
    def forward(ctx, x, weight, feedback):
        ctx.save_for_backward(x, weight, feedback)
        return x.matmul(weight.t())

    @staticmethod
    def backward(ctx, g):
        x, weight, feedback = ctx.saved_tensors
        return g.matmul(feedback), g.t().matmul(x), {update}
"""

RIGHT = "g.t().matmul(x)"


def _load(tmp_path, stem: str, text: str):
    path = tmp_path / f"{stem}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"kolen_pollack_{stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.LinearKP


def _line(tmp_path) -> str:
    fn = _load(tmp_path, "fit", SOURCE.format(update=RIGHT))
    gen = torch.Generator().manual_seed(4)
    args = [torch.randn(shape, dtype=torch.float64, generator=gen, requires_grad=True)
            for shape in ((5, 3), (2, 3), (2, 3))]
    torch.manual_seed(0)
    report = gradsmith.check(fn, *args, compat=False)
    (finding,) = [f for f in report.errors if f.code == "undeclared-estimator"]
    line = finding.details["declaration"]
    assert finding.details["verified"] and "..." not in line, line
    return line


def test_the_feedback_matrix_gets_the_weights_update(tmp_path):
    line = _line(tmp_path)
    intended = eval(re.search(r"intended=(lambda .*)\)$", line).group(1),  # noqa: S307
                    {"torch": torch})
    gen = torch.Generator().manual_seed(9)
    x, w, b = (torch.randn(shape, dtype=torch.float64, generator=gen)
               for shape in ((4, 6), (3, 6), (3, 6)))
    g = torch.randn(4, 3, dtype=torch.float64, generator=gen)
    got = intended(x, w, b, g)
    for a, want in zip(got, (g @ b, g.t() @ x, g.t() @ x)):
        torch.testing.assert_close(a, want)


def test_the_line_passes_pasted_and_a_wrong_backward_fails(tmp_path):
    line = _line(tmp_path)

    def pasted(update: str) -> str:
        return SOURCE.format(update=update).replace("class", line + "\nclass", 1)

    torch.manual_seed(0)
    report = gradsmith.check(_load(tmp_path, "pasted", pasted(RIGHT)), compat=False)
    assert report.passed, (line, report)
    torch.manual_seed(0)
    wrong = _load(tmp_path, "wrong", pasted("0.5 * g.t().matmul(x)"))
    report = gradsmith.check(wrong, compat=False)
    assert "intended-mismatch" in report.codes("error"), (line, report)
