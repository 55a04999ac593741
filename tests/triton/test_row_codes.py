"""Zero-config inputs for a tensor of per-row codes a Triton kernel loads and compares with
integer literals (tests/triton/row_code_kernels.py): drawn from those literals, so a correct
Function passes and a wrong derivative of one code still fails. Judged against plain PyTorch."""

import copy

import pytest
import row_code_kernels as R
import torch

import gradsmith
from gradsmith.discovery import Synthesized, synthesize

_SYNTHESIZED: dict = {}


def _sets(fn):
    if fn not in _SYNTHESIZED:  # interpreted probes take seconds: once per Function
        _SYNTHESIZED[fn] = synthesize(fn)
    found = copy.deepcopy(_SYNTHESIZED[fn])
    assert isinstance(found, Synthesized), found.reason
    return [found.args, *(v.args for v in found.variants)]


def test_codes_are_drawn_from_the_literals_the_kernel_compares_with():
    for x, codes in _sets(R.RowCoded):
        assert codes.dtype == torch.int64 and not codes.requires_grad
        assert codes.shape == x.shape[:-1]
        assert set(codes.tolist()) <= {0, 1, 2}
    x, codes = _sets(R.RowCoded)[0]
    assert set(codes.tolist()) == {0, 1, 2}  # three rows: every code once


def test_float_codes_reach_default_branches_where_forward_and_backward_differ():
    # Why random floats are invalid codes: forward's default is sin, backward's x (code 1's).
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    out = R.RowCoded.apply(x, torch.tensor([0.3, -1.2, 0.7], dtype=torch.float64))
    torch.testing.assert_close(out, x.sin(), atol=1e-5, rtol=1e-5)
    out.sum().backward()
    torch.testing.assert_close(x.grad, x.detach(), atol=1e-5, rtol=1e-5)
    assert (x.grad - x.detach().cos()).abs().max() > 0.1


def test_the_correct_kernel_agrees_with_plain_pytorch_on_every_set():
    for x, codes in _sets(R.RowCoded):
        mine, ref = x.detach().clone().requires_grad_(), x.detach().clone().requires_grad_()
        out, want = R.RowCoded.apply(mine, codes), R.row_coded_reference(ref, codes)
        torch.testing.assert_close(out, want, atol=1e-5, rtol=1e-5)
        g = torch.randn(out.shape, dtype=out.dtype, generator=torch.Generator().manual_seed(3))
        out.backward(g)
        want.backward(g)
        torch.testing.assert_close(mine.grad, ref.grad, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("fn, wrong", [(R.RowCoded, None), (R.RowCodedBadSine, "x")],
                         ids=["correct", "bad-sine"])
def test_zero_config_verdicts_on_every_set(fn, wrong):
    bad = set()
    for args in _sets(fn):
        report = gradsmith.check(fn, *args, checks=["gradients"])
        bad |= {(f.code, f.input) for f in report.findings if f.is_error}
    assert bad == (set() if wrong is None else {("gradient-mismatch", wrong)}), bad
