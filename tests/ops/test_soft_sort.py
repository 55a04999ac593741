"""soft_rank / soft_sort: values against an independent sequential PAV, both solvers, limits,
invariants, torchsort (when installed), bad input, modules and the native-build fallback."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import gradsmith.nn as N
from gradsmith import GradsmithError
from gradsmith.functional import soft_rank, soft_sort
from gradsmith.ops import _pav_native
from gradsmith.ops._isotonic import isotonic_kl, isotonic_l2

sys.path.insert(0, str(Path(__file__).resolve().parent))
from catalog import _pav_blocks, _soft_rank_reference, _soft_sort_reference  # noqa: E402

SOLVERS = ["native", "torch"]


@pytest.fixture(params=SOLVERS)
def solver(request):
    if request.param == "native":
        if _pav_native.load() is None:
            pytest.skip("no C compiler: the native PAV kernel is unavailable")
        yield
    else:
        with _pav_native.torch_solver():
            yield


def _data(shape, seed, scale=1.0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed),
                       dtype=torch.float64) * scale


@pytest.mark.parametrize("regularization", ["l2", "kl"])
@pytest.mark.parametrize("strength", [0.01, 1.0, 10.0])
@pytest.mark.parametrize("shape", [(1,), (3, 17), (2, 3, 40)])
def test_values_match_independent_reference(solver, regularization, strength, shape):
    x = _data(shape, seed=len(shape) * 7 + shape[-1], scale=3.0)
    for op, ref in ((soft_rank, _soft_rank_reference), (soft_sort, _soft_sort_reference)):
        torch.testing.assert_close(op(x, regularization, strength),
                                   ref(x, regularization, strength), atol=1e-9, rtol=1e-9)


@pytest.mark.parametrize("regularization", ["l2", "kl"])
def test_gradients_match_independent_reference(solver, regularization):
    x = _data((4, 30), seed=3, scale=2.0)
    v = _data((4, 30), seed=4)
    for op, ref in ((soft_rank, _soft_rank_reference), (soft_sort, _soft_sort_reference)):
        a = x.clone().requires_grad_()
        b = x.clone().requires_grad_()
        (op(a, regularization, 0.5) * v).sum().backward()
        (ref(b, regularization, 0.5) * v).sum().backward()
        torch.testing.assert_close(a.grad, b.grad, atol=1e-9, rtol=1e-9)


def _sequential_fit(y, w=None):
    """Per-row fit from the catalog's sequential PAV blocks (plain Python decisions)."""
    rows = []
    for i, row in enumerate(y):
        wr = None if w is None else w[i]
        blocks = _pav_blocks(row.tolist(), None if wr is None else wr.tolist())
        vals = [row[a:b].mean() if wr is None else row[a:b].logsumexp(0) - wr[a:b].logsumexp(0)
                for a, b in blocks]
        rows.append(torch.cat([v.expand(b - a) for v, (a, b) in zip(vals, blocks)]))
    return torch.stack(rows)


@pytest.mark.parametrize("scale", [0.001, 0.05, 1.0, 30.0])
def test_isotonic_solvers_on_long_rows_with_ties(solver, scale):
    # Long rows where a big pooled block absorbs its neighbours one by one (the hard case for a
    # round-based solver), plus exact ties.
    y = (_data((3, 600), seed=11) * scale).sort(descending=True).values
    y = y - torch.arange(600, 0, -1, dtype=torch.float64)
    y[1, 100:140] = 5.0
    torch.testing.assert_close(isotonic_l2(y)[0], _sequential_fit(y), atol=1e-9, rtol=1e-9)
    s = (_data((3, 600), seed=12) * scale * 50).sort(descending=True).values
    logw = torch.arange(600, 0, -1, dtype=torch.float64).log().expand(3, 600)
    torch.testing.assert_close(isotonic_kl(s, logw)[0], _sequential_fit(s, logw),
                               atol=1e-9, rtol=1e-9)


def test_native_and_torch_solvers_give_identical_blocks():
    if _pav_native.load() is None:
        pytest.skip("no C compiler")
    y = _data((5, 300), seed=5, scale=20.0).sort(descending=True).values
    y = y - torch.arange(300, 0, -1, dtype=torch.float64)
    native = isotonic_l2(y)
    with _pav_native.torch_solver():
        fallback = isotonic_l2(y)
    assert torch.equal(native[1], fallback[1])
    torch.testing.assert_close(native[0], fallback[0], atol=1e-12, rtol=1e-12)


def test_small_strength_gives_hard_rank_and_sort():
    x = _data((4, 25), seed=6)
    hard_rank = x.argsort(-1).argsort(-1).double() + 1
    torch.testing.assert_close(soft_rank(x, regularization_strength=1e-4), hard_rank)
    torch.testing.assert_close(soft_rank(x, "kl", 1e-4), hard_rank)
    torch.testing.assert_close(soft_sort(x, regularization_strength=1e-4), x.sort(-1).values)


def test_large_strength_flattens_to_the_mean():
    x = _data((3, 9), seed=7)
    torch.testing.assert_close(soft_rank(x, regularization_strength=1e6),
                               torch.full_like(x, 5.0), atol=1e-5, rtol=0)


def test_l2_invariants_sums_and_order():
    x = _data((6, 33), seed=8, scale=2.0)
    ranks, values = soft_rank(x, regularization_strength=0.7), soft_sort(x, "l2", 0.7)
    torch.testing.assert_close(ranks.sum(-1), torch.full((6,), 33 * 34 / 2, dtype=x.dtype))
    torch.testing.assert_close(values.sum(-1), x.sum(-1))
    assert (values.diff(dim=-1) >= -1e-12).all()  # ascending
    # The ranks keep the order of x.
    assert torch.equal(ranks.argsort(-1), x.argsort(-1))


def test_rank_gradient_of_the_sum_is_zero():
    x = _data((2, 12), seed=9).requires_grad_()
    soft_rank(x, regularization_strength=0.5).sum().backward()
    torch.testing.assert_close(x.grad, torch.zeros_like(x), atol=1e-12, rtol=0)


def test_matches_torchsort_when_installed():
    torchsort = pytest.importorskip("torchsort")
    x = _data((8, 200), seed=10, scale=2.0)
    for reg in ("l2", "kl"):
        for eps in (0.1, 1.0):
            torch.testing.assert_close(soft_rank(x, reg, eps), torchsort.soft_rank(x, reg, eps),
                                       atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(soft_sort(x, reg, eps), torchsort.soft_sort(x, reg, eps),
                                       atol=1e-5, rtol=1e-5)


def test_float32_and_bfloat16_follow_float64():
    x = _data((3, 50), seed=13, scale=4.0)
    exact = soft_sort(x, "l2", 0.5)
    torch.testing.assert_close(soft_sort(x.float(), "l2", 0.5), exact.float(), atol=1e-5,
                               rtol=1e-5)
    low = soft_sort(x.bfloat16(), "l2", 0.5)
    assert low.dtype == torch.bfloat16
    torch.testing.assert_close(low.double(), soft_sort(x.bfloat16().double(), "l2", 0.5),
                               atol=0.05, rtol=0.01)


@pytest.mark.parametrize(("call", "match"), [
    (lambda: soft_rank([1.0, 2.0]), "soft_rank: x must be a torch.Tensor, got list"),
    (lambda: soft_rank(torch.arange(4)), "soft_rank: x must be a floating-point tensor"),
    (lambda: soft_sort(torch.tensor(1.0)), "soft_sort: x must have at least 1 dimension"),
    (lambda: soft_rank(torch.ones(3), "l1"), "regularization must be one of 'l2', 'kl', got 'l1'"),
    (lambda: soft_sort(torch.ones(3), "l2", 0.0), "regularization_strength must be > 0, got 0.0"),
    (lambda: soft_sort(torch.ones(3), "kl", -1), "regularization_strength must be > 0, got -1"),
    (lambda: soft_rank(torch.ones(3), "l2", float("nan")), "regularization_strength must be finite"),
    (lambda: N.SoftRank("entropy"), "SoftRank: regularization must be one of"),
    (lambda: N.SoftSort(regularization_strength=-2.0), "SoftSort: regularization_strength must be > 0"),
])
def test_bad_input_raises_gradsmith_error(call, match):
    with pytest.raises(GradsmithError, match=match):
        call()


def test_modules_call_the_functions_and_read_like_their_constructor():
    x = _data((2, 8), seed=14)
    assert repr(N.SoftRank("kl", 0.5)) == "SoftRank(regularization='kl', regularization_strength=0.5)"
    torch.testing.assert_close(N.SoftRank("kl", 0.5)(x), soft_rank(x, "kl", 0.5))
    torch.testing.assert_close(N.SoftSort()(x), soft_sort(x))


def test_native_build_failure_falls_back_to_torch(monkeypatch, tmp_path):
    monkeypatch.setattr(_pav_native, "_STATE", {})
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("CC", str(tmp_path / "no-such-compiler"))
    assert _pav_native.load() is None and _pav_native.backend() == "torch"
    x = _data((2, 10), seed=15)
    torch.testing.assert_close(soft_rank(x, "l2", 0.3), _soft_rank_reference(x, "l2", 0.3))
    monkeypatch.setattr(_pav_native, "_STATE", {})
    monkeypatch.setenv("GRADSMITH_PAV", "native")
    with pytest.raises(RuntimeError, match="GRADSMITH_PAV=native but the PAV kernel failed"):
        _pav_native.load()


def test_env_var_forces_the_torch_solver(monkeypatch):
    monkeypatch.setenv("GRADSMITH_PAV", "torch")
    assert _pav_native.backend() == "torch"


def test_native_block_mean_equals_the_torch_path():
    if _pav_native.load() is None:
        pytest.skip("no C compiler")
    from gradsmith.ops._isotonic import block_mean

    g = _data((4, 50), seed=16)
    block = (torch.rand(4, 50, generator=torch.Generator().manual_seed(17)) < 0.3).long()
    block = block.cumsum(-1) - block[:, :1]  # row-local, non-decreasing ids
    native = block_mean(g, block)
    with _pav_native.torch_solver():
        fallback = block_mean(g, block)
    torch.testing.assert_close(native, fallback, atol=1e-12, rtol=1e-12)


_SPECIALS = [0.0, -0.0, 1.0, -1.0, float("inf"), -float("inf"), float("nan"), 1e-30, -1e-30]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("n", [1, 2, 3, 255, 256, 257, 1000])
def test_native_argsort_is_torch_stable_descending_sort(dtype, n):
    lib = _pav_native.load()
    if lib is None:
        pytest.skip("no C compiler")
    gen = torch.Generator().manual_seed(n)
    x = torch.randn(4, n, generator=gen, dtype=dtype)
    x[1] = x[1].round()  # many ties: stability decides the order
    x[2] = torch.tensor(_SPECIALS, dtype=dtype)[torch.randint(len(_SPECIALS), (n,), generator=gen)]
    x[3] = 7.0  # every digit shared: all radix passes skipped
    perm = _pav_native.argsort_desc(lib, x)
    expected = torch.sort(x, dim=-1, descending=True, stable=True).indices
    assert torch.equal(perm, expected)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(width=32, allow_nan=True, allow_infinity=True), min_size=1,
                max_size=300))
def test_native_argsort_property(values):
    lib = _pav_native.load()
    if lib is None:
        pytest.skip("no C compiler")
    for dtype in (torch.float32, torch.float64):
        x = torch.tensor([values], dtype=dtype)
        expected = torch.sort(x, dim=-1, descending=True, stable=True).indices
        assert torch.equal(_pav_native.argsort_desc(lib, x), expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_native_block_softmax_sum_equals_the_torch_composition(dtype):
    if _pav_native.load() is None:
        pytest.skip("no C compiler")
    from gradsmith.ops._isotonic import block_softmax, block_softmax_sum, block_sum

    gen = torch.Generator().manual_seed(18)
    s = (torch.randn(4, 60, generator=gen, dtype=torch.float64) * 30).to(dtype)
    g = torch.randn(4, 60, generator=gen, dtype=torch.float64).to(dtype)
    block = (torch.rand(4, 60, generator=gen) < 0.2).long().cumsum(-1)
    block = block - block[:, :1]
    expected = block_softmax(s.double(), block) * block_sum(g.double(), block)
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    torch.testing.assert_close(block_softmax_sum(s, g, block).double(), expected,
                               atol=tol, rtol=tol)


@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 5), (2, 0, 4)])
@pytest.mark.parametrize("regularization", ["l2", "kl"])
def test_empty_inputs_give_empty_outputs_and_gradients(solver, shape, regularization):
    for op in (soft_rank, soft_sort):
        x = torch.randn(*shape, requires_grad=True)
        out = op(x, regularization)
        out.sum().backward()
        assert out.shape == x.shape and out.dtype == x.dtype
        assert x.grad is not None and x.grad.shape == x.shape


@pytest.mark.parametrize("fn", [soft_rank, soft_sort], ids=["soft_rank", "soft_sort"])
def test_registered_examples_have_a_nonzero_gradient(fn):
    # The catalog's rows check backward on these inputs: in the hard regime (no block pools)
    # the true gradient is 0 everywhere and the row compares zeros with zeros (INCOMPLETE).
    # The independent reference says where the gradient is non-zero.
    from gradsmith._example import examples_of

    reference = {soft_rank: _soft_rank_reference, soft_sort: _soft_sort_reference}[fn]
    for ex in examples_of(fn):
        x, regularization, strength = ex.make_args()
        v = torch.randn(x.shape, generator=torch.Generator().manual_seed(3), dtype=x.dtype)
        xr = x.detach().clone().requires_grad_()
        (want,) = torch.autograd.grad((reference(xr, regularization, strength) * v).sum(), xr)
        assert want.abs().max() > 1e-3, ex.name
        xg = x.detach().clone().requires_grad_()
        (got,) = torch.autograd.grad((fn(xg, regularization, strength) * v).sum(), xg)
        torch.testing.assert_close(got, want)
