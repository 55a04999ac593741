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
def mod(load_fixture):
    return load_fixture(FIXTURE, "dev_rules_fixture")


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
    helper = torch.autograd.grad((mod.MaskedScoresKernel.apply(q, k, mask) * w).sum(), (q, k))
    assert not torch.allclose(helper[0], ref[0])
    assert _reported(codes, "GS123", "MaskedScoresKernel", "AffineHelperForGradient")
    plain = torch.autograd.grad((mod.MaskedScoresKernel.apply(q, k) * w).sum(), (q, k))
    torch.testing.assert_close(plain, torch.autograd.grad(((q * k).softmax(-1) * w).sum(), (q, k)))
    torch.testing.assert_close(good, ref)
    torch.testing.assert_close(applied, ref)
    assert _reported(codes, "GS123", "MaskedScores", "MaskedScoresKept")
    assert not _reported(codes, "GS123", "MaskedScoresKept", "MaskedScoresKernel")
    assert not _reported(codes, "GS123", "AffineHelperForGradient", None)


def _second(fn, x):
    """d/dx of sum(d loss / dx) for loss = sum(fn(x) ** 2): grad_output carries a graph, as
    it does whenever backward is itself differentiated through later layers."""
    (g,) = torch.autograd.grad((fn(x) ** 2).sum(), x, create_graph=True)
    (h,) = torch.autograd.grad(g.sum(), x)
    return h


def test_precomputed_gradient_gives_a_silently_wrong_second_derivative(mod, codes):
    x = _x(5)
    ref = _second(torch.nn.functional.softplus, x)  # autograd of the plain expression
    wrong = _second(mod.SoftplusPrecomputed.apply, x)  # no error: just a wrong Hessian
    assert not torch.allclose(wrong, ref)
    ref_sq = _second(lambda t: t * t * 3.0, x)
    assert not torch.allclose(_second(lambda t: mod.SquarePrecomputedSaved.apply(t, 3.0), x),
                              ref_sq)
    torch.testing.assert_close(ref_sq, 108 * x.detach() ** 2)  # by hand: d2/dx2 of 9 x^4
    assert _reported(codes, "GS222", "SoftplusPrecomputed", "SquarePrecomputedSaved")
    assert _reported(codes, "GS222", "SquarePrecomputedSaved", "SoftplusOnce")


def test_near_misses_raise_or_are_right(mod, codes):
    x = _x(5)
    (g,) = torch.autograd.grad((mod.SoftplusOnce.apply(x) ** 2).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable"):
        g.sum().backward()  # the second derivative raises instead of being wrong
    torch.testing.assert_close(_second(mod.ExpSavesOutput.apply, x),
                               _second(lambda t: t.exp() * 2, x))
    torch.testing.assert_close(_second(mod.ReluMask.apply, x), _second(torch.relu, x))
    torch.testing.assert_close(_second(lambda t: mod.ScaleByNumber.apply(t, 1.5), x),
                               _second(lambda t: t * 3.0, x))
    assert not _reported(codes, "GS222", "ScaleByNumber", "ReluMask")
    assert not _reported(codes, "GS222", "SoftplusOnce", None)


def test_gradient_a_kernel_writes_in_forward_is_followed():
    """A Triton kernel filling a buffer from the inputs computes it (read, never run)."""
    src = (
        "import torch\nimport triton\nimport triton.language as tl\n\n\n@triton.jit\n"
        "def _fwd(X, Y, DX):\n    x = tl.load(X)\n    tl.store(Y, x * x)\n    tl.store(DX, 2 * x)\n"
        "\n\nclass Sq(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n"
        "        y = torch.empty_like(x)\n        dx = torch.empty_like(x)\n"
        "        _fwd[(1,)](x, y, dx)\n        ctx.save_for_backward(dx)\n        return y\n\n"
        "    @staticmethod\n    def backward(ctx, g):\n        (dx,) = ctx.saved_tensors\n"
        "        return dx.mul(g)\n"
    )
    line = src.splitlines().index("        return dx.mul(g)") + 1
    assert [f.line for f in lint(source=src) if f.code == "GS222"] == [line]
    fixed = src.replace("    def backward", "    @once_differentiable\n    def backward")
    assert "GS222" not in {f.code for f in lint(source=fixed)}


def test_kernel_in_backward_is_the_one_finding_for_a_precomputed_gradient():
    """One root cause: @once_differentiable fixes both, so GS215 alone is reported."""
    src = (
        "import torch\nimport triton\nimport triton.language as tl\n\n\n@triton.jit\n"
        "def _fwd(X, DX):\n    tl.store(DX, 2 * tl.load(X))\n\n\n@triton.jit\n"
        "def _scale(DX, G):\n    tl.store(DX, tl.load(DX) * tl.load(G))\n\n\n"
        "class Sq(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n"
        "        dx = torch.empty_like(x)\n        _fwd[(1,)](x, dx)\n"
        "        ctx.save_for_backward(dx)\n        return x * x\n\n"
        "    @staticmethod\n    def backward(ctx, g):\n        (dx,) = ctx.saved_tensors\n"
        "        _scale[(1,)](dx, g.contiguous())\n        return dx\n"
    )
    codes = {f.code for f in lint(source=src)}
    assert "GS215" in codes and "GS222" not in codes
    alone = src.replace("        _scale[(1,)](dx, g.contiguous())\n        return dx\n",
                        "        return dx * g\n")
    assert "GS222" in {f.code for f in lint(source=alone)}


@pytest.fixture(scope="module")
def layers():
    """fixtures/inplace_crossmod loaded as a package (its helpers live in another module)."""
    import sys

    root = FIXTURE.parent / "inplace_crossmod"
    spec = importlib.util.spec_from_file_location(
        "inplace_crossmod_fixture", root / "__init__.py", submodule_search_locations=[str(root)])
    package = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = package
    try:
        spec.loader.exec_module(package)
        return importlib.import_module(f"{spec.name}.layers")
    finally:
        for name in [n for n in sys.modules if n.startswith(spec.name)]:
            del sys.modules[name]


def test_writes_through_imported_helpers_change_the_callers_tensors(layers):
    found = {(Path(f.path).name, f.line, f.code)
             for f in lint(FIXTURE.parent / "inplace_crossmod", config=False)}
    torch.manual_seed(0)
    x, cos, sin = torch.randn(2, 4), torch.randn(2, 2), torch.randn(2, 2)
    before = x.clone()
    layers.Rotary.apply(x, cos, sin, True)
    assert not torch.equal(x, before)  # the caller's x was overwritten
    text = (FIXTURE.parent / "inplace_crossmod" / "layers.py").read_text().splitlines()
    assert ("layers.py", next(i for i, t in enumerate(text, 1) if "out=x if inplace" in t),
            "GS217") in found
    g = torch.randn(3)
    kept = g.clone()
    layers.NormalizeGrad.backward(None, g)
    torch.testing.assert_close(g, kept / kept.norm())  # grad_output changed in place
    y = torch.randn(3)
    seen = y.clone()
    layers.ScaleInto.apply(y, 2.0)
    assert torch.equal(y, seen)  # the near miss leaves its input alone
    x = torch.randn(2, 4)
    seen = x.clone()
    layers.OptionOff.apply(x, 2.0)
    assert torch.equal(x, seen)  # options off: nothing written, nothing reported
    layers.OptionPassedOn.apply(x, 3.0, True)
    torch.testing.assert_close(x, seen * 3.0 * 0.5)  # the caller's x: scaled, then halved
    assert not [f for f in found if f[2] == "GS101"]
    (line,) = [n for (_, n, code) in found if code == "GS102"]
    assert "normalize_(g)" in text[line - 1]


def test_gradient_gated_by_a_number_flag_is_never_computed(mod, codes):
    x, w, b = _x(4, 3), _x(3), _x(3).detach().requires_grad_()
    ref = torch.autograd.grad((x * w + b + 1e-5).pow(2).sum(), (x, w, b))
    out = mod.AffineShiftedFlag.apply(x, w, b, 1e-5)
    got = torch.autograd.grad(out.pow(2).sum(), (x, w, b), allow_unused=True,
                              materialize_grads=False)
    torch.testing.assert_close(got[:2], ref[:2])
    assert got[2] is None  # the bias silently gets no gradient
    shared = torch.autograd.grad(mod.AffineSharedFlag.apply(x, w, b, 1e-5).pow(2).sum(), (x, w, b))
    torch.testing.assert_close(shared, ref)
    assert _reported(codes, "GS124", "AffineShiftedFlag", "AffineUnpackedFlags")
    assert _reported(codes, "GS124", "AffineUnpackedFlags", "AffineSharedFlag")
    assert not _reported(codes, "GS124", "AffineSharedFlag", None)
    a, rel = _x(3, 3), _x(3, 3).detach().requires_grad_()
    (got,) = torch.autograd.grad(mod.RelativeBias.apply(a, 2.0, rel, True)[:, 0].sum(), rel,
                                 allow_unused=True, materialize_grads=False)
    (want,) = torch.autograd.grad((a * 2.0 + rel).tril().softmax(-1)[:, 0].sum(), rel)
    assert got is None and want.abs().sum() > 0  # rel silently gets no gradient
    assert _reported(codes, "GS124", "RelativeBias", "AffineSharedFlag")
