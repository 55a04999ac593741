"""What fixtures/dev_rules.py's findings claim holds at run time: a reported Function's
gradient differs from autograd of the same expression in plain torch, a near miss matches it.

The fixture is loaded as a module here (it is only linted elsewhere).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint

FIXTURE = Path(__file__).parent / "fixtures" / "dev_rules.py"


@pytest.fixture(scope="module")
def mod():
    spec = importlib.util.spec_from_file_location("dev_rules_fixture", FIXTURE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def codes():
    return {(f.line, f.code): f for f in lint(FIXTURE, config=False)}


def _class_line(name: str) -> int:
    return FIXTURE.read_text().splitlines().index(f"class {name}(torch.autograd.Function):") + 1


def _reported(codes, code: str, cls: str, nxt: str | None) -> bool:
    start = _class_line(cls)
    end = _class_line(nxt) if nxt else 10**9
    return any(c == code and start <= line < end for line, c in codes)


def _x(*shape):
    torch.manual_seed(0)
    return torch.randn(*shape, dtype=torch.double, requires_grad=True)


def test_unread_lse_gradient_is_silently_lost(mod, codes):
    x = _x(2, 5)
    out, lse = mod.SoftmaxWithLse.apply(x)
    assert lse.requires_grad  # looks differentiable
    (got,) = torch.autograd.grad((out.sum(-1) + lse.squeeze(-1)).sum(), x)
    (ref,) = torch.autograd.grad(
        (x.softmax(-1).sum(-1) + x.logsumexp(-1)).sum(), x)  # d lse / dx = softmax
    assert not torch.allclose(got, ref)
    assert _reported(codes, "GS122", "SoftmaxWithLse", "SoftmaxWithLseMarked")
    assert codes[next(k for k in codes if k[1] == "GS122")].severity == "warning"


def test_marked_lse_cannot_be_differentiated_silently(mod, codes):
    x = _x(2, 5)
    out, lse = mod.SoftmaxWithLseMarked.apply(x)
    assert not lse.requires_grad
    with pytest.raises(RuntimeError, match="does not require grad"):
        torch.autograd.grad(lse.sum(), x)
    (got,) = torch.autograd.grad((out * torch.arange(5.0, dtype=x.dtype)).sum(), x)
    (ref,) = torch.autograd.grad((x.softmax(-1) * torch.arange(5.0, dtype=x.dtype)).sum(), x)
    torch.testing.assert_close(got, ref)
    assert not _reported(codes, "GS122", "SoftmaxWithLseMarked", "TopK")


def test_topk_indices_and_mask_carry_no_gradient(mod, codes):
    x = _x(3, 6)
    values, where, hit = mod.TopK.apply(x, 2)
    assert where.dtype == torch.int64 and hit.dtype == torch.bool
    (got,) = torch.autograd.grad((values * values).sum(), x)
    (ref,) = torch.autograd.grad((x.topk(2, dim=-1).values ** 2).sum(), x)
    torch.testing.assert_close(got, ref)
    assert not _reported(codes, "GS122", "TopK", "Split")


def test_recompute_without_the_mask_gives_the_wrong_gradient(mod, codes):
    q, k = _x(2, 4), _x(2, 4).detach().requires_grad_()
    mask = torch.tensor([[0.0, -1e9, 0.0, 0.0], [0.0, 0.0, -1e9, 3.0]], dtype=q.dtype)
    w = torch.arange(4.0, dtype=q.dtype)

    def reference(q, k):
        return ((q * k + mask).softmax(-1) * w).sum()

    ref = torch.autograd.grad(reference(q, k), (q, k))
    bad = torch.autograd.grad((mod.MaskedScores.apply(q, k, mask) * w).sum(), (q, k))
    good = torch.autograd.grad((mod.MaskedScoresKept.apply(q, k, mask) * w).sum(), (q, k))
    applied = torch.autograd.grad((mod.MaskedScoresApplied.apply(q, k, mask) * w).sum(), (q, k))
    assert not torch.allclose(bad[0], ref[0])
    torch.testing.assert_close(good, ref)
    torch.testing.assert_close(applied, ref)
    assert _reported(codes, "GS123", "MaskedScores", "MaskedScoresKept")
    assert not _reported(codes, "GS123", "MaskedScoresKept", None)
