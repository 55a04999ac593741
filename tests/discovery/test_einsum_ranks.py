"""An einsum equation states each operand's rank: ``einsum('bki,bki->bk', data, w)`` needs a
3-D ``data`` (issue 18, corpus 14a: plenoxels' tc_plenoxel ``TrilinearInterpolate`` was
skipped, "the number of subscripts in the equation (3) does not match the number of
dimensions (2)"). Reduced case written here: a weighted sum over the last axis whose weights
come from a second (non-differentiated) argument, its correct backward, a planted wrong one,
and the list form ``einsum(eq, [a, b])``."""

from __future__ import annotations

import ast
import importlib.util
import textwrap

import pytest
import torch

import gradsmith
from gradsmith.discovery import Synthesized, synthesize
from gradsmith.discovery.einsum_ranks import read_einsum_ranks
from gradsmith.discovery.hints import Hint

CASE = '''
import torch


class CornerBlend(torch.autograd.Function):
    @staticmethod
    def forward(ctx, values, frac):
        a, b = frac[:, 0].to(values.dtype), frac[:, 1].to(values.dtype)
        w = torch.stack([a * b, a * (1 - b), (1 - a) * b, (1 - a) * (1 - b)], -1).unsqueeze(1)
        ctx.save_for_backward(w)
        return torch.einsum('bci, bci -> bc', values, w)

    @staticmethod
    def backward(ctx, g):
        (w,) = ctx.saved_tensors
        return g[..., None] * w, None


class CornerBlendWrong(CornerBlend):
    @staticmethod
    def backward(ctx, g):
        (w,) = ctx.saved_tensors
        return g[..., None] * w.flip(-1), None  # weights of the opposite corners
'''


@pytest.fixture(scope="module")
def module(tmp_path_factory):
    path = tmp_path_factory.mktemp("einsum") / "einsum_case.py"
    path.write_text(textwrap.dedent(CASE))
    spec = importlib.util.spec_from_file_location("einsum_case", path)
    found = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(found)  # source must be readable: the hints parse it
    return found


def test_the_operand_gets_the_equations_rank(module):
    found = synthesize(module.CornerBlend)
    assert isinstance(found, Synthesized), found
    values, frac = found.args[:2]
    assert values.dim() == 3 and values.shape[-1] == 4
    # Independent reference: autograd of the same blend written without the Function
    leaf = values.detach().clone().requires_grad_(True)
    a, b = frac[:, 0].to(leaf.dtype), frac[:, 1].to(leaf.dtype)
    w = torch.stack([a * b, a * (1 - b), (1 - a) * b, (1 - a) * (1 - b)], -1)[:, None]
    (want,) = torch.autograd.grad((leaf * w).sum(-1).pow(2).sum(), leaf)
    leaf2 = values.detach().clone().requires_grad_(True)
    (got,) = torch.autograd.grad(module.CornerBlend.apply(leaf2, frac).pow(2).sum(), leaf2)
    torch.testing.assert_close(got, want)


def test_correct_blend_passes_and_the_planted_wrong_one_fails(module):
    values, frac = synthesize(module.CornerBlend).args[:2]
    assert values.requires_grad and not frac.requires_grad  # backward returns None for frac
    assert gradsmith.check(module.CornerBlend, values, frac).passed
    wrong = gradsmith.check(module.CornerBlendWrong, values, frac)
    assert "gradient-mismatch" in wrong.codes("error"), str(wrong)


def test_list_form_ellipsis_and_non_literal_equations():
    hints = {n: Hint() for n in ("a", "b", "c", "eq")}
    read_einsum_ranks(ast.parse("torch.einsum('ij,jk->ik', [a, b])"), hints)
    assert (hints["a"].rank_min, hints["b"].rank_min) == (2, 2)
    read_einsum_ranks(ast.parse("torch.einsum('...ij,j->...i', c, b)"), hints)
    assert hints["c"].rank_min == 2  # at least the letters it names
    before = {n: h.rank_min for n, h in hints.items()}
    read_einsum_ranks(ast.parse("torch.einsum(eq, a, b, c)"), hints)  # not literal: nothing
    assert {n: h.rank_min for n, h in hints.items()} == before
