"""GS101 is an error where the linted callers show the harm, GS230 a warning where every call
passes a value nothing reads again (fixtures/inplace_callers.py, run on CPU).

References: the caller's tensor as it was before the call (a clone), and autograd of the
same computation written out of place.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint

FIXTURE = Path(__file__).parent / "fixtures" / "inplace_callers.py"


@pytest.fixture(scope="module")
def mod(load_fixture):
    return load_fixture(FIXTURE, "inplace_callers_fixture")


@pytest.fixture(scope="module")
def found():
    lines = FIXTURE.read_text().splitlines()
    owner, out = None, {}
    for number, line in enumerate(lines, 1):
        if line.startswith("class "):
            owner = line.split()[1].split("(")[0]
        out[number] = owner
    return {(out[f.line], f.code, f.severity) for f in lint(FIXTURE, config=False)
            if f.code in ("GS101", "GS230")}


def _centered(x):
    return x - x.mean(-1, keepdim=True)


def test_no_caller_reads_it_again_the_result_is_right_and_a_warning(mod, found):
    torch.manual_seed(0)
    x = torch.randn(4, 5)
    w = torch.randn(5, 6, requires_grad=True)
    weights = torch.randn(4, 6)
    loss = mod.centered_loss(x @ w, weights)  # the matmul saves x and w, not its output
    ref_w = w.detach().clone().requires_grad_()
    ref = (_centered(x @ ref_w) * weights).sum()
    torch.testing.assert_close(loss, ref)
    torch.testing.assert_close(torch.autograd.grad(loss, w)[0], torch.autograd.grad(ref, ref_w)[0])
    layer = mod.Layer(5)
    torch.testing.assert_close(layer(x), _centered(layer.proj(x)))
    assert ("Center", "GS230", "warning") in found
    assert ("CenterInLayer", "GS230", "warning") in found
    assert not {(name, code) for name, code, _ in found
                if name in ("Center", "CenterInLayer") and code == "GS101"}


def test_a_caller_reading_it_again_sees_it_changed_an_error(mod, found):
    torch.manual_seed(1)
    x = torch.randn(4, 5) + 3.0
    before = x.clone()
    _, scale = mod.centered_and_scale(x)
    assert scale != before.abs().max(), "the caller read the value it passed"
    torch.testing.assert_close(scale, _centered(before).abs().max())  # it read the centred one
    assert ("CenterReused", "GS101", "error") in found


def test_an_input_sigmoid_saved_breaks_sigmoids_backward_an_error(mod, found):
    torch.manual_seed(2)
    a = torch.randn(4, 5, requires_grad=True)
    out = mod.gated_center(a)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()
    assert ("CenterAfterSigmoid", "GS101", "error") in found


def test_callers_out_of_sight_keep_the_error(found):
    assert ("CenterPassedOn", "GS101", "error") in found
