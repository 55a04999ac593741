"""A non-contiguous-input finding names the input whose layout changes results (the cause),
and says which gradients changed: judged against plain PyTorch on each layout alone."""

import kernels as K
import layout_kernels as L
import torch

import gradsmith


def _xw():
    gen = torch.Generator().manual_seed(1)
    return (torch.randn(3, 8, dtype=torch.float64, generator=gen),
            torch.randn(8, dtype=torch.float64, generator=gen))


def _strided(t):
    return torch.stack([t, torch.zeros_like(t)], dim=-1).select(-1, 0)


def _run(fn, x, w):
    x, w = x.clone().requires_grad_(True), w.clone().requires_grad_(True)
    xs = x.transpose(0, 1).contiguous().transpose(0, 1) if x.dim() == 2 else x
    return fn.apply(xs, w), x, w


def test_the_weights_layout_alone_changes_x_gradient_not_x_layout():
    # Independent of gradsmith: the kernel against the reference, one input strided at a time.
    x, w = (a.float() for a in _xw())
    g = torch.randn(3, 8, generator=torch.Generator().manual_seed(2))
    want = x.clone().requires_grad_(True)
    ref = K.rms_norm_reference(want, w)
    ref.backward(g)
    out, xx, _ = _run(L.RmsNormUnitStrideWeight, x, w)  # x transposed, weight contiguous
    out.backward(g)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(xx.grad, want.grad, atol=1e-5, rtol=1e-5)
    xx = x.clone().requires_grad_(True)
    out = L.RmsNormUnitStrideWeight.apply(xx, _strided(w))  # weight strided
    out.backward(g)
    assert (out - ref).abs().max() > 0.1
    assert (xx.grad - want.grad).abs().max() > 0.1


def test_the_finding_names_the_weight_and_the_gradients_that_changed():
    report = gradsmith.check(L.RmsNormUnitStrideWeight, *_xw(), checks=["robustness"])
    found = [f for f in report.findings if f.code == "noncontiguous-mismatch"]
    assert [f.input for f in found] == ["weight"], report
    assert found[0].details["made_noncontiguous"] == "weight"
    assert "output out" in found[0].details["changed"]
    assert "the gradient of x" in found[0].details["changed"]
    assert "with weight non-contiguous (the other inputs contiguous)" in found[0].message


def test_a_norm_that_makes_its_weight_contiguous_has_no_layout_finding():
    report = gradsmith.check(K.RmsNorm, *_xw(), checks=["robustness"])
    assert "noncontiguous-mismatch" not in report.codes(), report


def test_a_grad_output_read_with_unit_stride_is_one_finding_naming_grad_output():
    # Independent of gradsmith: a transposed grad_output changes both gradients.
    x, w = (a.float().requires_grad_(True) for a in _xw())
    g = torch.randn(3, 8, generator=torch.Generator().manual_seed(2))
    out = L.RmsNormUnitStrideGrad.apply(x, w)
    dx, dw = torch.autograd.grad(out, (x, w), g.t().contiguous().t())
    want = torch.autograd.grad(K.rms_norm_reference(x, w), (x, w), g)
    assert (dx - want[0]).abs().max() > 0.1 and (dw - want[1]).abs().max() > 0.1
    report = gradsmith.check(L.RmsNormUnitStrideGrad, *_xw(), checks=["robustness"])
    found = [f for f in report.findings if f.code == "noncontiguous-mismatch"]
    assert [f.input for f in found] == [None], report
    assert found[0].details["made_noncontiguous"] == "grad_output"
    assert set(found[0].details["changed"]) == {"the gradient of x", "the gradient of weight"}
    assert "with a non-contiguous grad_output" in found[0].message
