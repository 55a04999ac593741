"""Eigen-decompositions written for complex normal or unitary matrices (backward returns a
complex gradient for the real matrix synthesised, forward's outputs are complex) are checked on
such matrices instead of being skipped; a unitary one along the directions that keep it
unitary. A wrong backward still fails."""

from __future__ import annotations

import pytest
import torch
from source_cases import check_rows, error_codes

import gradsmith
from gradsmith.discovery.complex_matrices import normal_matrix, says_unitary

CASE = """
import torch


def _nabla(u):
    delta = u.unsqueeze(-2) - u.unsqueeze(-1)
    return torch.where(delta == 0, torch.zeros_like(delta), 1 / delta)


class NormalEig(torch.autograd.Function):
    \"\"\"Eigen-decomposition of a normal matrix: V^-1 = V^H.\"\"\"

    @staticmethod
    def forward(ctx, matrix):
        u, v = torch.linalg.eig(matrix)
        ctx.save_for_backward(u, v)
        return u, v

    @staticmethod
    def backward(ctx, grad_u, grad_v):
        u, v = ctx.saved_tensors
        inner = v.adjoint() @ grad_v
        return v @ (torch.diag_embed(grad_u) + CONJ(_nabla(u)) * inner) @ v.adjoint()


class UnitaryEig(torch.autograd.Function):
    \"\"\"Eigen-decomposition specialized for unitary matrices.\"\"\"

    @staticmethod
    def forward(ctx, matrix):
        u, v = torch.linalg.eig(matrix)
        ctx.save_for_backward(u, v)
        return u, v

    @staticmethod
    def backward(ctx, grad_u, grad_v):
        u, v = ctx.saved_tensors
        inner = v.adjoint() @ grad_v
        inner = (inner - inner.adjoint()) / 2
        grad_u = (grad_u - u * u * grad_u.conj()) / 2
        return v @ (torch.diag_embed(grad_u) + CONJ(_nabla(u)) * inner) @ v.adjoint()
"""


def _rows(tmp_path, conj: str) -> dict[str, dict]:
    name = "correct" if conj == "torch.conj" else "planted"
    return check_rows(tmp_path / f"eig_{name}.py", CASE.replace("CONJ", conj))


def _loss(vals: torch.Tensor, vecs: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Invariant under each eigenvector's phase: eigenvalues and |v_k^H w_k|^2."""
    overlap = (vecs.conj() * w).sum(-2).abs() ** 2
    return (vals.real * 1.3 + vals.imag * 0.7).sum() + overlap.sum()


@pytest.mark.parametrize("unitary", [False, True], ids=["normal", "unitary"])
def test_the_backward_agrees_with_torchs_eig(tmp_path, unitary):
    """Independent reference: torch.linalg.eig's own autograd through a phase-invariant loss;
    for a unitary input, along the directions that keep it unitary (U expm(K - K^H))."""
    module = {}
    exec(compile(CASE.replace("CONJ", "torch.conj"), "case", "exec"), module)  # noqa: S102
    fn = module["UnitaryEig" if unitary else "NormalEig"]
    a = normal_matrix(3, (), 3, unitary)
    gen = torch.Generator().manual_seed(4)
    w = torch.randn(3, 3, dtype=torch.complex128, generator=gen)
    k = torch.randn(3, 3, dtype=torch.complex128, generator=gen)
    direction = a @ (k - k.mH) if unitary else k
    t1, t2 = (torch.zeros((), dtype=torch.float64, requires_grad=True) for _ in range(2))
    (want,) = torch.autograd.grad(_loss(*torch.linalg.eig(a + t1 * direction), w), t1)
    (got,) = torch.autograd.grad(_loss(*fn.apply(a + t2 * direction), w), t2)
    torch.testing.assert_close(got, want)


def test_normal_and_unitary_matrices_are_synthesised_and_pass(tmp_path):
    rows = _rows(tmp_path, "torch.conj")
    for name, kind in (("NormalEig", "normal"), ("UnitaryEig", "unitary")):
        row = rows[name]
        assert row["verdict"] == "pass", (name, row.get("reason"), row["report"]["findings"])
        assert f"complex128 (4, 4) {kind}" in row["inputs"]
    notes = {f["code"] for f in rows["UnitaryEig"]["report"]["findings"]}
    assert {"eigenvector-directions", "gauge-aligned"} <= notes


def test_a_wrong_backward_on_them_still_fails(tmp_path):
    for name, row in _rows(tmp_path, "").items():  # 1/(u_j - u_i) without its conjugate
        assert row["verdict"] == "fail", name
        assert "gradient-mismatch" in error_codes(row), name


def test_the_synthesised_matrices_are_normal_and_unitary():
    a = normal_matrix(4, (2,), 0, unitary=False)
    torch.testing.assert_close(a @ a.mH, a.mH @ a)
    u = normal_matrix(4, (), 1, unitary=True)
    torch.testing.assert_close(u @ u.mH, torch.eye(4, dtype=u.dtype))
    vals = torch.linalg.eigvals(u)
    gaps = (vals.unsqueeze(-1) - vals.unsqueeze(-2)).abs() + torch.eye(4)
    assert float(gaps.min()) > 0.5


def test_unitary_is_read_from_the_docstring_not_from_unitarily():
    class Normal(torch.autograd.Function):
        """For normal matrices, which are unitarily diagonalizable."""

    class Unitary(torch.autograd.Function):
        """Similar to `NormalMatrixEig`, but specialized for unitary matrices."""

    assert not says_unitary(Normal) and says_unitary(Unitary)


class _RiemannianIdentity(torch.autograd.Function):
    """Identity on the special unitary group; backward projects the gradient onto its tangent
    space (an estimator: not the Euclidean gradient of the identity)."""

    @staticmethod
    def forward(ctx, u):
        ctx.save_for_backward(u)
        return u.clone()

    @staticmethod
    def backward(ctx, g):
        (u,) = ctx.saved_tensors
        m = g @ u.mH
        return (m - m.mH) / 2 @ u


def test_a_unitary_docstring_alone_does_not_restrict_a_riemannian_estimator():
    u = normal_matrix(3, (), 5, unitary=True)
    g = torch.randn(3, 3, dtype=torch.complex128, generator=torch.Generator().manual_seed(3))
    assert says_unitary(_RiemannianIdentity)
    leaf = u.clone().requires_grad_()
    (grad,) = torch.autograd.grad(_RiemannianIdentity.apply(leaf), leaf, g)
    assert float((grad - g).abs().max()) > 0.1  # the identity's true gradient is g itself
    report = gradsmith.check(_RiemannianIdentity, u, compat=False)
    assert not report.passed and "eigenvector-directions" not in report.codes()
