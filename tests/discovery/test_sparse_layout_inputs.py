"""Sparse operands in the layout forward reads (``A.ccol_indices()`` in a helper: CSC) are
synthesised in that layout and checked on their stored values, in the CLI path too.

Reference: autograd of the same expressions on dense tensors, restricted to the stored
entries (the only ones a sparse operand's caller can move)."""

from __future__ import annotations

import json
import textwrap

import pytest
import torch

from gradsmith.cli import main
from gradsmith.discovery.sparse_layouts import sparse_layouts

pytestmark = [pytest.mark.filterwarnings("ignore:Sparse C:UserWarning"),
              pytest.mark.filterwarnings("ignore:Sparse invariant:UserWarning")]

SOURCE = """
import torch
from torch.autograd import Function


def parts(M):  # what a conversion to scipy's csc_matrix reads
    return M.values(), M.row_indices(), M.ccol_indices()


def row_norms(A, p):
    vals, rows, _ = parts(A)
    return torch.zeros(A.shape[0], 1, dtype=vals.dtype).index_add_(
        0, rows, vals.abs().pow(p)[:, None]).pow(1 / p)


class RowNorm(Function):
    @staticmethod
    def forward(ctx, A, p):
        assert p == 1 or p == 2
        ctx.p, N = p, row_norms(A, p)
        ctx.save_for_backward(A.to_dense(), N)
        return N

    @staticmethod
    def backward(ctx, g):
        d, N = ctx.saved_tensors
        return (torch.sign(d) * g if ctx.p == 1 else d * g / N), None


class WrongRowNorm(RowNorm):
    @staticmethod
    def backward(ctx, g):
        d, N = ctx.saved_tensors
        return (d != 0) * g, None  # the sign of each entry is lost


class RowNormalize(Function):
    @staticmethod
    def forward(ctx, A, N):
        vals, rows, ccol = parts(A)
        ctx.save_for_backward(A.to_dense(), N)
        return torch.sparse_csc_tensor(ccol, rows, vals / N[rows, 0], A.shape)

    @staticmethod
    def backward(ctx, g):
        d, N = ctx.saved_tensors
        g = g if g.layout == torch.strided else g.to_dense()
        return g / N, -(d * g).sum(1, keepdim=True) / N ** 2


class WrongRowNormalize(RowNormalize):
    @staticmethod
    def backward(ctx, g):
        d, N = ctx.saved_tensors
        g = g if g.layout == torch.strided else g.to_dense()
        return g / N, (d * g).sum(1, keepdim=True) / N ** 2  # dL/dN's sign flipped
"""


def _helper(M):
    return M.crow_indices()


def test_layouts_are_read_through_helpers_and_layout_comparisons():
    def forward(ctx, A, B, C, x):
        assert B.layout == torch.sparse_csc
        _helper(A)
        return C.indices(), x.sum()

    assert sparse_layouts(forward, ["A", "B", "C", "x"]) == {"A": "csr", "B": "csc",
                                                            "C": "coo"}


def test_reference_gradients_of_the_case():
    """Closed forms in the case's backwards agree with autograd on the stored entries."""
    d = torch.tensor([[1.5, 0, -2.0], [0, -3.0, 1.0]], dtype=torch.float64)
    mask = d != 0
    leaf = d.clone().requires_grad_()
    n = torch.rand(2, 1, dtype=torch.float64) + 0.5
    g = torch.randn(2, 1, dtype=torch.float64)
    (want,) = torch.autograd.grad(leaf.abs().sum(1, keepdim=True), leaf, g)
    torch.testing.assert_close(want[mask], (torch.sign(d) * g)[mask])
    assert not torch.allclose(want[mask], (mask * g)[mask])
    nl = n.clone().requires_grad_()
    gg = torch.randn(2, 3, dtype=torch.float64) * mask
    gd, gn = torch.autograd.grad(leaf / nl, (leaf, nl), gg)
    torch.testing.assert_close(gd[mask], (gg / n)[mask])
    torch.testing.assert_close(gn, -(d * gg).sum(1, keepdim=True) / n ** 2)


def test_csc_operands_are_synthesised_and_checked_in_the_cli(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "csc_ops.py").write_text(textwrap.dedent(SOURCE))
    main(["check", "csc_ops.py", "--no-isolate", "--no-compat", "--format", "json"])
    rows = {r["name"].split("::")[1]: r for r in json.loads(capsys.readouterr().out)["results"]}
    for name in ("RowNorm", "RowNormalize"):
        assert rows[name]["verdict"] == "pass", rows[name]
        assert "CSC" in rows[name]["inputs"], rows[name]["inputs"]
    for name in ("WrongRowNorm", "WrongRowNormalize"):
        codes = {f["code"] for f in rows[name]["report"]["findings"] if f["severity"] == "error"}
        assert rows[name]["verdict"] == "fail" and codes == {"gradient-mismatch"}, rows[name]
        (a, _) = rows[name]["repro"]["sets"][0]["args"]
        assert a["layout"] == "sparse_csc" and len(a["shape"]) == 2 and a["values"]


def test_the_repro_script_rebuilds_the_csc_operand(tmp_path, capsys, monkeypatch):
    """The plain-PyTorch script replays the finding on the operand's stored values."""
    import subprocess
    import sys

    monkeypatch.chdir(tmp_path)
    (tmp_path / "csc_ops.py").write_text(textwrap.dedent(SOURCE))
    main(["check", "csc_ops.py::WrongRowNorm", "--no-isolate", "--no-compat",
          "--repro", str(tmp_path / "repro")])
    capsys.readouterr()
    (script,) = (tmp_path / "repro").glob("*.py")
    ran = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=300, cwd=tmp_path)
    assert "REPRODUCED" in ran.stdout and "gradsmith: " in ran.stdout, ran.stdout + ran.stderr
