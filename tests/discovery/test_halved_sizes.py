"""A plain-PyTorch Function that halves a size it reads off a tensor (a rotary embedding's
``rotate_half``: ``x[..., : x.shape[-1] // 2]``) is written for an even last dimension; the
"other shapes" set keeps it even (an odd one gave corpus 13's mojo_opset RoPE a false
gradient-mismatch: its halves differ, and the transpose written for equal halves is not the
transpose of that forward). A planted wrong backward still fails, and a Function that does not
halve a size still gets an odd size.

Reference: autograd of the same rotation written with torch operations."""

from __future__ import annotations

import json
import textwrap

import torch

from gradsmith.cli import main
from gradsmith.discovery.halves import halves_sizes

SOURCE = """
import torch
from torch.autograd import Function


class Rope(Function):
    @staticmethod
    def _rotate_half(x):
        return torch.cat((-x[..., x.shape[-1] // 2:], x[..., : x.shape[-1] // 2]), dim=-1)

    @staticmethod
    def _inverse(x):
        half = x.size(-1) // 2
        return torch.cat((x[..., half:], -x[..., :half]), dim=-1)

    @staticmethod
    def forward(ctx, q, cos, sin):
        ctx.save_for_backward(cos, sin)
        return q * cos + Rope._rotate_half(q) * sin

    @staticmethod
    def backward(ctx, g):
        cos, sin = ctx.saved_tensors
        return g * cos + Rope._inverse(g * sin), None, None


class WrongRope(Rope):
    @staticmethod
    def backward(ctx, g):
        cos, sin = ctx.saved_tensors
        return g * cos + Rope._rotate_half(g * sin), None, None  # not the transpose


class Scale(Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        n = len(x) // 2  # a count halved, not a size read off a tensor
        return x * w + n

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w, g * x
"""


def _rotate_half(x):
    return torch.cat((-x[..., x.shape[-1] // 2:], x[..., : x.shape[-1] // 2]), dim=-1)


def test_reference_transpose_of_the_rotation():
    """The case's backward is autograd's at an even size, and is not at an odd one."""
    for n, agrees in ((6, True), (5, False)):
        q = torch.randn(2, n, dtype=torch.float64, requires_grad=True)
        cos, sin, g = (torch.randn(2, n, dtype=torch.float64) for _ in range(3))
        (want,) = torch.autograd.grad(q * cos + _rotate_half(q) * sin, q, g)
        h, gs = n // 2, g * sin
        got = g * cos + torch.cat((gs[..., h:], -gs[..., :h]), dim=-1)
        assert torch.allclose(want, got) is agrees


def test_halving_is_read_in_helpers_and_only_on_sizes(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "halved_case.py").write_text(textwrap.dedent(SOURCE))
    import halved_case

    assert halves_sizes(halved_case.Rope.apply)
    assert not halves_sizes(halved_case.Scale.apply)


def test_rope_passes_at_even_sizes_and_a_wrong_backward_fails(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rope_ops.py").write_text(textwrap.dedent(SOURCE))
    main(["check", "rope_ops.py", "--no-isolate", "--no-compat", "--format", "json"])
    rows = {r["name"].split("::")[1]: r for r in json.loads(capsys.readouterr().out)["results"]}
    assert rows["Rope"]["verdict"] == "pass", rows["Rope"]
    assert "other shapes" in rows["Rope"]["inputs"], rows["Rope"]["inputs"]
    sets = rows["Rope"]["repro"]["sets"] if rows["Rope"].get("repro") else []
    for s in sets:
        assert all(a["shape"][-1] % 2 == 0 for a in s["args"] if a.get("shape")), s
    codes = {f["code"] for f in rows["WrongRope"]["report"]["findings"]
             if f["severity"] == "error"}
    assert rows["WrongRope"]["verdict"] == "fail" and "gradient-mismatch" in codes
    assert rows["Scale"]["verdict"] == "pass"
    assert "(2, 5)" in rows["Scale"]["inputs"], rows["Scale"]["inputs"]
