"""Direct feedback alignment: an identity forward whose backward returns an error signal
projected through fixed feedback weights, ``e @ B``, in place of the incoming gradient (issue
18, corpus 10b held-out VDIB's ``HookFunction``, spent; its mode ``'DFA'`` is read from
backward). Before, the line was an ``intended=`` template; now ``intended=lambda x, e, B,
mode, grad: (e @ B, None, None, None)``, run against backward for two incoming gradients.
Checked against the hand-written projection, pasted above the class it passes, and a planted
wrong backward (the transposed weights' product less half) FAILs under it. Reduced case
written here.
"""

from __future__ import annotations

import importlib.util
import re
import sys

import torch

import gradsmith

SOURCE = """import torch
import gradsmith


class Feedback(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, e, fb, mode):
        ctx.save_for_backward(e, fb)
        ctx.mode = mode
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        e, fb = ctx.saved_tensors
        if ctx.mode == "DFA":
            g = {projection}
        return g, None, None, None
"""
RIGHT = "e.mm(fb.view(-1, fb.shape[1])).view(g.shape)"


def _load(tmp_path, stem: str, text: str):
    path = tmp_path / f"{stem}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"feedback_{stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_a_projected_error_signal_gets_a_checked_line(tmp_path):
    fn = _load(tmp_path, "dfa", SOURCE.format(projection=RIGHT)).Feedback
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(3, 4, dtype=torch.float64, generator=gen, requires_grad=True)
    e = torch.randn(3, 5, dtype=torch.float64, generator=gen)
    fb = torch.randn(5, 4, dtype=torch.float64, generator=gen)
    torch.manual_seed(0)
    report = gradsmith.check(fn, x, e, fb, "DFA", compat=False)
    (finding,) = [f for f in report.errors if f.code == "undeclared-estimator"]
    line = finding.details["declaration"]
    assert finding.details["verified"] and "..." not in line, line

    # independent reference: the declared gradient is e @ fb whatever the incoming gradient
    intended = eval(re.search(r"intended=(lambda .*)\)$", line).group(1),  # noqa: S307
                    {"torch": torch})
    e2 = torch.randn(2, 6, dtype=torch.float64, generator=gen)
    fb2 = torch.randn(6, 3, dtype=torch.float64, generator=gen)
    got = intended(torch.zeros(2, 3, dtype=torch.float64), e2, fb2, "DFA",
                   torch.randn(2, 3, dtype=torch.float64, generator=gen))
    torch.testing.assert_close(got[0], e2 @ fb2)
    assert got[1:] == (None, None, None)

    for stem, projection, ok in (("pasted", RIGHT, True),
                                 ("wrong", "0.5 * e.mm(fb.view(-1, fb.shape[1]))", False)):
        text = SOURCE.format(projection=projection).replace("class", line + "\nclass", 1)
        torch.manual_seed(0)
        report = gradsmith.check(_load(tmp_path, stem, text).Feedback, compat=False)
        assert report.passed == ok, (line, report)
        if not ok:
            assert "intended-mismatch" in report.codes("error"), report
