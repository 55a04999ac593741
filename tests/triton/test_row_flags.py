"""A per-row flag a Triton kernel tests against one literal (``if keep == 0: return``) is
drawn as that literal and another value, so kept rows are computed: a correct Function passes
on every set, a wrong derivative fails. Judged against plain PyTorch
(tests/triton/row_flag_kernels.py)."""

import row_flag_kernels as R
import torch

import gradsmith
from gradsmith.discovery import Synthesized, synthesize


def _sets(fn):
    found = synthesize(fn)
    assert isinstance(found, Synthesized), found.reason
    return [found.args, *(v.args for v in found.variants)]


def test_flags_keep_and_mask_rows_and_the_kernel_agrees_with_plain_pytorch():
    sets = _sets(R.RowMasked)
    x, keep = sets[0]
    assert keep.dtype == torch.int64 and set(keep.tolist()) == {0, 1}
    for x, keep in sets:
        mine, ref = x.detach().clone().requires_grad_(), x.detach().clone().requires_grad_()
        out, want = R.RowMasked.apply(mine, keep), R.row_masked_reference(ref, keep)
        torch.testing.assert_close(out, want, atol=1e-5, rtol=1e-5)
        g = torch.randn(out.shape, dtype=out.dtype, generator=torch.Generator().manual_seed(3))
        out.backward(g)
        want.backward(g)
        torch.testing.assert_close(mine.grad, ref.grad, atol=1e-5, rtol=1e-5)


def test_zero_config_verdicts():
    for fn, wrong in ((R.RowMasked, False), (R.RowMaskedDouble, True)):
        args = _sets(fn)[0]
        report = gradsmith.check(fn, *args, checks=["gradients"])
        codes = {f.code for f in report.findings if f.is_error}
        assert ("gradient-mismatch" in codes) is wrong, (fn, report.findings)
        assert not any(f.code == "not-exercised" for f in report.findings)
