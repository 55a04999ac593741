"""A Function that branches on a tensor's rank is also checked on the unbatched side, and a
system solved through ``lu_factor``/``lu_solve`` is synthesised square.

Reference: ``torch.linalg.solve`` under autograd (the gradient of x = A^{-1} b)."""

from __future__ import annotations

import json
import textwrap

import torch

from gradsmith.cli import main

SOURCE = """
import torch


class LUSolve(torch.autograd.Function):
    '''x = A^{-1} b through an LU factorisation; batched (B, n, n) or a single (n, n) system.'''

    @staticmethod
    def forward(ctx, A, b):
        LU, P = torch.linalg.lu_factor(A)
        x = torch.linalg.lu_solve(LU, P, b)
        ctx.save_for_backward(LU, P, x)
        return x

    @staticmethod
    def backward(ctx, g):
        LU, P, x = ctx.saved_tensors
        db = torch.linalg.lu_solve(LU, P, g, adjoint=True)
        xt = x.transpose(-1, -2) if x.dim() == 2 else torch.transpose(x, 1, 2)
        return -db @ xt, db


class BrokenBatched(LUSolve):
    @staticmethod
    def backward(ctx, g):
        LU, P, x = ctx.saved_tensors
        db = torch.linalg.lu_solve(LU, P, g, adjoint=True)
        xt = x.mT if x.dim() == 2 else x.transpose  # batched: the method itself
        return -db @ xt, db


class WrongBatched(LUSolve):
    @staticmethod
    def backward(ctx, g):
        LU, P, x = ctx.saved_tensors
        db = torch.linalg.lu_solve(LU, P, g, adjoint=True)
        xt = x.mT if x.dim() == 2 else 2 * torch.transpose(x, 1, 2)  # batched: twice
        return -db @ xt, db
"""


def test_reference_gradient_of_the_solve():
    A = torch.randn(3, 3, dtype=torch.float64) + 4 * torch.eye(3, dtype=torch.float64)
    b = torch.randn(3, 2, dtype=torch.float64)
    g = torch.randn(3, 2, dtype=torch.float64)
    a_, b_ = A.clone().requires_grad_(), b.clone().requires_grad_()
    want_a, want_b = torch.autograd.grad(torch.linalg.solve(a_, b_), (a_, b_), g)
    x = torch.linalg.solve(A, b)
    db = torch.linalg.solve(A.mT, g)
    torch.testing.assert_close(want_b, db)
    torch.testing.assert_close(want_a, -db @ x.mT)


def test_both_sides_of_a_rank_branch_are_checked(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "lu_ops.py").write_text(textwrap.dedent(SOURCE))
    main(["check", "lu_ops.py", "--no-isolate", "--no-compat", "--format", "json"])
    rows = {r["name"].split("::")[1]: r for r in json.loads(capsys.readouterr().out)["results"]}
    # the synthesised systems are single (n, n) ones: only the batched set reaches the
    # planted defects
    right = rows["LUSolve"]
    assert right["verdict"] == "pass", right
    assert "batched: shapes" in right["inputs"] and "positive definite" in right["inputs"]

    def errors(name):
        return {f["code"] for f in rows[name]["report"]["findings"] if f["severity"] == "error"}

    assert rows["BrokenBatched"]["verdict"] == "fail"
    assert errors("BrokenBatched") == {"backward-error"}
    assert rows["WrongBatched"]["verdict"] == "fail"
    assert "gradient-mismatch" in errors("WrongBatched")


class _AtLeastMatrices(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        assert x.dim() >= 2  # true for both ranks: no other side to check
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


def test_a_rank_test_both_ranks_pass_adds_no_set():
    from gradsmith.discovery.rank_branches import unbatched

    assert unbatched(_AtLeastMatrices.apply, ((2, 3, 4),)) == []
    assert unbatched(_AtLeastMatrices.apply, ((3, 4),)) == []
