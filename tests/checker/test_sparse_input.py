"""A sparse operand held constant (backward returns None for it by design) works end to end
in ``gradsmith check``: its values are recorded for the repro record (a sparse tensor has
no reshape: this was an internal error), and no check crashes on it."""

from __future__ import annotations

import json
import textwrap

import torch

from gradsmith.cli import main

SOURCE = """
import torch
from torch.autograd import Function
import gradsmith


def operands():
    i = torch.tensor([[0, 1, 2], [2, 0, 1]])
    v = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    a = torch.sparse_coo_tensor(i, v, (3, 3), check_invariants=True)
    x = torch.randn(3, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    return a, x.requires_grad_()


@gradsmith.example(operands)
class SpMM(Function):
    @staticmethod
    def forward(ctx, a, x):
        ctx.save_for_backward(a)
        return torch.sparse.mm(a, x)

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        return None, torch.sparse.mm(a.t(), g)


@gradsmith.example(operands)
class WrongSpMM(Function):
    @staticmethod
    def forward(ctx, a, x):
        ctx.save_for_backward(a)
        return torch.sparse.mm(a, x)

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        return None, torch.sparse.mm(a, g)  # a instead of its transpose
"""


def test_the_reference_gradients_of_the_sparse_product():
    i = torch.tensor([[0, 1, 2], [2, 0, 1]])
    a = torch.sparse_coo_tensor(i, torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64), (3, 3),
                                check_invariants=True)
    x = torch.randn(3, 2, dtype=torch.float64, requires_grad=True)
    g = torch.randn(3, 2, dtype=torch.float64)
    (want,) = torch.autograd.grad(a.to_dense() @ x, x, g)
    assert torch.allclose(torch.sparse.mm(a.t(), g), want)
    assert not torch.allclose(torch.sparse.mm(a, g), want)


def test_a_sparse_input_is_checked_in_the_cli(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sparse_ops.py").write_text(textwrap.dedent(SOURCE))
    code = main(["check", "sparse_ops.py", "--no-isolate", "--no-compat", "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    rows = {r["name"].split("::")[1]: r for r in doc["results"]}
    assert code == 1 and rows["SpMM"]["verdict"] == "pass", rows["SpMM"]
    assert rows["SpMM"]["error"] is None
    wrong = rows["WrongSpMM"]
    assert wrong["verdict"] == "fail" and wrong["error"] is None, wrong
    codes = {f["code"] for f in wrong["report"]["findings"]}
    assert "gradient-mismatch" in codes and "check-crashed" not in codes
    (a, _) = wrong["repro"]["sets"][0]["args"]
    assert a["layout"] == "sparse_coo" and a["shape"] == [3, 3]
    assert a["values"] == [0.0, 0.0, 1.0, 2.0, 0.0, 0.0, 0.0, 3.0, 0.0]  # dense, row-major
