"""A tensor forward slices another's rows with (``x[cu[i] : cu[i + 1]]``) holds the offsets
of packed sequences: int64, non-decreasing from 0 to the rows of ``x``. Random floats made
``cu.shape[0] - 1`` zero sequences, forward's loop never ran and its ``empty_like`` output
was never filled: corpus 13 dev mojo_opset MojoSWAFunction was INCOMPLETE
(uninitialised-output) blamed on the Function. A planted wrong backward still fails.

Reference: autograd of the per-sequence softmax written with torch operations."""

from __future__ import annotations

import json
import textwrap

import torch

from gradsmith.cli import main
from gradsmith.discovery.hints import Hint
from gradsmith.discovery.integer_kinds import integer_value, read_integer_kinds

SOURCE = """
import torch
from torch.autograd import Function


def _segments(x, cu):
    out = torch.empty_like(x)
    for i in range(cu.shape[0] - 1):
        out[cu[i] : cu[i + 1]] = torch.softmax(x[cu[i] : cu[i + 1]], dim=0)
    return out


class PackedSoftmax(Function):
    @staticmethod
    def forward(ctx, x, cu_seqlens):
        y = _segments(x, cu_seqlens)
        ctx.save_for_backward(y, cu_seqlens)
        return y

    @staticmethod
    def backward(ctx, g):
        y, cu = ctx.saved_tensors
        dx = torch.empty_like(g)
        for i in range(cu.shape[0] - 1):
            yi, gi = y[cu[i] : cu[i + 1]], g[cu[i] : cu[i + 1]]
            dx[cu[i] : cu[i + 1]] = yi * (gi - (yi * gi).sum(0, keepdim=True))
        return dx, None


class WrongPackedSoftmax(PackedSoftmax):
    @staticmethod
    def backward(ctx, g):
        y, cu = ctx.saved_tensors
        return y * (g - (y * g).sum(0, keepdim=True)), None  # sums across sequences
"""


def test_reference_per_sequence_softmax_gradient():
    x = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    g = torch.randn(5, 3, dtype=torch.float64)
    parts = (x[:2].softmax(0), x[2:].softmax(0))
    (want,) = torch.autograd.grad(torch.cat(parts), x, g)
    y = torch.cat(parts).detach()
    mine = torch.cat([y[a:b] * (g[a:b] - (y[a:b] * g[a:b]).sum(0, keepdim=True))
                      for a, b in ((0, 2), (2, 5))])
    torch.testing.assert_close(mine, want)
    assert not torch.allclose(y * (g - (y * g).sum(0, keepdim=True)), want)


def _pieces(q, cu):
    return [q[cu[b] : cu[b + 1]] for b in range(len(cu) - 1)]


def test_offsets_are_read_through_a_helper_and_built_to_the_rows():
    def forward(ctx, q, cu_q):
        return _pieces(q, cu_q)

    hints = {"ctx": Hint(), "q": Hint(), "cu_q": Hint()}
    read_integer_kinds(forward, None, hints, {"cu_q"})
    assert (hints["cu_q"].kind, hints["cu_q"].offsets, hints["cu_q"].rows_of) == (
        "index", True, "q")
    assert not hints["q"].offsets

    class _Slot:
        name, hint = "cu_q", hints["cu_q"]

    for rows, want in ((6, [0, 3, 6]), (3, [0, 1, 3]), (2, [0, 2])):
        value, _ = integer_value(_Slot, (rows, 4), rows, torch.Generator())
        assert value.dtype == torch.int64 and value.tolist() == want


def test_packed_softmax_passes_and_a_wrong_backward_fails(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "packed_ops.py").write_text(textwrap.dedent(SOURCE))
    main(["check", "packed_ops.py", "--no-isolate", "--no-compat", "--format", "json"])
    rows = {r["name"].split("::")[1]: r for r in json.loads(capsys.readouterr().out)["results"]}
    assert rows["PackedSoftmax"]["verdict"] == "pass", rows["PackedSoftmax"]
    assert "offsets" in rows["PackedSoftmax"]["inputs"], rows["PackedSoftmax"]["inputs"]
    wrong = rows["WrongPackedSoftmax"]
    codes = {f["code"] for f in wrong["report"]["findings"] if f["severity"] == "error"}
    assert wrong["verdict"] == "fail" and "gradient-mismatch" in codes, wrong
