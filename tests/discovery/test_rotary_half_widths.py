"""Sizes forward states through another tensor's: a rotary embedding's caches half as wide as the
heads they rotate (``rotary_dim = 2 * cos.shape[-1]; assert rotary_dim <= headdim``), the second
cache shaped like the first (``sin.shape == (s, rotary_dim // 2)``), a dimension fixed by
``three == 3``; and an ``in_place=True`` option whose writes into x and grad_output are what it
asks for (round 13 task w, reduced from corpus 13d's DeepLinkExt rotary fallbacks, skipped on
every layout). Reduced cases written here; the planted wrong backwards FAIL, in place mode too."""

import torch
from source_cases import check_rows, error_codes, load_source

SOURCE = '''
import torch


def _rotate(x1, x2, cos, sin, o1, o2, conj):
    if conj:
        a, b = x1 * cos + x2 * sin, -x1 * sin + x2 * cos
    else:
        a, b = x1 * cos - x2 * sin, x1 * sin + x2 * cos
    o1.copy_(a)
    o2.copy_(b)


class Rotary(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, cos, sin, in_place=False):
        _, seqlen, _, headdim = x.shape
        rotary_seqlen, rotary_dim = cos.shape
        rotary_dim *= 2
        assert rotary_dim <= headdim
        assert seqlen <= rotary_seqlen
        assert sin.shape == (rotary_seqlen, rotary_dim // 2)
        out = x if in_place else torch.empty_like(x)
        x1, x2 = x[..., :rotary_dim].chunk(2, dim=-1)
        o1, o2 = out[..., :rotary_dim].chunk(2, dim=-1)
        c, s = cos[:seqlen, None, :], sin[:seqlen, None, :]
        _rotate(x1, x2, c, s, o1, o2, False)
        if not in_place and rotary_dim < headdim:
            out[..., rotary_dim:].copy_(x[..., rotary_dim:])
        ctx.save_for_backward(cos, sin)
        ctx.in_place = in_place
        return out

    @staticmethod
    def backward(ctx, g):
        cos, sin = ctx.saved_tensors
        seqlen, rotary_dim = g.shape[1], 2 * cos.shape[-1]
        dx = g if ctx.in_place else g.clone()
        g1, g2 = g[..., :rotary_dim].chunk(2, dim=-1)
        d1, d2 = dx[..., :rotary_dim].chunk(2, dim=-1)
        c, s = cos[:seqlen, None, :], sin[:seqlen, None, :]
        _rotate(g1.clone(), g2.clone(), c, {sin}, d1, d2, {conj})
        return dx, None, None, None


class PackedThree(torch.autograd.Function):
    @staticmethod
    def forward(ctx, qkv):
        three = qkv.shape[1] if len(qkv.shape) == 4 else qkv.shape[2]
        assert three == 3
        ctx.save_for_backward(qkv)
        return qkv[:, :, 0] * qkv[:, :, 1]

    @staticmethod
    def backward(ctx, g):
        qkv, = ctx.saved_tensors
        grad = torch.zeros_like(qkv)
        grad[:, :, 0], grad[:, :, 1] = g * qkv[:, :, {k}], g * qkv[:, :, 0]
        return grad
'''
RIGHT = {"sin": "s", "conj": "True", "k": "1"}
# planted: the gradient rotated forward again (not the conjugate); q's gradient times v, not k
WRONG = {"sin": "s", "conj": "False", "k": "2"}
# planted, in place mode's trouble only: sin negated where the option writes into g
IN_PLACE_WRONG = {**RIGHT, "sin": "(-s if ctx.in_place else s)"}


def _reference(x, cos, sin):
    """The rotation written with plain tensor ops (autograd differentiates it)."""
    r = 2 * cos.shape[-1]
    x1, x2 = x[..., :r].chunk(2, dim=-1)
    c, s = cos[: x.shape[1], None, :], sin[: x.shape[1], None, :]
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c, x[..., r:]], dim=-1)


def test_the_reduced_rotation_is_autograd_of_the_same_forward(tmp_path):
    path = tmp_path / "rotary_case.py"
    path.write_text(SOURCE.format(**RIGHT))
    module = load_source(path, "rotary_case")
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(2, 3, 2, 6, dtype=torch.float64, generator=gen, requires_grad=True)
    angle = torch.randn(4, 2, dtype=torch.float64, generator=gen)
    g = torch.randn(2, 3, 2, 6, dtype=torch.float64, generator=gen)
    want = torch.autograd.grad(_reference(x, angle.cos(), angle.sin()), x, g)
    for in_place in (False, True):
        xx = x.detach().clone().requires_grad_()
        got = torch.autograd.grad(module.Rotary.apply(xx * 1, angle.cos(), angle.sin(),
                                                      in_place), xx, g.clone())
        torch.testing.assert_close(got, want)
    qkv = torch.randn(2, 4, 3, 2, 5, dtype=torch.float64, generator=gen, requires_grad=True)
    g = torch.randn(2, 4, 2, 5, dtype=torch.float64, generator=gen)
    want = torch.autograd.grad(qkv[:, :, 0] * qkv[:, :, 1], qkv, g)
    torch.testing.assert_close(torch.autograd.grad(module.PackedThree.apply(qkv), qkv, g), want)


def test_half_width_caches_are_synthesised_and_planted_wrong_backwards_fail(tmp_path):
    rows = check_rows(tmp_path / "rotary_right.py", SOURCE.format(**RIGHT))
    row = rows["Rotary"]
    assert row["verdict"] == "pass", (row["reason"], row["report"]["findings"])
    assert "cos: float64 (3, 2)" in row["inputs"] and "sin: float64 (3, 2)" in row["inputs"]
    asked = {f["code"]: f for f in row["report"]["findings"] if "in_place=True" in f["message"]}
    assert asked and all(f["severity"] == "warning" for f in asked.values()), asked
    assert rows["PackedThree"]["verdict"] == "pass", rows["PackedThree"]["reason"]
    assert "qkv: float64 (2, 3, 3, 4)" in rows["PackedThree"]["inputs"]
    rows = check_rows(tmp_path / "rotary_wrong.py", SOURCE.format(**WRONG))
    for name in ("Rotary", "PackedThree"):
        assert rows[name]["verdict"] == "fail", (name, rows[name]["reason"])
        assert "gradient-mismatch" in error_codes(rows[name]), error_codes(rows[name])
    row = check_rows(tmp_path / "rotary_in_place.py", SOURCE.format(**IN_PLACE_WRONG))["Rotary"]
    assert row["verdict"] == "fail", row["reason"]
    assert "gradient-mismatch" in error_codes(row), error_codes(row)
