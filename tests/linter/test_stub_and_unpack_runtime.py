"""GS247 (a stub backward) and GS218 (a save under `grad enabled and training`, or under
`torch.is_grad_enabled()` asked inside forward, unpacked always, reported where it raises), on fixtures/stub_and_unpack.py, shown at run time on
CPU: each reported Function fails when differentiated, each near miss stays silent and runs
(matching autograd of the same expression)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint

FIXTURE = Path(__file__).parent / "fixtures" / "stub_and_unpack.py"


@pytest.fixture(scope="module")
def mod(load_fixture):
    return load_fixture(FIXTURE, "stub_and_unpack_fixture")


@pytest.fixture(scope="module")
def found():
    return lint(FIXTURE, config=False)


def _line(text: str) -> int:
    lines = FIXTURE.read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


def _classes(found, code: str) -> list[tuple[int, str]]:
    return [(f.line, f.severity) for f in found if f.code == code]


def test_stub_backward_is_gs247_and_fails_with_a_count_error(mod, found):
    # only PairAttention: the raising twin, the one-input stub and the subclassed base are not
    assert _classes(found, "GS247") == [(_line("# GS247"), "warning")]
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True) for _ in range(3))
    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        mod.PairAttention.apply(q, k, v).sum().backward()
    with pytest.raises(NotImplementedError, match="no backward yet"):
        mod.PairAttentionRaises.apply(q, k, v).sum().backward()
    with torch.no_grad():  # forward alone is right (why it is a warning)
        torch.testing.assert_close(mod.PairAttention.apply(q, k, v),
                                   torch.softmax(q @ k.transpose(-1, -2), -1) @ v)
    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    w = torch.randn(3, dtype=torch.float64)
    mod.Detached.apply(x).sum().backward()
    assert x.grad is None  # one input: no gradient, no error
    (g,) = torch.autograd.grad(mod.Scaled.apply(x, w).sum(), x)
    torch.testing.assert_close(g, torch.ones_like(x))  # the subclass's own formula
    edges = torch.tensor([-1.0, 0.0, 1.0], dtype=torch.float64)
    out = mod.Bucketize.apply(x, edges)
    torch.testing.assert_close(out, torch.bucketize(x.detach(), edges))
    assert not out.requires_grad  # integer output: backward can never run


def test_training_only_save_is_gs218_at_the_unpacking_and_fails_in_eval_mode(mod, found):
    lines = FIXTURE.read_text().splitlines()
    marked = [i for i, line in enumerate(lines, 1) if line.rstrip().endswith("# GS218")]
    unpack = marked[0]
    # TrainingSave and GradModeInForward, not GradModeSave
    assert _classes(found, "GS218") == [(line, "warning") for line in marked]
    message = next(f.message for f in found if f.code == "GS218")
    assert f"saved on line {_line('ctx.save_for_backward(x, w)')} only under" in message
    torch.manual_seed(1)
    x = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    w = torch.randn(3, 4, dtype=torch.float64)
    with pytest.raises(ValueError, match="not enough values to unpack") as info:
        mod.TrainingSave.apply(True, False, x, w).sum().backward()  # eval mode, grad on
    assert info.traceback[-1].lineno + 1 == unpack  # raised where the finding points
    (want,) = torch.autograd.grad((x @ w).sum(), x)
    (got,) = torch.autograd.grad(mod.TrainingSave.apply(True, True, x, w).sum(), x)
    torch.testing.assert_close(got, want)
    (got,) = torch.autograd.grad(mod.GradModeSave.apply(True, False, x, w).sum(), x)
    torch.testing.assert_close(got, want)
    assert torch.is_grad_enabled()  # and yet, asked inside forward, torch says no:
    with pytest.raises(ValueError, match="not enough values to unpack"):
        mod.GradModeInForward.apply(x, w).sum().backward()
