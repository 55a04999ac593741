"""GS237 at run time (issue 19, svox2's total variation): a backward that never reads the
output's gradient returns the gradient of the output alone, so a weighted loss gets the
unweighted gradient; the fix (multiplying by grad_out) matches autograd."""

from __future__ import annotations

from pathlib import Path

import torch

from gradsmith.linter import lint

FIXTURE = Path(__file__).parent / "fixtures" / "ignored_grad.py"


def test_unread_grad_output_loses_the_loss_weight(load_fixture):
    findings = [(f.line, f.code) for f in lint(FIXTURE, config=False) if f.code == "GS237"]
    line = next(i for i, text in enumerate(FIXTURE.read_text().splitlines(), 1)
                if "# GS237" in text)
    assert findings == [(line, "GS237")]  # InjectGrad hands its gradient in on purpose
    mod = load_fixture(FIXTURE, "ignored_grad_fixture")

    x = torch.tensor([1.0, 3.0, 2.0, -1.0], dtype=torch.float64, requires_grad=True)
    (ref,) = torch.autograd.grad(3.0 * (x[1:] - x[:-1]).pow(2).sum(), x)
    torch.testing.assert_close(ref, torch.tensor([-12.0, 18.0, 12.0, -18.0],
                                                 dtype=torch.float64))  # by hand
    (got,) = torch.autograd.grad(3.0 * mod.TotalVariation.apply(x), x)
    torch.testing.assert_close(got * 3.0, ref)  # silently a third of the right gradient
    (got,) = torch.autograd.grad(3.0 * mod.TotalVariationScaled.apply(x), x)
    torch.testing.assert_close(got, ref)
    g = torch.tensor([0.5, 0.0, -1.0, 2.0], dtype=torch.float64)
    (got,) = torch.autograd.grad((mod.InjectGrad.apply(x, g) * 7.0).sum(), x)
    torch.testing.assert_close(got, g)  # replaced, as meant
