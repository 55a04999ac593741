"""GS102 and GS223 at run time (both warnings: the harm depends on the callers): an arithmetic
write into grad_output fails when the output is summed, an in-place collective on one process
changes nothing (fixtures/realcode_inplace.py).

The fixture is loaded as a module here (it is only linted elsewhere) and run in a one-process
gloo group; gradients are compared with autograd of the same expression in plain torch.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from gradsmith.linter import lint

FIXTURE = Path(__file__).parent / "fixtures" / "realcode_inplace.py"


@pytest.fixture(scope="module")
def mod():
    spec = importlib.util.spec_from_file_location("realcode_inplace_fixture", FIXTURE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield module
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def severity():
    lines = FIXTURE.read_text().splitlines()
    return {(lines[f.line - 1].strip(), f.code): f.severity for f in lint(FIXTURE, config=False)}


def _x():
    torch.manual_seed(0)
    return torch.randn(3, 4, dtype=torch.double, requires_grad=True)


def test_arithmetic_write_into_grad_output_raises_on_a_summed_output(mod, severity):
    x = _x()
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        mod.CopyToRegionMean.apply(x).sum().backward()
    assert severity["return _reduce_mean(grad_output)  # GS102", "GS102"] == "warning"


@pytest.mark.parametrize("use", ["sum", "caller's gradient"])
def test_collective_on_grad_output_is_harmless_on_one_process(mod, severity, use):
    x = _x()
    g = torch.randn(3, 4, dtype=torch.double)
    before = g.clone()
    for fn in (lambda t: mod.CopyToRegion.apply(t, None), mod.AllReduceDirect.apply):
        y = fn(x.clone())
        (gx,) = torch.autograd.grad(y.sum() if use == "sum" else y, x,
                                    None if use == "sum" else g)
        (ref,) = torch.autograd.grad(x.clone().sum() if use == "sum" else x.clone(), x,
                                     None if use == "sum" else before)
        torch.testing.assert_close(gx, ref)
    torch.testing.assert_close(g, before)  # the caller's gradient is untouched
    assert severity["return _reduce(grad_output, ctx.group), None  # GS223", "GS223"] == "warning"
    assert severity["dist.all_reduce(grad_output, async_op=True)  # GS223", "GS223"] == "warning"


def test_saved_softmax_turned_into_the_gradient_breaks_a_second_backward(mod, severity):
    torch.manual_seed(0)
    logits = torch.randn(4, 5, dtype=torch.double, requires_grad=True)
    target = torch.tensor([0, 3, 1, 4])
    loss = mod.VocabCrossEntropy.apply(logits, target).sum()
    (first,) = torch.autograd.grad(loss, logits, retain_graph=True)
    (ref,) = torch.autograd.grad(
        torch.nn.functional.cross_entropy(logits, target, reduction="sum"), logits)
    torch.testing.assert_close(first, ref)  # the first backward is right
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        torch.autograd.grad(loss, logits)
    line = "grad[torch.arange(grad.shape[0]), target] -= 1.0  # GS227"
    assert severity[line, "GS227"] == "warning"


def test_what_a_helper_saves_decides_between_gs227_and_gs103(mod, severity):
    torch.manual_seed(0)
    logits = torch.randn(4, 5, dtype=torch.double, requires_grad=True)
    loss = mod.GradientSavedByHelper.apply(logits)
    (first,) = torch.autograd.grad(loss, logits, retain_graph=True)
    (ref,) = torch.autograd.grad(torch.logsumexp(logits, -1).sum(), logits)
    torch.testing.assert_close(first, ref)  # a fresh intermediate: the first backward is right
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        torch.autograd.grad(loss, logits)
    assert severity["dx *= dy  # GS227", "GS227"] == "warning"
    assert ("dx *= dy  # GS227", "GS103") not in severity
    x = _x()
    before = x.detach().clone()
    mod.InputSavedByHelper.apply(x).backward()
    assert not torch.equal(x.detach(), before)  # the caller's own tensor changed: harm
    assert severity["x.mul_(2)  # GS103", "GS103"] == "error"
